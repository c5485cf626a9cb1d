package microbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
)

// ErrProductionGuard is returned when a production query would start in a
// way that could silently skip or replay data.
var ErrProductionGuard = errors.New("refused by production guard")

// ErrStateBudgetExceeded: a query with stateBudget onExceed: stop passed
// its budget; the batch that passed it is committed.
var ErrStateBudgetExceeded = errors.New("state budget exceeded")

// Config is what a query's loop needs. Spec must be validated, with
// defaults applied.
type Config struct {
	Spec       query.Spec
	Checkpoint objstore.Store
	// CheckpointOnObjectStore reports whether the checkpoint location is an
	// object store (production queries require it).
	CheckpointOnObjectStore bool
	Source                  source.Source
	// Exactly one of FileSink and Writer.
	FileSink sink.FileSink
	Writer   sink.BatchWriter
	// State, if set, has the state files no retained version needs
	// deleted by the background cleaner (the driver deletes them; see
	// cleaner).
	State statestore.Provider
	// AllowFirstStart and AllowReplay let a production query start on an
	// empty checkpoint.
	AllowFirstStart, AllowReplay bool
	// Ticket and ApprovedBy go with AllowFirstStart or AllowReplay: the
	// new checkpoint's metadata records them as a checkpoint.Approval
	// (with the time) when the query is production or a ticket is given.
	Ticket, ApprovedBy string
	// MaxAttempts bounds how often one batch runs before the query fails
	// (default 3).
	MaxAttempts int
	// RetryBackoff is the first wait between attempts (default 200ms),
	// doubling each time.
	RetryBackoff time.Duration
	// IdlePoll is how long the default trigger waits when there is no new
	// data (default 100ms).
	IdlePoll time.Duration
	// PlanRetryFor is how long a query keeps retrying (with backoff) when it
	// cannot plan the next batch, or a planned batch keeps failing, because
	// the source or a store is unreachable; zero fails at once (after
	// MaxAttempts for a batch). Data loss and fencing are never retried.
	PlanRetryFor time.Duration
	Logger       *slog.Logger
	// Now is the clock (default time.Now); ignored when Clock is set.
	Now func() time.Time
	// Clock tells the time and waits (default: the real clock, with Now).
	// The batch loop's triggers, idle polls and retry back-offs wait on it.
	Clock Clock
	// Observer is told what the loop did: batches started, retries,
	// idleness and each committed batch's report (default: nobody).
	Observer progress.Observer
	// StopTimeout bounds how long a graceful stop (the Stop, Shutdown and
	// Pause signals) lets the batch in flight take to commit before it is
	// abandoned (zero: no bound).
	StopTimeout time.Duration
	// NewQueryID, if set, is the id a new checkpoint records (the driver
	// service's registry id); an existing checkpoint keeps its own.
	NewQueryID string
	// Hook, if set, is called at named points, for fault injection only:
	// after-offsets, before-sink-gather (when small outputs
	// were gathered), before-sink-commit, after-sink-commit, after-commit.
	Hook func(point string, batch ids.BatchID)
	// Manifests takes the join's dimension snapshots (required when the
	// spec has a join): one when a run plans its first batch, another
	// each join.refreshInterval; each batch's offsets/N records the one
	// it joins against.
	Manifests Manifests
}

// Manifests takes a snapshot of a stream-static join's dimension now and
// stores it in the checkpoint (join.Taker).
type Manifests interface {
	Take(ctx context.Context, now time.Time) (join.Ref, error)
}

// Query is one query's loop, bound to its checkpoint.
type Query struct {
	cfg  Config
	log  *checkpoint.Log
	meta *checkpoint.Metadata
	// qplan is the query's plan (sql: or aggregate:); layout its
	// aggregate's, nil without one.
	qplan  *query.Plan
	layout *agg.Layout
	runID  string
	conf   map[string]string
	runner task.Runner
	// jumps counts the batches of this run that moved the watermark by
	// more than watermark.maxJump; jumpMs is the current batch's move when
	// it did. Used only by the batch loop.
	jumps  int64
	jumpMs int64
	// manifest is the join snapshot new batches of this run record, taken
	// at manifestAt (zero until the first batch is planned). manifestMu
	// is held while a snapshot is stored and made current, and by the
	// cleaner while it decides which stored snapshots are unused.
	manifestMu sync.Mutex
	manifest   join.Ref
	manifestAt time.Time
	// cleaner deletes what retention no longer keeps, in the background;
	// set by Run for its duration.
	cleaner *cleaner
}

