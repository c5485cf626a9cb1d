package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
)

// Reads send Fetch requests themselves, through the source's one client
// (one connection per broker, whatever the number of partitions and
// concurrent reads), instead of running a franz-go consumer per partition:
//
//   - one request per broker carries every partition of the read that the
//     broker leads, at its exact next offset (never a consumer group,
//     never a reset: a gone offset answers OFFSET_OUT_OF_RANGE, which the
//     read checks against the listed offsets before calling it data loss);
//   - a partition leaves the requests as soon as it reaches the end of its
//     range, so no read waits for a fetch timeout at the end of a range
//     and nothing is fetched past the range but the rest of the last
//     record batch;
//   - nothing is assigned or unassigned: a franz-go consumer re-assigned
//     to a new partition waits for a metadata refresh (10 ms or more)
//     every time, which was the cost of a batch over many partitions.
//
// Records are handed to the callback range by range, in the split's order
// and in offset order within a range, whatever order the responses come
// in, so a re-run of a split sees the same sequence. Records of a later
// range fetched before its turn wait in memory; a range stops being
// fetched once it holds maxBufferedBytes.
//
// Control records (transaction markers) and, with read_committed,
// aborted records advance the position but are not handed out, so a
// range that ends on a marker is finished.

// defaultPartitionFetchBytes is Kafka's and franz-go's 1 MiB default.
// Larger does not read faster here (measured in bench/), and whatever a
// fetch returns past a range's end is thrown away.
const defaultPartitionFetchBytes = 1 << 20

// defaultFetchMaxBytes is Kafka's fetch.max.bytes default (50 MiB).
const defaultFetchMaxBytes = 50 << 20

// defaultReadMaxWait bounds how long a broker holds a read's fetch when
// it has nothing to return yet. Planned ranges end at or below the high
// watermark, so a broker normally answers at once; the wait only matters
// while a leader moves.
const defaultReadMaxWait = 500 * time.Millisecond

// maxRetriesOutOfRange bounds retries of an OFFSET_OUT_OF_RANGE that the
// offsets listed just after do not confirm (a leader change in progress).
const maxRetriesOutOfRange = 3

// retryBackoff is the pause before fetching again after a round that
// failed (unknown leader, a broker unreachable).
const retryBackoff = 100 * time.Millisecond

var (
	errOutOfRange  = errors.New("offset out of range")
	errPollTimeout = errors.New("poll timeout")
	errNoLeader    = errors.New("partition unknown to the brokers")
)

// rangeRead is the progress of one range of a read.
type rangeRead struct {
	Range
	tp      TopicPartition
	next    int64
	buf     []record // fetched before the range's turn
	bufSize int
	retries int
}

func (r *rangeRead) done() bool { return r.next >= r.To }

// record is what a read keeps of a fetched record (not a control record).
type record struct {
	offset     int64
	timestamp  int64 // µs
	key, value []byte
}

func (r *rangeRead) add(kr *kgo.Record) {
	r.buf = append(r.buf, record{offset: kr.Offset, timestamp: kr.Timestamp.UnixMicro(), key: kr.Key, value: kr.Value})
	r.bufSize += len(kr.Value) + len(kr.Key)
}

