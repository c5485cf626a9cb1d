package shuffle

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/aggtest"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/wire"
)

// serve runs a ShuffleService over buf on 127.0.0.1 and returns a client.
func serve(t *testing.T, buf *Buffer) (string, sluicepb.ShuffleServiceClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sluicepb.RegisterShuffleServiceServer(srv, &Server{Buffer: buf})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return lis.Addr().String(), sluicepb.NewShuffleServiceClient(conn)
}

func TestPushDeliversEachPartitionToItsOwnerLocalOrRemote(t *testing.T) {
	l := aggtest.LayoutAllMeasures(t)
	const parts = 4
	out := &Output{Layout: l, Partials: aggtest.Partials(t, l, aggtest.TableRows(800), parts)}
	local, remote := NewBuffer(BufferOptions{}), NewBuffer(BufferOptions{})
	addr, client := serve(t, remote)
	owners := []Owner{{"e1", "nowhere"}, {"e2", addr}, {"e1", "nowhere"}, {"e2", addr}}
	ps := &Pusher{Self: "e1", Local: local, ChunkBytes: 100, Dial: func(a string) (sluicepb.ShuffleServiceClient, error) {
		if a != addr {
			t.Errorf("dialled %s for a remote owner", a)
		}
		return client, nil
	}}
	st, err := ps.Push(context.Background(), tag(0, 1), out, owners)
	if err != nil {
		t.Fatal(err)
	}
	var groups int64
	for _, es := range out.Partials {
		groups += int64(len(es))
	}
	if st.Records != groups || st.Bytes == 0 {
		t.Fatalf("stats %+v, want %d records", st, groups)
	}
	for p := range ids.PartitionID(parts) {
		buf := local
		if owners[p].ID == "e2" {
			buf = remote
		}
		got, err := buf.Wait(context.Background(), key1, p, []uint64{1})
		if err != nil {
			t.Fatal(err)
		}
		dec, err := wire.DecodePartials(l, got)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(aggtest.OutputRows(l, dec[0]), aggtest.OutputRows(l, out.Partials[p])) {
			t.Fatalf("partition %d: owner holds other partials than the map task sent", p)
		}
		if len(got[0]) < 2 && len(out.Partials[p]) > 10 {
			t.Fatalf("partition %d arrived in %d chunk(s); 100-byte chunks expected several", p, len(got[0]))
		}
	}
}

func TestPushToAnUnreachableOwnerNamesIt(t *testing.T) {
	l := aggtest.LayoutAllMeasures(t)
	out := &Output{Layout: l, Partials: aggtest.Partials(t, l, aggtest.TableRows(10), 1)}
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := lis.Addr().String()
	lis.Close()
	conn, err := grpc.NewClient(dead, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ps := &Pusher{Self: "e1", Dial: func(string) (sluicepb.ShuffleServiceClient, error) {
		return sluicepb.NewShuffleServiceClient(conn), nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = ps.Push(ctx, tag(0, 1), out, []Owner{{"e9", dead}})
	pe, ok := err.(*PushError)
	if !ok || pe.Owner.ID != "e9" || status.Code(pe.Err) != codes.Unavailable {
		t.Fatalf("got %v, want a PushError naming e9 with UNAVAILABLE", err)
	}
}

func TestStreamEndingBeforeTheLastChunkStoresNothing(t *testing.T) {
	buf := NewBuffer(BufferOptions{})
	_, client := serve(t, buf)
	stream, err := client.PushPartials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := &sluicepb.PushPartialsRequest{QueryId: "q", RunId: "r", Batch: 7, MapIndex: 0, Attempt: 1}
	m.Partition, m.Data, m.Last = 0, []byte("complete"), true
	stream.Send(m)
	stream.Send(&sluicepb.PushPartialsRequest{QueryId: "q", RunId: "r", Batch: 7, MapIndex: 0, Attempt: 1, Partition: 1, Data: []byte("half")})
	_, err = stream.CloseAndRecv()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want INVALID_ARGUMENT", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := buf.Wait(ctx, key1, 1, []uint64{1}); err == nil {
		t.Fatal("the unfinished partition was stored")
	}
	if mem, _ := buf.Usage(); mem != int64(len("complete")) {
		t.Fatalf("%d bytes held, want only the finished partition's", mem)
	}
}

// Rows larger than a message's limit are pushed over gRPC in pieces the
// owner joins: the server here takes messages of at most 4 KiB, the rows
// are 10 KiB, and each arrives whole.
func TestRowsLargerThanAMessageArriveWholeInPieces(t *testing.T) {
	remote := NewBuffer(BufferOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(4 << 10))
	sluicepb.RegisterShuffleServiceServer(srv, &Server{Buffer: remote})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := sluicepb.NewShuffleServiceClient(conn)
	var rows []row.Row
	for i := range 5 {
		rows = append(rows, row.Row{row.StringValue(strings.Repeat(string(rune('a'+i)), 10<<10+i)), row.StringValue("small")})
	}
	out := &Output{Rows: [][]row.Row{rows, rows[:1]}}
	owners := []Owner{{"e2", "x"}, {"e2", "x"}}
	ps := &Pusher{Self: "e1", ChunkBytes: 100, PieceBytes: 3 << 10, Dial: func(string) (sluicepb.ShuffleServiceClient, error) { return client, nil }}
	if _, err := ps.Push(context.Background(), tag(0, 1), out, owners); err != nil {
		t.Fatal(err)
	}
	for p := range ids.PartitionID(len(out.Rows)) {
		want := out.Rows[p]
		got, err := remote.Wait(context.Background(), key1, p, []uint64{1})
		if err != nil {
			t.Fatal(err)
		}
		dec, err := wire.DecodeRowsByMap(got)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dec[0], want) {
			t.Fatalf("partition %d: %d rows arrived, want %d whole rows", p, len(dec[0]), len(want))
		}
	}
	// Without pieces the same push exceeds the server's limit.
	ps.PieceBytes = 1 << 20
	if _, err := ps.Push(context.Background(), tag(0, 2), out, owners); status.Code(errors.Unwrap(err)) != codes.ResourceExhausted {
		t.Fatalf("a 10 KiB message to a 4 KiB server: %v, want ResourceExhausted", err)
	}
}