// Open reads (or, for an empty checkpoint, creates) the checkpoint's
// metadata and checks that the query can run on it.
func Open(ctx context.Context, cfg Config) (*Query, error) {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 200 * time.Millisecond
	}
	if cfg.IdlePoll <= 0 {
		cfg.IdlePoll = 100 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{now: cfg.Now}
	}
	cfg.Now = cfg.Clock.Now
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = progress.Observers(nil)
	}
	s := &cfg.Spec
	q := &Query{cfg: cfg, log: checkpoint.New(cfg.Checkpoint), runID: newID()}
	p, err := s.Plan()
	if err != nil {
		return nil, err
	}
	q.qplan = p
	if p.Aggregate != nil {
		l, err := agg.CompilePlan(p, s.OutputMode)
		if err != nil {
			return nil, err
		}
		q.layout = l
	}
	if err := guardObjectStore(&cfg); err != nil {
		return nil, err
	}
	want := wantMetadata(s)
	meta, err := q.log.ReadMetadata(ctx)
	switch {
	case errors.Is(err, objstore.ErrNotExist):
		if err := guardEmpty(&cfg); err != nil {
			return nil, err
		}
		want.QueryID = newID()
		if cfg.NewQueryID != "" {
			want.QueryID = cfg.NewQueryID
		}
		want.CreatedAt = cfg.Now().UTC().Format(time.RFC3339)
		if a := approval(&cfg, want.CreatedAt); a != nil {
			want.Approvals = []checkpoint.Approval{*a}
			cfg.Logger.Info("approval recorded", "query", s.Name, "approval", a.String())
		}
		if err := q.log.CreateMetadata(ctx, &want); err != nil {
			return nil, err
		}
		meta = &want
		cfg.Logger.Info("new checkpoint", "query", s.Name, "id", meta.QueryID, "checkpoint", s.CheckpointLocation)
	case err != nil:
		return nil, err
	default:
		if err := compatible(meta, &want); err != nil {
			return nil, fmt.Errorf("query %s on checkpoint %s: %w", s.Name, s.CheckpointLocation, err)
		}
	}
	q.meta = meta
	q.conf = map[string]string{
		"shufflePartitions": strconv.Itoa(meta.ShufflePartitions),
		"stateStore":        meta.StateStore,
		"keyHash":           meta.KeyHash,
		"watermarkPolicy":   "max",
	}
	return q, nil
}

// Admit runs the checks Open runs before it binds a query to its
// checkpoint, without creating anything: the production guards (an error
// matching ErrProductionGuard) and the compatibility of an existing
// checkpoint (matching checkpoint.ErrIncompatibleCheckpoint). cfg.Spec must
// be validated with defaults applied; only Spec, Checkpoint,
// CheckpointOnObjectStore, AllowFirstStart and AllowReplay are used.
func Admit(ctx context.Context, cfg Config) error {
	if err := guardObjectStore(&cfg); err != nil {
		return err
	}
	s := &cfg.Spec
	meta, err := checkpoint.New(cfg.Checkpoint).ReadMetadata(ctx)
	switch {
	case errors.Is(err, objstore.ErrNotExist):
		return guardEmpty(&cfg)
	case err != nil:
		return err
	}
	want := wantMetadata(s)
	if err := compatible(meta, &want); err != nil {
		return fmt.Errorf("query %s on checkpoint %s: %w", s.Name, s.CheckpointLocation, err)
	}
	return nil
}

func guardObjectStore(cfg *Config) error {
	return CheckProductionCheckpoint(&cfg.Spec, cfg.CheckpointOnObjectStore)
}