// Read calls fn for every record of the split's ranges, range by range
// and in offset order, with Record.Value, Key, Topic, Partition, Offset,
// Timestamp (broker timestamp, microseconds) and Part ("topic-3") set.
// Offsets missing from a range (compaction, transaction markers) are
// passed over. If a range's data is gone from the broker, it fails with a
// *DataLossError, or with failOnDataLoss false logs a warning and
// continues from the earliest available offset. It fails when no record
// of the split arrives within the poll timeout, and stops when ctx is
// done.
func (s *Source) Read(ctx context.Context, split source.Split, fn func(*source.Record) error) error {
	ranges, err := DecodeRanges(split.Desc)
	if err != nil {
		return err
	}
	if s.isClosed() {
		return errors.New("read kafka: source is closed")
	}
	rs := make([]*rangeRead, len(ranges))
	for i, r := range ranges {
		rs[i] = &rangeRead{Range: r, tp: r.TP(), next: r.From}
	}
	var (
		rec  source.Record
		meta recordMeta
		last *rangeRead
	)
	emit := func(r *rangeRead, kr record) error {
		if r != last {
			// Per range, not per record: its name and its topic and
			// partition columns.
			last = r
			rec.Part = r.tp.String()
			meta.topic, meta.partition = row.StringValue(r.Topic), row.LongValue(int64(r.Partition))
		}
		meta.key, meta.offset, meta.ts = kr.key, kr.offset, kr.timestamp
		rec.Value, rec.Offset, rec.Meta = kr.value, kr.offset, &meta
		return fn(&rec)
	}
	cur := 0
	lastProgress := time.Now()
	var call *fetchCall // the round in flight
	defer func() {
		if call != nil {
			call.cancel()
			call.wg.Wait()
		}
	}()
	for {
		// Send the next round before handing out what the last one
		// brought, so that the broker works while fn decodes: one
		// round in flight, as a franz-go consumer keeps one fetch
		// buffered. The active ranges are the ones not finished whose
		// turn it is, and later ones while they hold less than a
		// partition fetch.
		if call == nil {
			var active []*rangeRead
			for _, r := range rs[cur:] {
				if !r.done() && s.ahead.take(r) {
					lastProgress = time.Now()
				}
			}
			for i, r := range rs[cur:] {
				if !r.done() && (i == 0 || r.bufSize < s.maxBufferedBytes()) {
					active = append(active, r)
				}
			}
			if len(active) > 0 {
				call = s.startFetch(ctx, active)
			}
		}
		// Hand out, in order, what the ranges whose turn it is hold.
		for cur < len(rs) {
			r := rs[cur]
			for _, kr := range r.buf {
				if err := emit(r, kr); err != nil {
					return err
				}
			}
			if r.done() {
				r.buf, r.bufSize = nil, 0
				cur++
				continue
			}
			// Keep the slice for the range's next records; drop what
			// it points to.
			clear(r.buf)
			r.buf, r.bufSize = r.buf[:0], 0
			break
		}
		if cur == len(rs) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			r := rs[cur]
			return fmt.Errorf("read kafka %s at offset %d: %w", r.tp, r.next, err)
		}
		if call == nil {
			// Nothing was active: the ranges in turn finished from
			// what was buffered; hand out the next ones.
			lastProgress = time.Now()
			continue
		}
		progressed, failed, err := s.finishFetch(ctx, call)
		active := call.active
		call = nil
		if err != nil {
			return err
		}
		if progressed {
			lastProgress = time.Now()
			continue
		}
		if time.Since(lastProgress) > s.pollTimeout {
			r := active[0]
			if err := s.checkLost(ctx, r, errPollTimeout); err != nil {
				return err
			}
			lastProgress = time.Now()
			continue
		}
		if failed {
			t := time.NewTimer(retryBackoff)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
}

// fetchCall is one round of Fetch requests in flight: one request to
// each leader of the round's active ranges.
type fetchCall struct {
	active   []*rangeRead
	leaderOK bool                   // false: the leaders could not be looked up
	noLeader []*rangeRead           // active ranges whose partition has no known leader
	ids      map[string][16]byte    // topic ids, for the responses
	brokers  []int32                // in request order
	byBroker map[int32][]*rangeRead // each request's ranges
	resps    []*kmsg.FetchResponse
	errs     []error
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

// startFetch sends one Fetch request to each leader of the active
// ranges, from their next offsets, without waiting for the answers.
func (s *Source) startFetch(ctx context.Context, active []*rangeRead) *fetchCall {
	ctx, cancel := context.WithCancel(ctx)
	c := &fetchCall{active: active, cancel: cancel, byBroker: map[int32][]*rangeRead{}}
	tps := make([]TopicPartition, len(active))
	for i, r := range active {
		tps[i] = r.tp
	}
	leaders, ids, err := s.leaders(ctx, tps)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Debug("kafka metadata for a read failed; retrying", "err", err)
		}
		c.errs = []error{err}
		return c
	}
	c.leaderOK, c.ids = true, ids
	for _, r := range active {
		b, ok := leaders[r.tp]
		if !ok {
			// No leader known: the topic may be gone. finishFetch
			// asks checkLost.
			c.noLeader = append(c.noLeader, r)
			continue
		}
		if c.byBroker[b] == nil {
			c.brokers = append(c.brokers, b)
		}
		c.byBroker[b] = append(c.byBroker[b], r)
	}
	c.resps = make([]*kmsg.FetchResponse, len(c.brokers))
	c.errs = make([]error, len(c.brokers))
	for i, b := range c.brokers {
		req := s.fetchRequest(c.byBroker[b], ids)
		c.wg.Go(func() {
			resp, err := req.RequestWith(ctx, s.admin.Broker(int(b)))
			c.resps[i], c.errs[i] = resp, err
		})
	}
	return c
}

