package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Config builds a Source.
type Config struct {
	// Kafka holds the source options of the query spec.
	Kafka query.KafkaSource
	// Logger receives warnings (skipped data) and client errors. Nil
	// discards them.
	Logger *slog.Logger
	// Clients, if set, is the process's client cache: sources with the
	// same connection settings (bootstrap servers, security protocol, SASL
	// and TLS settings, client.id) share one client, so a process keeps one
	// set of broker connections per Kafka cluster. Fetch settings (sizes,
	// isolation, wait) are per request and do not split the cache. Nil
	// gives the source a client of its own.
	Clients *source.Shared
	// PollTimeout bounds how long Read waits for the next record of its
	// range before it fails, like Spark's kafkaConsumer.pollTimeoutMs.
	// Zero means two minutes.
	PollTimeout time.Duration
}

// DefaultPollTimeout is Spark's kafkaConsumer.pollTimeoutMs default.
const DefaultPollTimeout = 2 * time.Minute

// maxSkipRecords bounds the skip counts kept for SkippedOffsets.
const maxSkipRecords = 256

// Source is the Kafka source. Its methods are safe for concurrent use.
type Source struct {
	set         *settings
	desc        string // the subscription, for Description
	log         *slog.Logger
	base        []kgo.Opt   // seeds, auth, TLS, logger: shared by every client
	admin       *kgo.Client // shared with other sources when Config.Clients is set
	adm         *kadm.Client
	release     func() // closes admin, or gives it back to Config.Clients
	pollTimeout time.Duration
	// decompressor and leaderCache serve Read (read.go): every read goes
	// through admin, one connection per broker for all of them.
	decompressor kgo.Decompressor
	leaderCache  leaderCache
	ahead        aheadCache
	closed       atomic.Bool

	mu       sync.Mutex
	skips    map[string]int64 // skipped offsets by range key, see recordSkip
	skipKeys []string         // insertion order, for eviction

	closeOnce sync.Once
}

var (
	_ source.Source  = (*Source)(nil)
	_ source.Lag     = (*Source)(nil)
	_ source.Skipped = (*Source)(nil)
)

// New validates the options and builds a Source. It reads the PEM files
// named by ssl.* options but does not contact the brokers: the first
// method that needs them connects.
func New(cfg Config) (*Source, error) {
	set, err := parse(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	copts, err := set.client.clientOpts()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := append([]kgo.Opt{kgo.SeedBrokers(set.seeds...), kgo.WithLogger(kgoLogger{log})}, copts...)
	mk := func() (*kgo.Client, error) {
		cl, err := kgo.NewClient(base...)
		if err != nil {
			return nil, fmt.Errorf("create kafka client: %w", err)
		}
		return cl, nil
	}
	var (
		admin   *kgo.Client
		release func()
	)
	if cfg.Clients != nil {
		var shared any
		shared, release, err = cfg.Clients.Acquire("kafka:"+connectionKey(set.seeds, set.client), func() (any, func(), error) {
			cl, err := mk()
			if err != nil {
				return nil, nil, err
			}
			return cl, cl.Close, nil
		})
		if err == nil {
			admin = shared.(*kgo.Client)
		}
	} else if admin, err = mk(); err == nil {
		release = admin.Close
	}
	if err != nil {
		return nil, err
	}
	pt := cfg.PollTimeout
	if pt <= 0 {
		pt = DefaultPollTimeout
	}
	s := &Source{
		set:         set,
		desc:        cfg.Kafka.Subscribe + cfg.Kafka.SubscribePattern + cfg.Kafka.Assign,
		log:         log,
		base:        base,
		admin:       admin,
		adm:         kadm.NewClient(admin),
		release:     release,
		pollTimeout: pt,
		skips:       map[string]int64{},

		decompressor: kgo.DefaultDecompressor(),
	}
	s.ahead.max = defaultAheadBytes
	r := (query.Spec{Source: query.Source{Kafka: &cfg.Kafka}}).Redacted().Source.Kafka
	log.Debug("kafka source configured", "bootstrapServers", r.BootstrapServers, "subscribe", r.Subscribe,
		"subscribePattern", r.SubscribePattern, "assign", r.Assign, "startingOffsets", r.StartingOffsets,
		"failOnDataLoss", set.failOnLoss, "maxOffsetsPerTrigger", r.MaxOffsetsPerTrigger,
		"minPartitions", r.MinPartitions, "options", r.Options)
	return s, nil
}

func (s *Source) isClosed() bool { return s.closed.Load() }

// Close releases the connections. It is idempotent.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.release()
	})
	return nil
}