func guardEmpty(cfg *Config) error {
	s := &cfg.Spec
	if s.Environment == query.Production && !cfg.AllowFirstStart && !cfg.AllowReplay {
		return fmt.Errorf("query %s: checkpoint %s is empty; a production query starts on an empty checkpoint only when told this is a first start (--allow-first-start=TICKET) or an intended replay (--allow-replay=TICKET): a lost checkpoint must be loud: %w",
			s.Name, s.CheckpointLocation, ErrProductionGuard)
	}
	return nil
}

// approval is the consent cfg gives to start on an empty checkpoint, or
// nil when there is none to record.
func approval(cfg *Config, at string) *checkpoint.Approval {
	if !cfg.AllowFirstStart && !cfg.AllowReplay {
		return nil
	}
	if cfg.Spec.Environment != query.Production && cfg.Ticket == "" {
		return nil
	}
	kind := checkpoint.ApprovalFirstStart
	if cfg.AllowReplay {
		kind = checkpoint.ApprovalReplay
	}
	return &checkpoint.Approval{Kind: kind, Ticket: cfg.Ticket, By: cfg.ApprovedBy, At: at}
}

func wantMetadata(s *query.Spec) checkpoint.Metadata {
	return checkpoint.Metadata{
		Name:              s.Name,
		Fingerprint:       s.Fingerprint(),
		StateFingerprint:  s.StateFingerprint(),
		StateDescription:  s.StateSchemaDescription(),
		StateStore:        s.StateStore,
		ShufflePartitions: s.ShufflePartitions,
		KeyHash:           agg.KeyHashName,
	}
}

// compatible refuses a query whose state layout or frozen settings differ
// from the checkpoint's, with both values side by side.
func compatible(have, want *checkpoint.Metadata) error {
	var diffs []string
	if have.StateFingerprint != want.StateFingerprint {
		diffs = append(diffs, fmt.Sprintf("state schema: checkpoint has %q, query has %q", have.StateDescription, want.StateDescription))
	}
	if have.ShufflePartitions != want.ShufflePartitions {
		diffs = append(diffs, fmt.Sprintf("shufflePartitions: checkpoint has %d, query has %d", have.ShufflePartitions, want.ShufflePartitions))
	}
	if have.StateStore != want.StateStore {
		diffs = append(diffs, fmt.Sprintf("stateStore: checkpoint has %s, query has %s", have.StateStore, want.StateStore))
	}
	if have.KeyHash != want.KeyHash {
		diffs = append(diffs, fmt.Sprintf("key hash: checkpoint has %s, this build has %s", have.KeyHash, want.KeyHash))
	}
	if len(diffs) == 0 {
		return nil
	}
	msg := ""
	for i, d := range diffs {
		if i > 0 {
			msg += "; "
		}
		msg += d
	}
	return fmt.Errorf("%s: %w (start the changed query on a new checkpointLocation and plan the cutover)", msg, checkpoint.ErrIncompatibleCheckpoint)
}

// newID returns a random (version 4) UUID, as Spark's query and run ids
// are.
func newID() string { return uuid.NewString() }

func badRecordsDir(s *query.Spec, batch ids.BatchID, malformed int64) string {
	if malformed == 0 {
		return ""
	}
	return s.BadRecordsDir(batch)
}

// CheckProductionCheckpoint refuses a production query whose checkpoint is
// not on an object store: a local checkpoint is lost with its node.
func CheckProductionCheckpoint(s *query.Spec, onObjectStore bool) error {
	if s.Environment == query.Production && !onObjectStore {
		return fmt.Errorf("query %s: environment production needs checkpointLocation on an object store (s3://...), not %q: a local checkpoint is lost with its node: %w",
			s.Name, s.CheckpointLocation, ErrProductionGuard)
	}
	return nil
}

// QueryID returns the checkpoint's query id.
func (q *Query) QueryID() string { return q.meta.QueryID }

// Metadata returns the checkpoint's metadata.
func (q *Query) Metadata() *checkpoint.Metadata { return q.meta }