// finishFetch waits for a round's answers and takes them in. progressed
// says whether a range moved; failed whether a request or a partition
// failed in a way worth a pause.
func (s *Source) finishFetch(ctx context.Context, c *fetchCall) (progressed, failed bool, err error) {
	c.wg.Wait()
	defer c.cancel()
	if !c.leaderOK {
		if ctx.Err() != nil {
			return false, false, fmt.Errorf("read kafka: %w", ctx.Err())
		}
		return false, true, nil
	}
	for _, r := range c.noLeader {
		if err := s.checkLost(ctx, r, errNoLeader); err != nil {
			return false, false, err
		}
		failed = true
	}
	for i, b := range c.brokers {
		if c.errs[i] == nil && c.resps[i].ErrorCode != 0 {
			c.errs[i] = kerr.ErrorForCode(c.resps[i].ErrorCode)
		}
		if c.errs[i] != nil {
			if ctx.Err() != nil {
				return false, false, fmt.Errorf("read kafka: %w", ctx.Err())
			}
			s.log.Debug("kafka fetch failed; retrying", "broker", b, "err", c.errs[i])
			s.forgetLeaders()
			failed = true
			continue
		}
		p, f, err := s.takeFetch(ctx, c.resps[i], c.byBroker[b], c.ids)
		if err != nil {
			return false, false, err
		}
		progressed = progressed || p
		failed = failed || f
	}
	return progressed, failed, nil
}