// Initial returns startingOffsets resolved against the brokers: earliest
// or latest offsets of every subscribed partition, or the given JSON map
// with -2 and -1 replaced by the partition's earliest and latest offsets.
// As in Spark, a JSON map must name every partition of the subscribed
// topics.
func (s *Source) Initial(ctx context.Context) (source.Offset, error) {
	topics, err := s.topicsNow(ctx)
	if err != nil {
		return nil, err
	}
	switch s.set.starting {
	case "earliest", "latest":
		kind := earliestOffsets
		if s.set.starting == "latest" {
			kind = latestOffsets
		}
		m, err := s.list(ctx, kind, topics)
		if err != nil {
			return nil, err
		}
		return toOffsets(m).Encode(), nil
	}
	earliest, err := s.list(ctx, earliestOffsets, topics)
	if err != nil {
		return nil, err
	}
	latest, err := s.list(ctx, latestOffsets, topics)
	if err != nil {
		return nil, err
	}
	out := Offsets{}
	var errs []error
	for _, tp := range s.set.startOffsets.Partitions() {
		off, _ := s.set.startOffsets.Get(tp)
		e, okE := earliest[tp]
		l, okL := latest[tp]
		if !okE || !okL {
			errs = append(errs, fmt.Errorf("source.kafka.startingOffsets names %s, which does not exist", tp))
			continue
		}
		switch off {
		case -2:
			off = e
		case -1:
			off = l
		}
		out.Set(tp, off)
	}
	for _, tp := range sortedTPs(latest) {
		if _, ok := s.set.startOffsets.Get(tp); !ok {
			errs = append(errs, fmt.Errorf("source.kafka.startingOffsets must give an offset for every partition of the subscribed topics (-2 earliest, -1 latest): %s is missing", tp))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out.Encode(), nil
}

// Latest returns the latest offsets (high watermarks, or last stable
// offsets with isolation.level read_committed) of every partition of the
// subscribed topics, including partitions and (with subscribePattern)
// topics that appeared since start. Partitions of start that are gone keep
// their start offset. A partition whose latest offset went below start
// (the topic was recreated) reports the lower value; Next then applies
// failOnDataLoss. now is not used: Kafka offsets are not time-based.
func (s *Source) Latest(ctx context.Context, start source.Offset, now time.Time) (source.Offset, error) {
	st, err := DecodeOffsets(start)
	if err != nil {
		return nil, err
	}
	topics, err := s.topicsNow(ctx)
	if err != nil {
		return nil, err
	}
	latest, err := s.list(ctx, latestOffsets, topics)
	if err != nil {
		return nil, err
	}
	for tp, off := range latest {
		st.Set(tp, off)
	}
	return st.Encode(), nil
}

// Next plans the end of the next batch from start, no further than limit
// (or than the latest offsets when limit is empty), capped by
// maxOffsetsPerTrigger split across partitions in proportion to their
// backlog exactly as Spark's rateLimit does (see rateLimit).
//
// Partitions that are not in start (new partitions, new topics) start at
// their earliest offset. A start offset below the earliest available
// offset, or above the latest (topic recreated), is data loss: with
// failOnDataLoss it fails with a *DataLossError; without, it logs a
// warning, plans from the earliest available offset, and remembers how
// many offsets were skipped for SkippedOffsets.
func (s *Source) Next(ctx context.Context, start, limit source.Offset) (source.Offset, error) {
	st, err := DecodeOffsets(start)
	if err != nil {
		return nil, err
	}
	topics, err := s.topicsNow(ctx)
	if err != nil {
		return nil, err
	}
	earliest, err := s.list(ctx, earliestOffsets, topics)
	if err != nil {
		return nil, err
	}
	latest, err := s.list(ctx, latestOffsets, topics)
	if err != nil {
		return nil, err
	}
	lim := toOffsets(latest)
	if len(limit) > 0 {
		if lim, err = DecodeOffsets(limit); err != nil {
			return nil, err
		}
	}

	end := Offsets{}
	var skipped int64
	for _, tp := range st.Partitions() {
		off, _ := st.Get(tp)
		end.Set(tp, off) // partitions no longer listed stay put
		if _, listed := latest[tp]; listed || !s.subscribed(tp) {
			continue
		}
		// A subscribed partition that no longer exists: its topic was
		// deleted. Spark reports this as data loss too.
		loss := &DataLossError{Topic: tp.Topic, Partition: tp.Partition, Wanted: off, Earliest: -1, Latest: -1}
		if s.set.failOnLoss {
			return nil, loss
		}
		s.log.Warn("kafka partition is gone (topic deleted?), keeping its offset (failOnDataLoss is false)",
			"partition", tp.String(), "offset", off)
	}
	var (
		tps  []TopicPartition
		from []int64
		to   []int64
	)
	for _, tp := range sortedTPs(latest) {
		e, ok := earliest[tp]
		if !ok {
			continue // appeared between the two listings: next time
		}
		hw := latest[tp]
		f, known := st.Get(tp)
		if !known {
			f = e
		} else if f < e || f > hw {
			loss := &DataLossError{Topic: tp.Topic, Partition: tp.Partition, Wanted: f, Earliest: e, Latest: hw}
			if s.set.failOnLoss {
				return nil, loss
			}
			n := int64(0)
			if f < e {
				n = e - f
			}
			s.log.Warn("kafka offsets lost, skipping to the earliest available offset (failOnDataLoss is false)",
				"partition", tp.String(), "wanted", f, "earliest", e, "latest", hw, "skipped", n)
			skipped += n
			f = e
		}
		l, ok := lim.Get(tp)
		if !ok {
			l = f
		}
		tps = append(tps, tp)
		from = append(from, f)
		to = append(to, max(f, l))
	}
	for i, e := range rateLimit(s.set.maxPerTrigger, from, to) {
		end.Set(tps[i], e)
	}
	enc := end.Encode()
	if skipped > 0 {
		s.recordSkip(start, enc, skipped)
	}
	return enc, nil
}

// Splits divides [start, end) into read tasks (see planTasks): one per
// partition with data, more when minPartitions asks for more tasks than
// there are partitions with data, fewer when partitions have fewer than
// minOffsetsPerTask offsets each (they then share tasks). Partitions not in start begin at their earliest offset. It checks
// the start offsets against the brokers' earliest offsets again (a re-run
// of a logged batch comes here without Next): with failOnDataLoss a lost
// offset fails with a *DataLossError, without it the range starts at the
// earliest available offset and the skip is counted.
func (s *Source) Splits(ctx context.Context, start, end source.Offset) ([]source.Split, error) {
	st, err := DecodeOffsets(start)
	if err != nil {
		return nil, err
	}
	en, err := DecodeOffsets(end)
	if err != nil {
		return nil, err
	}
	var check []TopicPartition
	topicSet := map[string]bool{}
	for _, tp := range en.Partitions() {
		to, _ := en.Get(tp)
		if f, ok := st.Get(tp); ok && f == to {
			continue
		}
		check = append(check, tp)
		topicSet[tp.Topic] = true
	}
	if len(check) == 0 {
		return nil, nil
	}
	earliest, err := s.list(ctx, earliestOffsets, slices.Sorted(maps.Keys(topicSet)))
	if err != nil {
		return nil, err
	}
	var ranges []Range
	var skipped int64
	for _, tp := range check {
		to, _ := en.Get(tp)
		e, haveE := earliest[tp]
		f, known := st.Get(tp)
		switch {
		case !known:
			f = 0
			if haveE {
				f = e
			}
			if f > to {
				s.log.Warn("kafka offsets of a new partition were deleted before they were read",
					"partition", tp.String(), "planned_end", to, "earliest", f)
				f = to
			}
		case haveE && (f < e || f > to):
			loss := &DataLossError{Topic: tp.Topic, Partition: tp.Partition, Wanted: f, Earliest: e, Latest: -1}
			if s.set.failOnLoss {
				return nil, loss
			}
			if f < e {
				skipped += min(e, to) - f
			}
			f = min(e, to)
		case f > to:
			// Not listed (topic gone) and planned backwards: nothing to read.
			f = to
		}
		ranges = append(ranges, Range{Topic: tp.Topic, Partition: tp.Partition, From: f, To: to})
	}
	if skipped > 0 {
		s.recordSkip(start, end, skipped)
	}
	tasks := planTasks(ranges, s.set.minPartitions, s.set.minPerTask)
	out := make([]source.Split, len(tasks))
	for i, rs := range tasks {
		out[i] = GroupSplit(rs)
	}
	return out, nil
}

// SkippedOffsets reports how many offsets the batch [start, end) skipped
// because they were lost and failOnDataLoss is false.
//
// The offsets keep Spark's format exactly, so the count is not in them: it
// is kept in memory by the Next and Splits calls of this Source (the larger
// of the two), for the last 256 batches. A driver that restarts and re-runs
// a batch recomputes it in Splits; offsets lost while a map task reads
// them (after planning) are logged by that task but not counted here.
func (s *Source) SkippedOffsets(start, end source.Offset) int64 {
	s.mu.Lock()
	none := len(s.skips) == 0
	s.mu.Unlock()
	if none {
		return 0 // the usual case: no need to canonicalise two offsets of every partition
	}
	k := skipKey(start, end)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skips[k]
}

func (s *Source) recordSkip(start, end source.Offset, n int64) {
	k := skipKey(start, end)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.skips[k]; ok {
		s.skips[k] = max(old, n)
		return
	}
	s.skips[k] = n
	s.skipKeys = append(s.skipKeys, k)
	if len(s.skipKeys) > maxSkipRecords {
		delete(s.skips, s.skipKeys[0])
		s.skipKeys = s.skipKeys[1:]
	}
}

// skipKey canonicalises both offsets, so that equal positions written
// differently find the same entry.
func skipKey(start, end source.Offset) string {
	canon := func(b source.Offset) string {
		if o, err := DecodeOffsets(b); err == nil {
			return string(o.Encode())
		}
		return string(b)
	}
	return canon(start) + "\x00" + canon(end)
}

// Lag returns, per partition ("topic-3") and in total, the latest offset
// minus end (never negative). Partitions not in end count from their
// earliest offset.
func (s *Source) Lag(ctx context.Context, end source.Offset) (map[string]int64, int64, error) {
	en, err := DecodeOffsets(end)
	if err != nil {
		return nil, 0, err
	}
	topics, err := s.topicsNow(ctx)
	if err != nil {
		return nil, 0, err
	}
	latest, err := s.list(ctx, latestOffsets, topics)
	if err != nil {
		return nil, 0, err
	}
	var earliest map[TopicPartition]int64
	per := make(map[string]int64, len(latest))
	var total int64
	for _, tp := range sortedTPs(latest) {
		e, ok := en.Get(tp)
		if !ok {
			if earliest == nil {
				if earliest, err = s.list(ctx, earliestOffsets, topics); err != nil {
					return nil, 0, err
				}
			}
			e = earliest[tp]
		}
		lag := max(0, latest[tp]-e)
		per[tp.String()] = lag
		total += lag
	}
	return per, total, nil
}

// CommitToGroup writes end as the committed offsets of the consumer group
// named by commitOffsetsToGroup, so that Kafka tools (kafka-consumer-groups,
// lag exporters) can show the query's progress. It does nothing when the
// option is empty. The commit is for display only: the source never reads
// group offsets back, the checkpoint is the only cursor. Call it after a
// batch is committed; a failure does not affect the query.
func (s *Source) CommitToGroup(ctx context.Context, end source.Offset) error {
	if s.set.commitGroup == "" {
		return nil
	}
	en, err := DecodeOffsets(end)
	if err != nil {
		return err
	}
	os := kadm.Offsets{}
	for _, tp := range en.Partitions() {
		off, _ := en.Get(tp)
		os.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: off, LeaderEpoch: -1})
	}
	if err := s.adm.CommitAllOffsets(ctx, s.set.commitGroup, os); err != nil {
		return fmt.Errorf("commit kafka offsets to group %s: %w", s.set.commitGroup, err)
	}
	return nil
}