// snapshot returns the join snapshot a new batch planned at now joins
// against: the run's current one, or a new one when the run has none yet
// (a restart picks up the dimension as it is now) or join.refreshInterval
// has passed since it was taken. Nil for a query without a join.
func (q *Query) snapshot(ctx context.Context, now time.Time) (*checkpoint.ManifestRef, error) {
	j := q.cfg.Spec.Join
	if j == nil || q.qplan.Join == nil {
		return nil, nil
	}
	if q.cfg.Manifests == nil {
		return nil, fmt.Errorf("join: no manifest snapshotter configured")
	}
	q.manifestMu.Lock()
	defer q.manifestMu.Unlock()
	due := q.manifest.IsZero() || (j.RefreshInterval > 0 && now.Sub(q.manifestAt) >= j.RefreshInterval.D())
	if due {
		ref, err := q.cfg.Manifests.Take(ctx, now)
		if err != nil {
			return nil, fmt.Errorf("take join manifest snapshot: %w", err)
		}
		if ref != q.manifest {
			q.cfg.Logger.Info("join snapshot for new batches", "query", q.cfg.Spec.Name, "manifest_id", ref.ID, "previous", q.manifest.ID)
		}
		q.manifest, q.manifestAt = ref, now
	}
	return &checkpoint.ManifestRef{ID: q.manifest.ID, Hash: q.manifest.Hash}, nil
}

// batchManifest is the join snapshot a logged batch joins against: the
// one its entry records. An entry that records none (the query gained a
// join after the batch was logged) joins against the run's current
// snapshot, and says so in the log.
func (q *Query) batchManifest(ctx context.Context, e *checkpoint.OffsetEntry) (join.Ref, error) {
	if q.qplan.Join == nil {
		return join.Ref{}, nil
	}
	if m := e.Manifest; m != nil {
		return join.Ref{ID: m.ID, Hash: m.Hash}, nil
	}
	m, err := q.snapshot(ctx, q.cfg.Now())
	if err != nil {
		return join.Ref{}, fmt.Errorf("batch %d: %w", e.BatchID, err)
	}
	q.cfg.Logger.Warn("logged batch records no join snapshot (the query had no join when it was logged); joining against the current one", "query", q.cfg.Spec.Name, "batch", e.BatchID, "manifest_id", m.ID)
	e.Manifest = m // in memory only, for the batch's progress; the log is never rewritten
	return join.Ref{ID: m.ID, Hash: m.Hash}, nil
}

// attempt runs the batch's tasks and commits its sink output.
func (q *Query) attempt(ctx context.Context, e *checkpoint.OffsetEntry, wm eventtime.Batch) (*task.BatchResult, bool, error) {
	plan, err := q.batchPlan(ctx, e, wm)
	if err != nil {
		return nil, false, err
	}
	if err := q.sinkPlan(ctx, &plan); err != nil {
		return nil, false, err
	}
	res, err := q.runner.RunBatch(ctx, plan)
	if err != nil {
		return nil, false, err
	}
	return q.commitSink(ctx, e, res, plan)
}

// reduceAttempt runs the batch's reduce tasks over its map tasks' output
// (Overlap) and commits its sink output.
func (q *Query) reduceAttempt(ctx context.Context, e *checkpoint.OffsetEntry, plan task.BatchPlan, maps *task.MapOutput) (*task.BatchResult, bool, error) {
	if err := q.sinkPlan(ctx, &plan); err != nil {
		return nil, false, err
	}
	res, err := q.runner.(task.PhasedRunner).Reduce(ctx, plan, maps)
	if err != nil {
		return nil, false, err
	}
	return q.commitSink(ctx, e, res, plan)
}

