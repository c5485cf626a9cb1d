package shuffle

import (
	"context"
	"fmt"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/wire"
)

// Owner is the executor that owns a state partition during a batch.
type Owner struct {
	ID      string
	Address string
}

// PushError says which owner a push failed to reach or store at.
type PushError struct {
	Owner Owner
	Err   error
}

func (e *PushError) Error() string {
	return fmt.Sprintf("push partials to executor %s (%s): %v", e.Owner.ID, e.Owner.Address, e.Err)
}

func (e *PushError) Unwrap() error { return e.Err }

// Pusher sends map task output to partition owners.
type Pusher struct {
	// Self is this executor's id: partitions it owns go to Local without a
	// network hop.
	Self  string
	Local *Buffer
	// Dial returns a ShuffleService client for an owner's address.
	Dial func(address string) (sluicepb.ShuffleServiceClient, error)
	// ChunkBytes is the target chunk size (default wire.DefaultChunkBytes).
	ChunkBytes int
	// PieceBytes bounds one message's data (default DefaultPieceBytes): a
	// chunk larger than that (one record larger than the chunk target)
	// goes as pieces the receiver joins, so no message exceeds the gRPC
	// limit whatever a record's size.
	PieceBytes int
}

// DefaultPieceBytes is the most data one pushed message carries, far
// below the cluster's gRPC message limit (rpcauth.MaxMessageBytes).
const DefaultPieceBytes = 512 << 10

// Output is one map task's output by state partition: Partials (with
// Layout) for an aggregation, Rows for a pass-through query.
type Output struct {
	Layout   *agg.Layout
	Partials [][]agg.Entry
	Rows     [][]row.Row
}

func (o *Output) partitions() int {
	if o.Layout != nil {
		return len(o.Partials)
	}
	return len(o.Rows)
}

// encode hands partition p's records to c.
func (o *Output) encode(p ids.PartitionID, c *wire.Chunker) (records int64, err error) {
	if o.Layout != nil {
		var scratch []byte
		for _, e := range o.Partials[p] {
			var b []byte
			b, scratch = wire.AppendEntry(c.Buf(), o.Layout, e, scratch)
			if err := c.Done(b); err != nil {
				return records, err
			}
			records++
		}
		return records, nil
	}
	for _, r := range o.Rows[p] {
		if err := c.Done(wire.AppendRow(c.Buf(), r)); err != nil {
			return records, err
		}
		records++
	}
	return records, nil
}

// PushStats counts what a push sent (local and remote).
type PushStats struct {
	Bytes   int64
	Records int64
}

// Push sends out to owners (owners[p] owns partition p) tagged with tag,
// one stream per owner, and returns once every owner stored its
// partitions. Each owner gets a final chunk for every partition it owns,
// empty or not. A failure is a *PushError naming the owner.
func (ps *Pusher) Push(ctx context.Context, tag Tag, out *Output, owners []Owner) (PushStats, error) {
	if n := out.partitions(); n != len(owners) {
		return PushStats{}, fmt.Errorf("push partials of batch %d map %d: %d partitions but %d owners", tag.Batch, tag.Map, n, len(owners))
	}
	byOwner := map[Owner][]ids.PartitionID{}
	for p := range ids.PartitionID(len(owners)) {
		byOwner[owners[p]] = append(byOwner[owners[p]], p)
	}
	keys := make([]Owner, 0, len(byOwner))
	for o := range byOwner {
		keys = append(keys, o)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ID < keys[j].ID })
	stats := make([]PushStats, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	for i, o := range keys {
		g.Go(func() error {
			var err error
			if o.ID == ps.Self && ps.Local != nil {
				stats[i], err = ps.pushLocal(tag, out, byOwner[o])
			} else {
				stats[i], err = ps.pushRemote(gctx, tag, out, o, byOwner[o])
			}
			if err != nil {
				return &PushError{Owner: o, Err: err}
			}
			return nil
		})
	}
	err := g.Wait()
	var total PushStats
	for _, s := range stats {
		total.Bytes += s.Bytes
		total.Records += s.Records
	}
	return total, err
}

func (ps *Pusher) pushLocal(tag Tag, out *Output, parts []ids.PartitionID) (PushStats, error) {
	var st PushStats
	w := ps.Local.NewWriter(tag)
	defer w.Abort()
	for _, p := range parts {
		c := wire.NewChunker(ps.ChunkBytes, func(b []byte) error {
			st.Bytes += int64(len(b))
			return w.Append(p, b)
		})
		n, err := out.encode(p, c)
		st.Records += n
		if err == nil {
			err = c.Flush()
		}
		if err != nil {
			return st, err
		}
		if _, err := w.Finish(p); err != nil {
			return st, err
		}
	}
	return st, nil
}

func (ps *Pusher) pushRemote(ctx context.Context, tag Tag, out *Output, o Owner, parts []ids.PartitionID) (PushStats, error) {
	var st PushStats
	client, err := ps.Dial(o.Address)
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.PushPartials(ctx)
	if err != nil {
		return st, err
	}
	piece := ps.PieceBytes
	if piece <= 0 {
		piece = DefaultPieceBytes
	}
	send := func(p ids.PartitionID, data []byte, last bool) error {
		for {
			m := &sluicepb.PushPartialsRequest{
				QueryId: tag.Query, RunId: tag.Run, Batch: int64(tag.Batch), MapIndex: int32(tag.Map), Attempt: tag.Attempt,
				Partition: int32(p), Data: data, Last: last,
			}
			if len(data) > piece {
				m.Data, m.Last, m.More = data[:piece], false, true
			}
			if err := stream.Send(m); err != nil {
				return err
			}
			if !m.More {
				return nil
			}
			data = data[piece:]
		}
	}
	for _, p := range parts {
		// Hold back one chunk so the last one carries the last flag.
		var held []byte
		c := wire.NewChunker(ps.ChunkBytes, func(b []byte) error {
			st.Bytes += int64(len(b))
			if held != nil {
				if err := send(p, held, false); err != nil {
					return err
				}
			}
			held = b
			return nil
		})
		n, err := out.encode(p, c)
		st.Records += n
		if err == nil {
			err = c.Flush()
		}
		if err == nil {
			err = send(p, held, true)
		}
		if err != nil {
			// The stream's own error (from RecvMsg) says more than io.EOF.
			if _, rerr := stream.CloseAndRecv(); rerr != nil {
				return st, rerr
			}
			return st, err
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return st, err
	}
	return st, nil
}
