package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/source"
)

// Reads use franz-go's direct partition consuming (never a consumer
// group) at an exact offset, with the reset policy "none": if the offset
// is gone the broker answers OFFSET_OUT_OF_RANGE and the client reports it
// instead of silently jumping to the new log start. Control records
// (transaction markers) are kept so that the read sees every offset up to
// the end of its range even when the range ends on a marker.

// defaultPartitionFetchBytes is Kafka's and franz-go's 1 MiB default. A
// larger fetch does not read faster here: the client fetches ahead, and
// whatever it fetched past a read task's range is thrown away when the task
// ends (measured in bench/: 8 MiB made the broker send 1.5-1.9x the bytes
// read and raised peak memory with the backlog).
const defaultPartitionFetchBytes = 1 << 20

// maxRetriesOutOfRange bounds retries of an OFFSET_OUT_OF_RANGE that the
// offsets listed just after do not confirm (a leader change in progress).
const maxRetriesOutOfRange = 3

var (
	errOutOfRange  = errors.New("offset out of range")
	errPollTimeout = errors.New("poll timeout")
)

// Read calls fn for every record of the split's range, in offset order,
// with Record.Value, Key, Topic, Partition, Offset, Timestamp (broker
// timestamp, microseconds) and Part ("topic-3") set. Offsets missing from
// the range (compaction, transaction markers) are passed over. If the
// range's data is gone from the broker, it fails with a *DataLossError, or
// with failOnDataLoss false logs a warning and continues from the earliest
// available offset. It fails when no record arrives within the poll
// timeout, and stops when ctx is done.
func (s *Source) Read(ctx context.Context, split source.Split, fn func(*source.Record) error) error {
	r, err := DecodeRange(split.Desc)
	if err != nil {
		return err
	}
	tp := r.TP()
	rec := source.Record{Part: tp.String(), Topic: r.Topic, Partition: r.Partition}
	next := r.From
	retries := 0
	for next < r.To {
		rd, err := s.pool.get(tp, next)
		if err != nil {
			return err
		}
		err = s.consume(ctx, rd.cl, r, &next, &rec, fn)
		if err == nil {
			s.pool.put(rd)
			return nil
		}
		s.pool.discard(rd)
		if !errors.Is(err, errOutOfRange) && !errors.Is(err, errPollTimeout) {
			return err
		}
		// Find out whether the offset is really gone.
		bounds, lerr := s.bounds(ctx, tp)
		if lerr != nil {
			return errors.Join(err, lerr)
		}
		if next >= bounds.earliest && next <= bounds.latest {
			if errors.Is(err, errPollTimeout) {
				return fmt.Errorf("read kafka %s: no record at or after offset %d within %s although the latest offset is %d (range ends at %d)",
					tp, next, s.pollTimeout, bounds.latest, r.To)
			}
			if retries++; retries > maxRetriesOutOfRange {
				return fmt.Errorf("read kafka %s at offset %d: %w (earliest %d, latest %d)", tp, next, kerr.OffsetOutOfRange, bounds.earliest, bounds.latest)
			}
			continue
		}
		loss := &DataLossError{Topic: r.Topic, Partition: r.Partition, Wanted: next, Earliest: bounds.earliest, Latest: bounds.latest}
		if s.set.failOnLoss {
			return loss
		}
		if next < bounds.earliest {
			s.log.Warn("kafka offsets lost while reading, skipping to the earliest available offset (failOnDataLoss is false)",
				"partition", tp.String(), "wanted", next, "earliest", bounds.earliest, "skipped", min(bounds.earliest, r.To)-next)
			next = min(bounds.earliest, r.To)
		} else {
			s.log.Warn("kafka partition is behind the planned offsets (topic recreated?), skipping the rest of the range (failOnDataLoss is false)",
				"partition", tp.String(), "wanted", next, "latest", bounds.latest, "range_end", r.To)
			next = r.To
		}
	}
	return nil
}

