package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/statestore"
)

// overTheWire returns err as the driver's client receives it: the status
// an executor's handler returns, marshalled as gRPC sends it
// (grpc-status-details-bin) and read back.
func overTheWire(t *testing.T, err error) error {
	t.Helper()
	b, merr := proto.Marshal(status.Convert(err).Proto())
	if merr != nil {
		t.Fatal(merr)
	}
	var p spb.Status
	if uerr := proto.Unmarshal(b, &p); uerr != nil {
		t.Fatal(uerr)
	}
	return status.ErrorProto(&p)
}

// Every domain sentinel found by a task on an executor matches again on
// the driver, with the executor's message, the executor named and a code
// that is neither UNAVAILABLE (executor lost) nor UNKNOWN; it matches no
// other sentinel.
func TestDomainErrorsCrossGRPCIntact(t *testing.T) {
	ctx := context.Background()
	// How each sentinel is found in a task: wrapped as the packages that
	// return it wrap it (a struct error, or %w after a prefix).
	found := map[error]error{
		source.ErrDataLoss: fmt.Errorf("batch 3: map task 0: read split events-1: %w",
			&kafka.DataLossError{Topic: "events", Partition: 1, Wanted: 200, Earliest: 300, Latest: 500}),
		statestore.ErrCorrupt:                fmt.Errorf("load state partition 2 version 4: state file s/2/4.delta: checksum mismatch: %w", statestore.ErrCorrupt),
		statestore.ErrMemoryLimit:            &statestore.MemoryLimitError{Partition: 3, Used: 300 << 20, Limit: 256 << 20},
		checkpoint.ErrFenced:                 fmt.Errorf("write sink log: %w", &checkpoint.FencedError{Batch: 4, Object: "sink/_log/4"}),
		checkpoint.ErrIncompatibleCheckpoint: fmt.Errorf("read metadata: format version 9 is newer than this build's 2: %w", checkpoint.ErrIncompatibleCheckpoint),
		ErrLeaseExpired:                      fmt.Errorf("put state/0/5.delta: %w", ErrLeaseExpired),
		row.ErrMalformed:                     fmt.Errorf("map task 1: record 7: %w", row.ErrMalformed),
		join.ErrCorruptSnapshot:              fmt.Errorf("load manifest snapshot m/1: %w", join.ErrCorruptSnapshot),
		join.ErrNoManifest:                   fmt.Errorf("join.path s3://dim holds no parquet files (0 objects listed): %w", join.ErrNoManifest),
	}
	if len(found) != len(domainKinds) {
		t.Fatalf("%d sentinels tested, %d in the table", len(found), len(domainKinds))
	}
	kinds := map[string]bool{}
	for _, k := range domainKinds {
		t.Run(k.kind, func(t *testing.T) {
			if kinds[k.kind] {
				t.Fatalf("kind %s twice in the table", k.kind)
			}
			kinds[k.kind] = true
			orig, ok := found[k.err]
			if !ok {
				t.Fatalf("no test error for %v", k.err)
			}
			sent := TaskStatus(ctx, orig)
			if c := status.Code(sent); c == codes.Unavailable || c == codes.Unknown || c == codes.OK {
				t.Fatalf("sent with code %v", c)
			}
			got := DecodeDomain(overTheWire(t, sent), "exec-7")
			if !errors.Is(got, k.err) {
				t.Fatalf("received %T %v: does not match %v", got, got, k.err)
			}
			for _, other := range domainKinds {
				if other.err != k.err && errors.Is(got, other.err) && !errors.Is(orig, other.err) {
					t.Errorf("received error also matches %v", other.err)
				}
			}
			var re *RemoteError
			if !errors.As(got, &re) {
				t.Fatalf("received %T, want *RemoteError", got)
			}
			if re.Executor != "exec-7" || re.Kind != k.kind {
				t.Errorf("executor %q kind %q, want exec-7 %s", re.Executor, re.Kind, k.kind)
			}
			if got.Error() != orig.Error() {
				t.Errorf("message %q, want the executor's %q", got.Error(), orig.Error())
			}
			if status.Code(got) != k.code || status.Code(fmt.Errorf("batch 3: %w", got)) != k.code {
				t.Errorf("status code %v (wrapped %v), want %v", status.Code(got), status.Code(fmt.Errorf("x: %w", got)), k.code)
			}
			if Elsewhere(got) != k.local {
				t.Errorf("may run elsewhere: %v, want %v", Elsewhere(got), k.local)
			}
		})
	}
}

// What is not a domain error stays as it was: the task's failure with its
// code, a status as the task returned it, cancellation; a kind a newer
// build sends is a plain failure.
func TestOtherErrorsCrossGRPCAsBefore(t *testing.T) {
	ctx := context.Background()
	plain := errors.New("read split events-1: connection reset")
	got := DecodeDomain(overTheWire(t, TaskStatus(ctx, plain)), "exec-1")
	var re *RemoteError
	if status.Code(got) != codes.Internal || errors.As(got, &re) || status.Convert(got).Message() != plain.Error() || !Elsewhere(got) {
		t.Fatalf("a plain task error arrived as %T %v", got, got)
	}
	aborted := status.Error(codes.Aborted, "push refused")
	if got := DecodeDomain(overTheWire(t, TaskStatus(ctx, aborted)), "exec-1"); status.Code(got) != codes.Aborted || errors.As(got, &re) {
		t.Fatalf("a task's status arrived as %T %v", got, got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if got := TaskStatus(cancelled, fmt.Errorf("read: %w", source.ErrDataLoss)); status.Code(got) != codes.Canceled {
		t.Fatalf("a cancelled task reports %v", got)
	}
	st, err := status.New(codes.DataLoss, "lost in a newer way").WithDetails(&sluicepb.DomainError{Kind: "LOST_IN_A_NEWER_WAY"})
	if err != nil {
		t.Fatal(err)
	}
	got = DecodeDomain(overTheWire(t, st.Err()), "exec-1")
	if errors.As(got, &re) || status.Code(got) != codes.DataLoss || !Elsewhere(got) {
		t.Fatalf("an unknown kind arrived as %T %v", got, got)
	}
	if DecodeDomain(nil, "exec-1") != nil {
		t.Fatal("nil decoded to an error")
	}
}