// batchPlan is the logged batch e as the runner takes it: its splits (a
// function of its logged offsets), state partitions and join snapshot.
func (q *Query) batchPlan(ctx context.Context, e *checkpoint.OffsetEntry, wm eventtime.Batch) (task.BatchPlan, error) {
	cfg := q.cfg
	var splits []source.Split
	if len(e.Sources) > 0 {
		var err error
		if splits, err = cfg.Source.Splits(ctx, e.Sources[0].Start, e.Sources[0].End); err != nil {
			return task.BatchPlan{}, fmt.Errorf("batch %d: split offsets: %w", e.BatchID, err)
		}
	}
	parts, _ := strconv.Atoi(e.Conf["shufflePartitions"])
	if parts <= 0 {
		parts = cfg.Spec.ShufflePartitions
	}
	manifest, err := q.batchManifest(ctx, e)
	if err != nil {
		return task.BatchPlan{}, err
	}
	return task.BatchPlan{Batch: e.BatchID, Splits: splits, Watermark: wm, Partitions: parts, BatchTimestampMs: e.BatchTimestampMs, RunID: q.runID, Manifest: manifest}, nil
}

// sinkHas reports whether the sink log already holds the batch (a re-run
// after the sink committed: state is rebuilt, output not rewritten).
func (q *Query) sinkHas(ctx context.Context, batch ids.BatchID) (bool, error) {
	if q.cfg.FileSink == nil {
		return false, nil
	}
	done, err := q.cfg.FileSink.Committed(ctx, batch)
	if err != nil {
		return false, fmt.Errorf("batch %d: read sink log: %w", batch, err)
	}
	return done, nil
}

// sinkPlan sets what the plan's reduce tasks do with their output: skip
// the sink when its log has the batch, and return small outputs to the
// driver (GatherBelow) when the file sink gathers them.
func (q *Query) sinkPlan(ctx context.Context, plan *task.BatchPlan) error {
	var err error
	if plan.SkipSink, err = q.sinkHas(ctx, plan.Batch); err != nil {
		return err
	}
	plan.GatherBelow = 0
	if g, ok := q.cfg.FileSink.(sink.Gatherer); ok && !plan.SkipSink {
		plan.GatherBelow = g.GatherBelow(plan.Partitions)
	}
	return nil
}

// commitSink commits the batch's sink output once its tasks ran.
func (q *Query) commitSink(ctx context.Context, e *checkpoint.OffsetEntry, res *task.BatchResult, plan task.BatchPlan) (*task.BatchResult, bool, error) {
	cfg := q.cfg
	skipSink := plan.SkipSink
	var gathered []string
	if plan.GatherBelow > 0 {
		// Small outputs came back instead of into files: stage them
		// together, in few files, as the tasks stage theirs.
		var rows []sink.PartitionRows
		for _, r := range res.Reduces {
			if r.Gathered && len(r.Rows) > 0 {
				rows = append(rows, sink.PartitionRows{Partition: r.Partition, Rows: r.Rows})
			}
		}
		if len(rows) > 0 {
			q.hook("before-sink-gather", e.BatchID)
			var err error
			if gathered, err = cfg.FileSink.(sink.Gatherer).WriteGathered(ctx, sink.Batch{QueryID: q.meta.QueryID, ID: e.BatchID}, rows); err != nil {
				return nil, false, fmt.Errorf("batch %d: write gathered sink output: %w", e.BatchID, err)
			}
		}
	}
	q.hook("before-sink-commit", e.BatchID)
	switch {
	case skipSink && cfg.FileSink != nil:
		// The sink log has the batch: finish its commit (complete the
		// logged uploads; idempotent) in case a crash came between the
		// log entry and the completion.
		if err := cfg.FileSink.Commit(ctx, sink.Batch{QueryID: q.meta.QueryID, ID: e.BatchID}, nil); err != nil {
			return nil, false, fmt.Errorf("batch %d: finish sink commit: %w", e.BatchID, err)
		}
	case skipSink:
	case cfg.FileSink != nil:
		files := gathered
		for _, r := range res.Reduces {
			files = append(files, r.Files...)
		}
		sort.Strings(files)
		if err := cfg.FileSink.Commit(ctx, sink.Batch{QueryID: q.meta.QueryID, ID: e.BatchID}, files); err != nil {
			return nil, false, fmt.Errorf("batch %d: commit sink: %w", e.BatchID, err)
		}
	case cfg.Writer != nil:
		parts := make([][]row.Row, len(res.Reduces))
		var all []row.Row
		for i, r := range res.Reduces {
			parts[i] = r.Rows
			all = append(all, r.Rows...)
		}
		var err error
		if pw, ok := cfg.Writer.(sink.PartitionedBatchWriter); ok {
			err = pw.WriteBatchParts(ctx, e.BatchID, parts)
		} else {
			err = cfg.Writer.WriteBatch(ctx, e.BatchID, all)
		}
		if err != nil {
			return nil, false, fmt.Errorf("batch %d: write batch: %w", e.BatchID, err)
		}
	}
	return res, skipSink, nil
}