// consume polls rd until *next reaches r.To, calling fn for the records of
// the range and advancing *next past every offset seen.
func (s *Source) consume(ctx context.Context, cl *kgo.Client, r Range, next *int64, rec *source.Record, fn func(*source.Record) error) error {
	for *next < r.To {
		pctx, cancel := context.WithTimeout(ctx, s.pollTimeout)
		fetches := cl.PollFetches(pctx)
		cancel()
		var perr error
		for i := range fetches {
			f := &fetches[i]
			for j := range f.Topics {
				ft := &f.Topics[j]
				for k := range ft.Partitions {
					p := &ft.Partitions[k]
					if ft.Topic != r.Topic || p.Partition != r.Partition {
						if p.Err != nil && perr == nil {
							perr = p.Err // injected errors: closed client, ctx
						}
						continue
					}
					for _, kr := range p.Records {
						if kr.Offset < *next {
							continue
						}
						if kr.Offset >= r.To {
							*next = r.To
							break
						}
						*next = kr.Offset + 1
						if kr.Attrs.IsControl() {
							continue
						}
						rec.Value = kr.Value
						rec.Key = kr.Key
						rec.Offset = kr.Offset
						rec.Timestamp = kr.Timestamp.UnixMicro()
						if err := fn(rec); err != nil {
							return err
						}
					}
					if p.Err != nil && *next < r.To {
						if errors.Is(p.Err, kerr.OffsetOutOfRange) {
							return fmt.Errorf("read kafka %s at offset %d: %w", r.TP(), *next, errOutOfRange)
						}
						perr = p.Err
					}
				}
			}
		}
		if *next >= r.To {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read kafka %s at offset %d: %w", r.TP(), *next, err)
		}
		if perr != nil {
			if errors.Is(perr, context.DeadlineExceeded) {
				return fmt.Errorf("read kafka %s at offset %d: %w", r.TP(), *next, errPollTimeout)
			}
			return fmt.Errorf("read kafka %s at offset %d: %w", r.TP(), *next, perr)
		}
	}
	return nil
}

type partitionBounds struct{ earliest, latest int64 }

// bounds lists one partition's earliest and latest offsets.
func (s *Source) bounds(ctx context.Context, tp TopicPartition) (partitionBounds, error) {
	var b partitionBounds
	for _, kind := range []offsetKind{earliestOffsets, latestOffsets} {
		m, err := s.list(ctx, kind, []string{tp.Topic})
		if err != nil {
			return b, err
		}
		off, ok := m[tp]
		if !ok {
			// The topic is gone: everything is.
			off = -1
		}
		if kind == earliestOffsets {
			b.earliest = off
		} else {
			b.latest = off
		}
	}
	if b.earliest < 0 {
		b.earliest, b.latest = 0, -1
	}
	return b, nil
}

// newReaderClient makes a client that consumes tp from offset from.
func (s *Source) newReaderClient(tp TopicPartition, from int64) (*kgo.Client, error) {
	c := s.set.client
	partBytes := c.partFetchBytes
	if partBytes == 0 {
		partBytes = defaultPartitionFetchBytes
	}
	opts := append(slices.Clone(s.base),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: kgo.NewOffset().At(from)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(partBytes),
	)
	if c.fetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(c.fetchMaxBytes))
	} else if partBytes > 50<<20 {
		opts = append(opts, kgo.FetchMaxBytes(partBytes))
	}
	if c.fetchMaxWait > 0 {
		opts = append(opts, kgo.FetchMaxWait(c.fetchMaxWait))
	}
	if c.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create kafka reader for %s: %w", tp, err)
	}
	return cl, nil
}

// readerPool keeps idle reading clients (and their connections) for the
// next read. A client is handed out assigned to exactly one partition at
// one offset; putting it back unassigns the partition, which drops any
// data it fetched ahead.
type readerPool struct {
	max       int
	newClient func(TopicPartition, int64) (*kgo.Client, error)

	mu     sync.Mutex
	idle   []*kgo.Client
	closed bool
}

type reader struct {
	cl *kgo.Client
	tp TopicPartition
}

func (p *readerPool) get(tp TopicPartition, from int64) (reader, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return reader{}, errors.New("read kafka: source is closed")
	}
	var cl *kgo.Client
	if n := len(p.idle); n > 0 {
		cl = p.idle[n-1]
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if cl != nil {
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: kgo.NewOffset().At(from)}})
		return reader{cl, tp}, nil
	}
	cl, err := p.newClient(tp, from)
	if err != nil {
		return reader{}, err
	}
	return reader{cl, tp}, nil
}

func (p *readerPool) put(r reader) {
	r.cl.RemoveConsumePartitions(map[string][]int32{r.tp.Topic: {r.tp.Partition}})
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.max {
		p.idle = append(p.idle, r.cl)
		r.cl = nil
	}
	p.mu.Unlock()
	if r.cl != nil {
		r.cl.Close()
	}
}

func (p *readerPool) discard(r reader) { r.cl.Close() }

func (p *readerPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, cl := range idle {
		cl.Close()
	}
}