// topicsNow returns the subscribed topics: the subscribe list, the assign
// topics, or the existing topics matching subscribePattern. It always asks
// a broker for fresh metadata, which also refreshes the client's metadata
// cache that the offset listings then use: new topics and partitions are
// seen at once, and the listings of one call agree on the partitions.
func (s *Source) topicsNow(ctx context.Context) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	var topics []string
	switch {
	case s.set.assign != nil:
		topics = slices.Sorted(maps.Keys(s.set.assign))
	case s.set.pattern == nil:
		topics = s.set.topics
	}
	if s.set.pattern == nil {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, s.admin)
	if err != nil {
		return nil, fmt.Errorf("read kafka metadata: %w", err)
	}
	if s.set.pattern == nil {
		return topics, nil
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.IsInternal || t.ErrorCode != 0 {
			continue
		}
		if s.set.pattern.MatchString(*t.Topic) {
			topics = append(topics, *t.Topic)
		}
	}
	slices.Sort(topics)
	return topics, nil
}

// subscribed reports whether the subscription covers tp.
func (s *Source) subscribed(tp TopicPartition) bool {
	switch {
	case s.set.assign != nil:
		return slices.Contains(s.set.assign[tp.Topic], tp.Partition)
	case s.set.pattern != nil:
		return s.set.pattern.MatchString(tp.Topic)
	}
	return slices.Contains(s.set.topics, tp.Topic)
}