func (q *Query) report(ctx context.Context, cur *inflight, latest source.Offset, inRate float64, done time.Time) *progress.Report {
	cfg := q.cfg
	e, res, rerun, skipped, attempts, started, commitStart := cur.entry, cur.result, cur.rerun, cur.skipSink, cur.attempts, cur.started, cur.commitStart
	total := done.Sub(started)
	p := &progress.Report{
		ID: q.meta.QueryID, RunID: q.runID, Name: cfg.Spec.Name,
		Timestamp:          started.UTC().Format(time.RFC3339Nano),
		BatchID:            e.BatchID,
		Rerun:              rerun,
		NoData:             e.NoData,
		NumInputRows:       res.InputRows,
		InputRowsPerSecond: inRate,
		NumRowsMalformed:   res.Malformed,
		BadRecords:         badRecordsDir(&cfg.Spec, e.BatchID, res.Malformed),
		BatchWatermarkMs:   e.BatchWatermark.Millis(),
		LateWatermarkMs:    e.LateWatermark.Millis(),
		Attempts:           attempts,
		ShuffleBytes:       res.ShuffleBytes,
		DurationMs: map[string]int64{
			"map":              ms(res.MapDuration),
			"reduce":           ms(res.ReduceDuration),
			"addBatch":         ms(commitStart.Sub(started)),
			"commitOffsets":    ms(done.Sub(commitStart)),
			"triggerExecution": ms(total),
		},
		EventTime: map[string]string{"watermark": fmtWatermark(e.BatchWatermark)},
	}
	p.NumRowsTooFarAhead, p.WatermarkJumpMs, p.NumWatermarkJumps = res.TooFarAhead, q.jumpMs, q.jumps
	if q.qplan.Join != nil {
		p.Join = &progress.Join{NumRowsUnmatched: res.JoinUnmatched}
		if m := e.Manifest; m != nil {
			p.Join.ManifestID, p.Join.ManifestHash = m.ID, m.Hash
		}
	}
	p.RetentionDeleted, p.RetentionErrors = q.cleaner.take()
	if secs := total.Seconds(); secs > 0 {
		p.ProcessedRowsPerSecond = float64(res.InputRows) / secs
	}
	if res.HasEventTime {
		p.EventTime["min"] = fmtMicros(res.MinEventTime)
		p.EventTime["max"] = fmtMicros(res.MaxEventTime)
	}
	var out int64
	op := progress.StateOperator{OperatorName: "stateStoreSave", NumShufflePartitions: len(res.Reduces), NumRowsDroppedByWatermark: res.DroppedByWatermark}
	for _, r := range res.Reduces {
		out += r.NumOutputRows
		op.NumRowsTotal += r.StateRows
		op.NumRowsUpdated += r.Updated
		op.NumRowsRemoved += r.Removed
		op.MemoryUsedBytes += r.MemoryBytes
		op.NumStateStoreWrites += r.StateWrites
	}
	if q.qplan.Dedup != nil {
		// Spark's StreamingDeduplicateWithinWatermarkExec: its name, and
		// the duplicates it dropped as a custom metric.
		op.OperatorName = "dedupeWithinWatermark"
		op.CustomMetrics = map[string]int64{"numDroppedDuplicateRows": res.Duplicates}
	}
	if q.qplan.Stateful() {
		hll := int64(0)
		if a := q.qplan.Aggregate; a != nil {
			for _, m := range a.Measures {
				if m.Fn == query.FnApproxCountDistinct {
					hll++
				}
			}
		}
		if hll > 0 {
			op.CustomMetrics = map[string]int64{
				"approxCountDistinctSketches": op.NumRowsTotal * hll,
				"approxCountDistinctMaxBytes": op.NumRowsTotal * hll * progress.HLLSketchMaxBytes,
			}
		}
		p.StateOperators = []progress.StateOperator{op}
		p.StateBudget = stateBudget(&cfg.Spec, &op)
		if sb := p.StateBudget; sb != nil && sb.Exceeded {
			cfg.Logger.Warn("state budget exceeded", "query", cfg.Spec.Name, "batch", e.BatchID, "detail", sb.Message)
		}
	}
	sp := progress.Source{Description: sourceDescription(cfg.Source), NumInputRows: res.InputRows, InputRowsPerSecond: inRate, ProcessedRowsPerSecond: p.ProcessedRowsPerSecond}
	if len(e.Sources) > 0 {
		sp.StartOffset, sp.EndOffset, sp.LatestOffset = e.Sources[0].Start, e.Sources[0].End, latest
		if po, ok := cfg.Source.(source.ProgressOffsetter); ok {
			sp.StartOffset, sp.EndOffset = po.ProgressOffset(sp.StartOffset), po.ProgressOffset(sp.EndOffset)
			if len(latest) > 0 {
				sp.LatestOffset = po.ProgressOffset(latest)
			}
		}
		if lg, ok := cfg.Source.(source.Lag); ok {
			if per, tot, err := lg.Lag(ctx, e.Sources[0].End); err == nil {
				sp.Metrics = map[string]int64{"totalLag": tot}
				for k, v := range per {
					sp.Metrics["lag."+k] = v
				}
			}
		}
		if sk, ok := cfg.Source.(source.Skipped); ok {
			if n := sk.SkippedOffsets(e.Sources[0].Start, e.Sources[0].End); n > 0 {
				if sp.Metrics == nil {
					sp.Metrics = map[string]int64{}
				}
				sp.Metrics["skippedOffsets"] = n
			}
		}
	}
	p.Sources = []progress.Source{sp}
	p.Sink = progress.Sink{Description: sinkDescription(&cfg.Spec), NumOutputRows: out, Skipped: skipped}
	cfg.Logger.Debug(p.Line(), "query", cfg.Spec.Name, "batch", e.BatchID)
	cfg.Observer.Committed(p)
	return p
}