// fetchRequest asks for every range's partition at its next offset.
func (s *Source) fetchRequest(rs []*rangeRead, ids map[string][16]byte) *kmsg.FetchRequest {
	c := s.set.client
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(defaultReadMaxWait / time.Millisecond)
	if c.fetchMaxWait > 0 && c.fetchMaxWait < defaultReadMaxWait {
		req.MaxWaitMillis = int32(c.fetchMaxWait / time.Millisecond)
	}
	req.MinBytes = 1
	req.MaxBytes = defaultFetchMaxBytes
	if c.fetchMaxBytes > 0 {
		req.MaxBytes = c.fetchMaxBytes
	}
	partBytes := c.partFetchBytes
	if partBytes == 0 {
		partBytes = defaultPartitionFetchBytes
	}
	if c.readCommitted {
		req.IsolationLevel = 1
	}
	topicAt := map[string]int{}
	for _, r := range rs {
		i, ok := topicAt[r.Topic]
		if !ok {
			i = len(req.Topics)
			topicAt[r.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = r.Topic, ids[r.Topic]
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = r.Partition
		p.FetchOffset = r.next
		p.PartitionMaxBytes = partBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return req
}

// takeFetch moves the ranges forward with a fetch response, buffering
// their records, and handles per-partition errors.
func (s *Source) takeFetch(ctx context.Context, resp *kmsg.FetchResponse, rs []*rangeRead, ids map[string][16]byte) (progressed, failed bool, err error) {
	byTP := make(map[TopicPartition]*rangeRead, len(rs))
	for _, r := range rs {
		byTP[r.tp] = r
	}
	byID := map[[16]byte]string{}
	for t, id := range ids {
		byID[id] = t
	}
	iso := kgo.ReadUncommitted()
	if s.set.client.readCommitted {
		iso = kgo.ReadCommitted()
	}
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		topic := rt.Topic
		if topic == "" {
			topic = byID[rt.TopicID]
		}
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			r := byTP[TopicPartition{topic, rp.Partition}]
			if r == nil {
				continue
			}
			before := r.next
			// Plain batches go straight into the range's records; what
			// lies past the range's end is cut off for the ahead cache.
			n := len(r.buf)
			if recs, nextOff, ok := s.plainRecords(r.buf, rp, r.next); ok {
				for k := n; k < len(recs); k++ {
					kr := &recs[k]
					if kr.offset >= r.To {
						if nextOff > r.To {
							s.ahead.put(r.tp, r.To, nextOff, recs[k:])
						}
						clear(recs[k:])
						recs = recs[:k]
						r.next = r.To
						break
					}
					r.next = kr.offset + 1
					r.bufSize += len(kr.value) + len(kr.key)
				}
				r.buf = recs
				if nextOff > r.next {
					r.next = min(nextOff, r.To)
				}
				if r.next > before {
					progressed = true
					r.retries = 0
				}
				continue
			}
			fp, nextOff := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				KeepControlRecords: true, Offset: r.next, IsolationLevel: iso, Topic: r.Topic, Partition: r.Partition,
			}, rp, s.decompressor, nil)
			for k, kr := range fp.Records {
				if kr.Offset < r.next {
					continue
				}
				if kr.Offset >= r.To {
					if fp.Err == nil && nextOff > r.To {
						s.ahead.put(r.tp, r.To, nextOff, kgoRecords(fp.Records[k:]))
					}
					r.next = r.To
					break
				}
				r.next = kr.Offset + 1
				if kr.Attrs.IsControl() {
					continue
				}
				r.add(kr)
			}
			if fp.Err == nil && nextOff > r.next {
				// Aborted batches and markers past the last record kept.
				r.next = min(nextOff, r.To)
			}
			if r.next > before {
				progressed = true
				r.retries = 0
			}
			if fp.Err == nil || r.done() {
				continue
			}
			switch {
			case errors.Is(fp.Err, kerr.OffsetOutOfRange):
				err = s.checkLost(ctx, r, errOutOfRange)
			case errors.Is(fp.Err, kerr.UnknownTopicOrPartition), errors.Is(fp.Err, kerr.UnknownTopicID):
				s.forgetLeaders()
				err = s.checkLost(ctx, r, errNoLeader)
			case kerr.IsRetriable(fp.Err):
				s.forgetLeaders()
			default:
				err = fmt.Errorf("read kafka %s at offset %d: %w", r.tp, r.next, fp.Err)
			}
			if err != nil {
				return false, false, err
			}
			failed = true
		}
	}
	return progressed, failed, nil
}