type offsetKind int

const (
	earliestOffsets offsetKind = iota
	latestOffsets
)

// list returns the earliest or latest offsets of every partition of the
// given topics (of the assigned partitions with assign). Topics that do
// not exist are left out; assigned partitions that do not exist are an
// error.
func (s *Source) list(ctx context.Context, kind offsetKind, topics []string) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	if len(topics) == 0 {
		return out, nil // kadm would list every topic
	}
	var (
		lo   kadm.ListedOffsets
		err  error
		what string
	)
	switch {
	case kind == earliestOffsets:
		what = "earliest"
		lo, err = s.adm.ListStartOffsets(ctx, topics...)
	case s.set.client.readCommitted:
		what = "last stable"
		lo, err = s.adm.ListCommittedOffsets(ctx, topics...)
	default:
		what = "latest"
		lo, err = s.adm.ListEndOffsets(ctx, topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s kafka offsets of %v: %w", what, topics, err)
	}
	var errs []error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				return
			}
			errs = append(errs, fmt.Errorf("list %s kafka offsets of %s: %w", what, TopicPartition{o.Topic, o.Partition}, o.Err))
			return
		}
		tp := TopicPartition{o.Topic, o.Partition}
		if s.set.assign != nil && !slices.Contains(s.set.assign[o.Topic], o.Partition) {
			return
		}
		out[tp] = o.Offset
	})
	if s.set.assign != nil {
		for _, t := range topics {
			for _, p := range s.set.assign[t] {
				if _, ok := out[TopicPartition{t, p}]; !ok && len(errs) == 0 {
					errs = append(errs, fmt.Errorf("source.kafka.assign names %s, which does not exist", TopicPartition{t, p}))
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func toOffsets(m map[TopicPartition]int64) Offsets {
	o := Offsets{}
	for tp, off := range m {
		o.Set(tp, off)
	}
	return o
}

func sortedTPs(m map[TopicPartition]int64) []TopicPartition {
	return slices.SortedFunc(maps.Keys(m), compareTP)
}

// kgoLogger passes franz-go's warnings and errors to slog.
type kgoLogger struct{ l *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelWarn
	if level == kgo.LogLevelError {
		l = slog.LevelError
	}
	k.l.Log(context.Background(), l, "kafka client: "+msg, keyvals...)
}
