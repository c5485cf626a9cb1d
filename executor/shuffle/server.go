package shuffle

import (
	"errors"
	"io"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/proto/sluicepb"
)

// Server serves ShuffleService into a Buffer.
type Server struct {
	sluicepb.UnimplementedShuffleServiceServer
	Buffer *Buffer
	// Accept, if set, refuses data of queries or runs this executor was
	// not prepared for (the error is returned to the sender).
	Accept func(query, run string) error
	Logger *slog.Logger
}

// PushPartials stores one map task attempt's chunks; partitions whose
// last chunk did not arrive are discarded.
func (s *Server) PushPartials(stream sluicepb.ShuffleService_PushPartialsServer) error {
	var w *Writer
	defer func() {
		if w != nil {
			w.Abort()
		}
	}()
	var received int64
	// pieces of a chunk sent in several messages (more), by partition.
	pieces := map[int32][]byte{}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		tag := Tag{BatchKey: BatchKey{Query: m.QueryId, Run: m.RunId, Batch: ids.BatchID(m.Batch)}, Map: int(m.MapIndex), Attempt: m.Attempt}
		if w == nil {
			if s.Accept != nil {
				if err := s.Accept(tag.Query, tag.Run); err != nil {
					return status.Errorf(codes.FailedPrecondition, "refuse partials of query %s run %s: %v", tag.Query, tag.Run, err)
				}
			}
			w = s.Buffer.NewWriter(tag)
		} else if w.Tag() != tag {
			return status.Errorf(codes.InvalidArgument, "push partials: one stream carries one map task attempt, got %+v after %+v", tag, w.Tag())
		}
		if m.Partition < 0 {
			return status.Errorf(codes.InvalidArgument, "push partials: partition %d is negative", m.Partition)
		}
		received += int64(len(m.Data))
		data := m.Data
		if m.More || pieces[m.Partition] != nil {
			joined := append(pieces[m.Partition], m.Data...)
			if m.More {
				if m.Last {
					return status.Errorf(codes.InvalidArgument, "push partials: partition %d: a piece marked more is marked last too", m.Partition)
				}
				pieces[m.Partition] = joined
				continue
			}
			delete(pieces, m.Partition)
			data = joined
		}
		if err := w.Append(ids.PartitionID(m.Partition), data); err != nil {
			code := codes.Internal
			if errors.Is(err, ErrFull) {
				code = codes.ResourceExhausted
			}
			return status.Error(code, err.Error())
		}
		if m.Last {
			stale, err := w.Finish(ids.PartitionID(m.Partition))
			if err != nil {
				return status.Error(codes.Aborted, err.Error())
			}
			if stale && s.Logger != nil {
				s.Logger.Debug("dropped partials of an older map attempt", "batch", tag.Batch, "map", tag.Map, "attempt", tag.Attempt, "partition", m.Partition)
			}
		}
	}
	if w != nil {
		if un := w.Unfinished(); len(un) > 0 {
			return status.Errorf(codes.InvalidArgument, "push partials: the stream ended before the last chunk of partitions %v", un)
		}
	}
	return stream.SendAndClose(&sluicepb.PushPartialsResponse{BytesReceived: received})
}