// checkLost lists the range's partition bounds after a fetch that could
// not continue (out of range, no leader, no record within the poll
// timeout) and decides: retry (the offset is there), data loss (fail, or
// skip with failOnDataLoss false), or a plain error.
func (s *Source) checkLost(ctx context.Context, r *rangeRead, cause error) error {
	bounds, lerr := s.bounds(ctx, r.tp)
	if lerr != nil {
		return errors.Join(fmt.Errorf("read kafka %s at offset %d: %w", r.tp, r.next, cause), lerr)
	}
	if r.next >= bounds.earliest && r.next <= bounds.latest {
		if errors.Is(cause, errPollTimeout) {
			return fmt.Errorf("read kafka %s: no record at or after offset %d within %s although the latest offset is %d (range ends at %d)",
				r.tp, r.next, s.pollTimeout, bounds.latest, r.To)
		}
		if r.retries++; r.retries > maxRetriesOutOfRange*10 || (errors.Is(cause, errOutOfRange) && r.retries > maxRetriesOutOfRange) {
			return fmt.Errorf("read kafka %s at offset %d: %w (earliest %d, latest %d)", r.tp, r.next, kerr.OffsetOutOfRange, bounds.earliest, bounds.latest)
		}
		s.forgetLeaders()
		return nil
	}
	loss := &DataLossError{Topic: r.Topic, Partition: r.Partition, Wanted: r.next, Earliest: bounds.earliest, Latest: bounds.latest}
	if s.set.failOnLoss {
		return loss
	}
	if r.next < bounds.earliest {
		s.log.Warn("kafka offsets lost while reading, skipping to the earliest available offset (failOnDataLoss is false)",
			"partition", r.tp.String(), "wanted", r.next, "earliest", bounds.earliest, "skipped", min(bounds.earliest, r.To)-r.next)
		r.next = min(bounds.earliest, r.To)
	} else {
		s.log.Warn("kafka partition is behind the planned offsets (topic recreated?), skipping the rest of the range (failOnDataLoss is false)",
			"partition", r.tp.String(), "wanted", r.next, "latest", bounds.latest, "range_end", r.To)
		r.next = r.To
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

// maxBufferedBytes is how much a range waiting for its turn may hold
// before it is no longer fetched: one partition fetch.
func (s *Source) maxBufferedBytes() int {
	if b := s.set.client.partFetchBytes; b > 0 {
		return int(b)
	}
	return defaultPartitionFetchBytes
}

// leaderCache maps partitions to their leaders and topics to their ids,
// from metadata the reads ask for when a partition is missing or a fetch
// said the leaders moved.
type leaderCache struct {
	mu      sync.Mutex
	leaders map[TopicPartition]int32
	ids     map[string][16]byte
	known   map[string]bool // topics asked about since the last forget
}

// leaders returns the leader of each partition the brokers know, and the
// ids of their topics.
func (s *Source) leaders(ctx context.Context, tps []TopicPartition) (map[TopicPartition]int32, map[string][16]byte, error) {
	c := &s.leaderCache
	c.mu.Lock()
	var missing []string
	seen := map[string]bool{}
	for _, tp := range tps {
		if _, ok := c.leaders[tp]; !ok && !c.known[tp.Topic] && !seen[tp.Topic] {
			seen[tp.Topic] = true
			missing = append(missing, tp.Topic)
		}
	}
	c.mu.Unlock()
	if len(missing) > 0 {
		req := kmsg.NewPtrMetadataRequest()
		for _, t := range missing {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, s.admin)
		if err != nil {
			return nil, nil, fmt.Errorf("read kafka metadata of %v: %w", missing, err)
		}
		c.mu.Lock()
		if c.leaders == nil {
			c.leaders, c.ids, c.known = map[TopicPartition]int32{}, map[string][16]byte{}, map[string]bool{}
		}
		for _, t := range resp.Topics {
			if t.Topic == nil {
				continue
			}
			c.known[*t.Topic] = true
			if t.ErrorCode != 0 {
				continue
			}
			c.ids[*t.Topic] = t.TopicID
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					c.leaders[TopicPartition{*t.Topic, p.Partition}] = p.Leader
				}
			}
		}
		for _, t := range missing {
			c.known[t] = true
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[TopicPartition]int32, len(tps))
	ids := make(map[string][16]byte, len(seen))
	for _, tp := range tps {
		if b, ok := c.leaders[tp]; ok {
			out[tp] = b
			ids[tp.Topic] = c.ids[tp.Topic]
		}
	}
	return out, ids, nil
}

// forgetLeaders makes the next read ask for metadata again.
func (s *Source) forgetLeaders() {
	c := &s.leaderCache
	c.mu.Lock()
	c.leaders, c.ids, c.known = nil, nil, nil
	c.mu.Unlock()
}

// defaultAheadBytes bounds the records a source keeps past the ends of the
// ranges it read (see aheadCache).
const defaultAheadBytes = 64 << 20

// aheadCache keeps, per partition, the records a fetch returned past the
// end of the range it was for, so that the next batch's range, which
// starts exactly there, takes them instead of fetching them again. Kafka
// answers a fetch with whole record batches, so a batch of 20 records per
// partition out of record batches of 200 would otherwise fetch and decode
// every record ten times; Spark's cached consumers keep their fetched
// buffer across batches for the same reason. An entry covers the offsets
// [start, end) completely (markers and aborted records are already left
// out), so taking it is the same as fetching it. Entries are dropped when
// a read starts elsewhere, and nothing is kept beyond the byte bound.
type aheadCache struct {
	mu      sync.Mutex
	max     int
	size    int
	entries map[TopicPartition]*aheadEntry
}

type aheadEntry struct {
	start, end int64
	recs       []record // offsets in [start, end), ascending; no control records
	size       int
}

// kgoRecords are kgo's records as a read keeps them, control records
// left out.
func kgoRecords(krs []*kgo.Record) []record {
	out := make([]record, 0, len(krs))
	for _, kr := range krs {
		if !kr.Attrs.IsControl() {
			out = append(out, record{offset: kr.Offset, timestamp: kr.Timestamp.UnixMicro(), key: kr.Key, value: kr.Value})
		}
	}
	return out
}

// compact copies records into one slab, so that a kept entry does not
// hold the whole fetch response in memory.
func compact(recs []record) ([]record, int) {
	n := 0
	for _, r := range recs {
		n += len(r.key) + len(r.value)
	}
	slab := make([]byte, 0, n)
	out := make([]record, 0, len(recs))
	for _, r := range recs {
		c := record{offset: r.offset, timestamp: r.timestamp}
		// A null key or value stays null (nil), an empty one empty.
		if r.key != nil {
			k := len(slab)
			slab = append(slab, r.key...)
			c.key = slab[k:len(slab):len(slab)]
		}
		if r.value != nil {
			v := len(slab)
			slab = append(slab, r.value...)
			c.value = slab[v:len(slab):len(slab)]
		}
		out = append(out, c)
	}
	return out, n + 48*len(out)
}

func (c *aheadCache) put(tp TopicPartition, start, end int64, krs []record) {
	c.mu.Lock()
	if old := c.entries[tp]; old != nil {
		c.size -= old.size
		delete(c.entries, tp)
	}
	full := c.size >= c.max
	c.mu.Unlock()
	if full {
		return
	}
	recs, size := compact(krs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size+size > c.max || c.entries[tp] != nil {
		return
	}
	if c.entries == nil {
		c.entries = map[TopicPartition]*aheadEntry{}
	}
	c.entries[tp] = &aheadEntry{start: start, end: end, recs: recs, size: size}
	c.size += size
}

// take moves r forward over the records kept for its partition, if they
// start where r is. It reports whether r moved.
func (c *aheadCache) take(r *rangeRead) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[r.tp]
	if e == nil {
		return false
	}
	delete(c.entries, r.tp)
	c.size -= e.size
	if r.next < e.start || r.next >= e.end {
		return false
	}
	for k, kr := range e.recs {
		if kr.offset < r.next {
			continue
		}
		if kr.offset >= r.To {
			// The rest stays for the next batch (its slab is shared, so
			// its size stays counted).
			rest := *e
			rest.start, rest.recs = r.To, e.recs[k:]
			c.entries[r.tp] = &rest
			c.size += rest.size
			r.next = r.To
			return true
		}
		r.next = kr.offset + 1
		r.buf = append(r.buf, kr)
		r.bufSize += len(kr.key) + len(kr.value)
	}
	r.next = min(e.end, r.To)
	return true
}