// stateBudget checks the spec's stateBudget against the state operator
// after a batch (nil when the spec sets none).
func stateBudget(s *query.Spec, op *progress.StateOperator) *progress.StateBudget {
	b := s.StateBudget
	if b == nil {
		return nil
	}
	on := b.OnExceed
	if on == "" {
		on = query.OnExceedFlag
	}
	sb := &progress.StateBudget{MaxRows: b.MaxRows, MaxBytes: b.MaxBytes, OnExceed: on, Exceeded: b.Exceeded(op.NumRowsTotal, op.MemoryUsedBytes)}
	if sb.Exceeded {
		sb.Message = fmt.Sprintf("state budget exceeded: operator %s (%s) holds %d rows, %d bytes; budget %s",
			op.OperatorName, s.StateSchemaDescription(), op.NumRowsTotal, op.MemoryUsedBytes, b)
	}
	return sb
}

// sourceDescription is progress's sources[].description: what the source
// says of itself (source.Describer), else its Go type.
func sourceDescription(src source.Source) string {
	if d, ok := src.(source.Describer); ok {
		return d.Description()
	}
	return fmt.Sprintf("%T", src)
}

func sinkDescription(s *query.Spec) string {
	switch {
	case s.Sink.Parquet != nil:
		return "FileSink[" + s.Sink.Parquet.Path + "]"
	case s.Sink.JSONBatches != nil:
		return "ForeachBatchSink[jsonBatches " + s.Sink.JSONBatches.Path + "]"
	case s.Sink.Console != nil:
		return "ConsoleSink"
	}
	return ""
}
