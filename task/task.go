package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/dedup"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
)

// Env is what tasks need, built once per query in each process.
type Env struct {
	QueryID string
	Spec    *query.Spec
	// Layout is nil for a query without an aggregate (rows pass through).
	Layout *agg.Layout
	Source source.Source
	State  statestore.Provider
	// FileSink is set when reduce tasks write the output themselves; when
	// nil, reduce results carry their rows back to the driver.
	FileSink sink.FileSink
	// BadRecords receives malformed records.
	BadRecords objstore.Store
	Logger     *slog.Logger
	// Hook, if set, is called at named points of a task (fault injection).
	Hook func(point string, batch ids.BatchID)
	// Dimension serves the join's snapshots by reference (nil for a query
	// without a join).
	Dimension Dimension
	// Checkpoint is the checkpoint's store and ParquetSink the Parquet
	// sink, when Open opened them.
	Checkpoint  objstore.Store
	ParquetSink *parquet.Sink
	// Plan is the query's plan (nil: the Spec's, compiled on first use);
	// Dedup its deduplication's layout (nil: compiled from Plan).
	Plan    *query.Plan
	Dedup   *dedup.Layout
	pipe    *pipeOnce
	closers []func() error
}

// Dimension loads a stream-static join's snapshot by the reference a
// batch's offset-log entry records (join.Cache loads it from the
// checkpoint, never from the user's path).
type Dimension interface {
	Table(ctx context.Context, ref join.Ref) (*join.Table, error)
}

func (e *Env) hook(point string, batch ids.BatchID) {
	if e.Hook != nil {
		e.Hook(point, batch)
	}
}

// MapTask reads one split of a batch.
type MapTask struct {
	Batch      ids.BatchID
	Index      int
	Split      source.Split
	Late       eventtime.Watermark
	Partitions int
	// BatchTimestampMs is the batch's processing time (from its offset-log
	// entry): watermark.maxEventTimeAhead is measured from it.
	BatchTimestampMs int64
	// Manifest is the join's snapshot the batch joins against (zero
	// without a join).
	Manifest join.Ref
	// Ahead: the task runs before its batch's offsets are logged (the
	// next batch, started while this one commits): it writes nothing and
	// calls no hook; FinishMap does both once the batch is logged.
	Ahead bool
}

// MapResult is a map task's output: partials (or rows) by state partition,
// and its metrics.
type MapResult struct {
	Index int
	// Partials[p] holds the groups for state partition p (aggregations).
	Partials [][]agg.Entry
	// Rows[p] holds pass-through rows for partition p (no aggregate).
	Rows [][]row.Row
	// InputRows counts records read, malformed included.
	InputRows int64
	Malformed int64
	// DroppedByWatermark counts (row, window) pairs dropped as late on the
	// map side, where Spark counts partial-aggregate rows
	// (docs/spark-differences.md#late-rows-count).
	DroppedByWatermark int64
	// TooFarAhead counts the malformed rows set aside because their event
	// time was more than watermark.maxEventTimeAhead ahead of the batch.
	TooFarAhead int64
	// JoinUnmatched counts the rows whose join key found no dimension row
	// (kept with null columns by a left join, dropped by an inner one).
	JoinUnmatched int64
	// Duplicates counts the rows a deduplication dropped in this task
	// because an earlier row of the task had their key.
	Duplicates int64
	// Event-time range of the rows read (valid when HasEventTime).
	MinEventTime, MaxEventTime int64
	HasEventTime               bool
	// Bad holds the malformed records of a task run Ahead, until
	// FinishMap writes them.
	Bad []BadRecord
}

// BadRecord is a malformed record set aside with its reason and position.
type BadRecord struct {
	Source string `json:"source"`
	Offset int64  `json:"offset"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
	Record string `json:"record"`
}

// RunMap runs one map task: it reads its split and runs the plan's map
// side on every record (see pipeline): a record that does not decode, or
// whose expression fails, is set aside as malformed with the reason; the
// filter pushed below the watermark runs before the event time is taken,
// so a row it drops does not move the watermark.
func RunMap(ctx context.Context, env *Env, t MapTask) (*MapResult, error) {
	pl, err := env.pipeline()
	if err != nil {
		return nil, fmt.Errorf("map task %d of batch %d: %w", t.Index, t.Batch, err)
	}
	p := pl.plan
	res := &MapResult{Index: t.Index}
	dec := newRecordDecoder(env.Spec, p)
	tc := p.EventTime
	var table *agg.Table
	var dt *dedup.Table
	switch {
	case env.Layout != nil:
		table = agg.NewTable(env.Layout)
	case pl.dedup != nil:
		dt = dedup.NewTable(pl.dedup, t.Partitions)
	default:
		res.Rows = make([][]row.Row, t.Partitions)
	}
	passPart := t.Index % t.Partitions
	var bad []BadRecord
	var dst row.Row
	var maxAhead int64
	if w := env.Spec.Watermark; w != nil {
		maxAhead = w.MaxEventTimeAhead.Micros()
	}
	var dim *join.Table
	var joined []row.Row
	if p.Join != nil && dt == nil {
		// (With a dedup the join runs after it, in the reduce task.)
		if env.Dimension == nil {
			return nil, fmt.Errorf("map task %d of batch %d: the query joins join.path but this process has no snapshot loader", t.Index, t.Batch)
		}
		var err error
		if dim, err = env.Dimension.Table(ctx, t.Manifest); err != nil {
			return nil, fmt.Errorf("map task %d of batch %d: %w", t.Index, t.Batch, err)
		}
	}
	// scratch holds a map row (Input, then computed columns); outs the
	// rows one record gives (one per join match) before any is folded,
	// so a record whose expression fails adds nothing.
	scratch := make([]row.Row, 0, 1)
	outs := make([]row.Row, 0, 1)
	keptBuf := make([]row.Row, 0, 1)
	nMap := len(p.MapRow())
	evalFailed := func(rec *source.Record, err error) {
		res.Malformed++
		bad = append(bad, BadRecord{Source: rec.Part, Offset: rec.Offset, Reason: err.Error(), Record: string(rec.Value)})
	}
	err = env.Source.Read(ctx, t.Split, func(rec *source.Record) error {
		res.InputRows++
		r, err := dec.decode(rec, dst)
		if err != nil {
			res.Malformed++
			br := BadRecord{Source: rec.Part, Offset: rec.Offset, Reason: err.Error(), Record: string(rec.Value)}
			var me *row.MalformedError
			if errors.As(err, &me) {
				br.Field, br.Reason = me.Field, me.Reason
			}
			bad = append(bad, br)
			return nil
		}
		dst = r
		if pl.pre != nil {
			// Below the watermark (rule 25): a row it drops is not read
			// as far as the watermark is concerned (nor checked against
			// maxEventTimeAhead, which guards the watermark).
			keep, err := pl.pre.Keep(r)
			if err != nil {
				evalFailed(rec, err)
				return nil
			}
			if !keep {
				return nil
			}
		}
		if tc >= 0 {
			if v := r[tc]; v.Kind != row.Null && eventtime.TooFarAhead(v.I, t.BatchTimestampMs, maxAhead) {
				res.Malformed++
				res.TooFarAhead++
				bad = append(bad, BadRecord{
					Source: rec.Part, Offset: rec.Offset, Field: env.Spec.Watermark.Column, Record: string(rec.Value),
					Reason: fmt.Sprintf("event time %s is more than watermark.maxEventTimeAhead %s ahead of the batch's processing time %s",
						row.FormatTimestamp(v.I), env.Spec.Watermark.MaxEventTimeAhead.D(), row.FormatTimestamp(t.BatchTimestampMs*1000)),
				})
				return nil
			}
		}
		if tc >= 0 {
			if v := r[tc]; v.Kind != row.Null {
				if !res.HasEventTime {
					res.MinEventTime, res.MaxEventTime, res.HasEventTime = v.I, v.I, true
				} else if v.I > res.MaxEventTime {
					res.MaxEventTime = v.I
				} else if v.I < res.MinEventTime {
					res.MinEventTime = v.I
				}
			}
		}
		if dt != nil {
			// Dedup's map side; the join, the filter and the projection
			// run on the rows its reduce keeps.
			if dt.Add(r, t.Late) {
				res.DroppedByWatermark++
			}
			return nil
		}
		if pl.simple && dim == nil {
			// The row as it is (the tile's path).
			if table != nil {
				res.DroppedByWatermark += int64(table.Add(r, t.Late))
			} else {
				res.Rows[passPart] = append(res.Rows[passPart], append(row.Row(nil), r...))
				dst = nil
			}
			return nil
		}
		ins := outs[:0]
		if dim != nil {
			var matched bool
			joined, matched = dim.Apply(r, joined[:0])
			if !matched {
				res.JoinUnmatched++
			}
			ins = append(ins, joined...)
		} else {
			ins = append(ins, r)
		}
		if pl.simple {
			// Joined rows are new: kept as they are.
			for _, in := range ins {
				if table != nil {
					res.DroppedByWatermark += int64(table.Add(in, t.Late))
				} else {
					res.Rows[passPart] = append(res.Rows[passPart], in)
				}
			}
			return nil
		}
		// Filter, computed columns or projection: every row of the record
		// is evaluated before any is folded.
		ms := keptBuf[:0]
		for i, in := range ins {
			if len(scratch) <= i {
				scratch = append(scratch[:i], make(row.Row, nMap))
			}
			m, keep, err := pl.mapRow(in, scratch[i])
			if err != nil {
				evalFailed(rec, err)
				return nil
			}
			if keep {
				ms = append(ms, m)
			}
		}
		for _, m := range ms {
			if table != nil {
				res.DroppedByWatermark += int64(table.Add(m, t.Late))
			} else {
				res.Rows[passPart] = append(res.Rows[passPart], m)
			}
		}
		outs, keptBuf = ins[:0], ms[:0]
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("map task %d of batch %d (split %s): %w", t.Index, t.Batch, t.Split.ID, err)
	}
	switch {
	case table != nil:
		res.Partials = table.Partition(t.Partitions)
	case dt != nil:
		res.Rows = dt.Rows()
		res.Duplicates = dt.Duplicates
	}
	res.Bad = bad
	if t.Ahead {
		return res, nil
	}
	if err := FinishMap(ctx, env, t, res); err != nil {
		return nil, err
	}
	return res, nil
}

// FinishMap does what a map task does once it has read its split and its
// batch is logged: it sets the malformed records aside (resolving their
// positions) and calls the map-done hook. RunMap calls it, except for a
// task run Ahead, whose runner calls it after the batch's offsets are
// written, so nothing of a batch is written before its offsets are.
func FinishMap(ctx context.Context, env *Env, t MapTask, res *MapResult) error {
	if bad := res.Bad; len(bad) > 0 {
		if err := resolveOffsets(ctx, env.Source, t, bad); err != nil {
			return err
		}
		if err := writeBadRecords(ctx, env.BadRecords, t, bad); err != nil {
			return err
		}
		env.Logger.Warn("malformed records set aside", "batch", t.Batch, "split", t.Split.ID, "count", len(bad), "in", env.Spec.BadRecordsDir(t.Batch))
		res.Bad = nil
	}
	env.hook("map-done", t.Batch)
	return nil
}

// resolveOffsets turns the bad records' offsets into the positions the
// report shows, for a source whose Read does not give them (see
// source.OffsetResolver).
func resolveOffsets(ctx context.Context, src source.Source, t MapTask, bad []BadRecord) error {
	r, ok := src.(source.OffsetResolver)
	if !ok {
		return nil
	}
	offs := make([]int64, len(bad))
	for i, b := range bad {
		offs[i] = b.Offset
	}
	if err := r.ResolveOffsets(ctx, t.Split, offs); err != nil {
		return fmt.Errorf("map task %d of batch %d (split %s): %w", t.Index, t.Batch, t.Split.ID, err)
	}
	for i := range bad {
		bad[i].Offset = offs[i]
	}
	return nil
}

// writeBadRecords writes a map task's malformed records to
// batch_id=N/<split>.jsonl. The name is deterministic, so a re-run batch
// replaces the file instead of adding a second copy.
func writeBadRecords(ctx context.Context, store objstore.Store, t MapTask, bad []BadRecord) error {
	if store == nil {
		return fmt.Errorf("map task %d of batch %d: %d malformed records and no badRecordsPath", t.Index, t.Batch, len(bad))
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, r := range bad {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	key := fmt.Sprintf("batch_id=%d/part-%05d.jsonl", t.Batch, t.Index)
	if err := store.Put(ctx, key, []byte(b.String())); err != nil {
		return fmt.Errorf("write bad records of batch %d: %w", t.Batch, err)
	}
	return nil
}

// ReduceTask merges one state partition's partials.
type ReduceTask struct {
	Batch     ids.BatchID
	Partition ids.PartitionID
	Watermark eventtime.Batch
	// SkipSink is set when the sink log already holds this batch (a re-run
	// after the sink committed): state is rebuilt, output is not rewritten.
	SkipSink bool
	// StateAttempt names the state files this attempt writes (see
	// statestore.AttemptID); the commit records it.
	StateAttempt string
	// GatherBelow, when the file sink is a sink.Gatherer, is the bound
	// below which the output goes back to the driver (Rows, Gathered)
	// instead of into files of the task's own (0: never).
	GatherBelow int64
	// Manifest is the join's snapshot the batch joins against: a join
	// after a deduplication runs in the reduce task (zero otherwise).
	Manifest join.Ref
}

// ReduceResult is a reduce task's output.
type ReduceResult struct {
	Partition ids.PartitionID
	// Files written by the file sink; Rows when the driver writes output
	// (a sink without files, or rows the file sink gathers: Gathered).
	Files    []string
	Rows     []row.Row
	Gathered bool
	// NumOutputRows counts the rows emitted.
	NumOutputRows int64
	StateRows     int64
	Updated       int64
	Removed       int64
	MemoryBytes   int64
	StateWrites   int
	// StateAttempt is the attempt the state files were written under.
	StateAttempt string
	// Malformed counts the rows set aside because an expression after
	// the aggregate or the deduplication failed on them (written to
	// bad records as reduce-NNNNN.jsonl).
	Malformed int64
	// Duplicates counts the rows the deduplication dropped here
	// (numDroppedDuplicateRows, with the map tasks' Duplicates).
	Duplicates int64
	// JoinUnmatched counts the rows a join after the deduplication found
	// no dimension row for.
	JoinUnmatched int64
}

// RunReduce runs one reduce task over the partials (or rows) every map task
// produced for the partition, in map order: the aggregate's merge then
// Having and the projection, or the deduplication then the join, the
// filter and the projection (see pipeline).
func RunReduce(ctx context.Context, env *Env, t ReduceTask, partials [][]agg.Entry, rows [][]row.Row) (*ReduceResult, error) {
	pl, err := env.pipeline()
	if err != nil {
		return nil, fmt.Errorf("reduce partition %d of batch %d: %w", t.Partition, t.Batch, err)
	}
	res := &ReduceResult{Partition: t.Partition, StateAttempt: t.StateAttempt}
	var out []row.Row
	var bad []BadRecord
	var st statestore.Store
	if pl.stateful(env.Layout) {
		st, err = env.State.Open(ctx, t.Partition, statestore.Version(t.Batch))
		if err != nil {
			return nil, fmt.Errorf("reduce partition %d of batch %d: %w", t.Partition, t.Batch, err)
		}
		if env.Layout != nil {
			var stats agg.ReduceStats
			out, stats, err = env.Layout.Reduce(st, partials, t.Watermark)
			res.Updated, res.Removed = stats.Updated, stats.Removed
			if err == nil {
				out, bad = pl.afterAggregate(out)
			}
		} else {
			var stats dedup.Stats
			out, stats, err = pl.dedup.Reduce(st, rows, t.Watermark)
			res.Updated, res.Removed, res.Duplicates = stats.Updated, stats.Removed, stats.Duplicates
			if err == nil {
				out, bad, err = afterDedup(ctx, env, pl, t, out, res)
			}
		}
		if err != nil {
			st.Abort()
			return nil, fmt.Errorf("reduce partition %d of batch %d: %w", t.Partition, t.Batch, err)
		}
		res.StateRows, res.MemoryBytes = st.NumRows(), st.MemoryBytes()
		env.hook("state-commit", t.Batch)
	} else {
		for _, rs := range rows {
			out = append(out, rs...)
		}
	}
	if len(bad) > 0 {
		res.Malformed = int64(len(bad))
		if err := writeReduceBadRecords(ctx, env, t, bad); err != nil {
			if st != nil {
				st.Abort()
			}
			return nil, err
		}
	}
	res.NumOutputRows = int64(len(out))
	// The state commit and the sink file are independent writes (each an
	// fsynced Put on local disk): a batch that closes windows waits for
	// both, so they run at once. Neither is visible before the driver's
	// commit names them (the commit record lists the state attempt, the
	// sink log the files), and the task succeeds only if both do, as
	// before; a failed attempt's files are left as an interrupted one's are.
	commitErr := make(chan error, 1)
	if st != nil {
		go func() {
			var err error
			res.StateWrites, err = st.Commit(ctx, t.StateAttempt)
			commitErr <- err
		}()
	} else {
		commitErr <- nil
	}
	var sinkErr error
	switch {
	case t.SkipSink:
	case env.FileSink != nil:
		if g, ok := env.FileSink.(sink.Gatherer); ok && g.Gather(out, t.GatherBelow) {
			res.Rows, res.Gathered = out, true // staged by the driver, with the other small outputs
			break
		}
		res.Files, sinkErr = env.FileSink.WritePartition(ctx, batchOf(env, t.Batch), t.Partition, out)
	default:
		res.Rows = out
	}
	if err := <-commitErr; err != nil {
		return nil, fmt.Errorf("reduce partition %d of batch %d: %w", t.Partition, t.Batch, err)
	}
	if sinkErr != nil {
		return nil, fmt.Errorf("reduce partition %d of batch %d: write sink: %w", t.Partition, t.Batch, sinkErr)
	}
	return res, nil
}

// afterDedup runs what follows the deduplication on the rows it kept, in
// their order: the join (against the batch's snapshot), the filter and
// the projection; rows whose evaluation fails come back as bad records.
func afterDedup(ctx context.Context, env *Env, pl *pipeline, t ReduceTask, kept []row.Row, res *ReduceResult) ([]row.Row, []BadRecord, error) {
	p := pl.plan
	if p.Join == nil && pl.filter == nil && pl.project == nil {
		return kept, nil, nil
	}
	var dim *join.Table
	if p.Join != nil {
		if env.Dimension == nil {
			return nil, nil, fmt.Errorf("the query joins join.path but this process has no snapshot loader")
		}
		var err error
		if dim, err = env.Dimension.Table(ctx, t.Manifest); err != nil {
			return nil, nil, err
		}
	}
	var out, joined []row.Row
	var bad []BadRecord
	for _, r := range kept {
		ins := []row.Row{r}
		if dim != nil {
			var matched bool
			joined, matched = dim.Apply(r, joined[:0])
			if !matched {
				res.JoinUnmatched++
			}
			ins = joined
		}
		var ms []row.Row
		failed := false
		for _, in := range ins {
			m, keep, err := pl.mapRow(in, nil)
			if err != nil {
				bad = append(bad, pl.badRow(in, err))
				failed = true
				break
			}
			if keep {
				ms = append(ms, m)
			}
		}
		if !failed {
			out = append(out, ms...)
		}
	}
	return out, bad, nil
}

// writeReduceBadRecords writes a reduce task's malformed rows to
// batch_id=N/reduce-PPPPP.jsonl (a deterministic name: a re-run replaces
// it).
func writeReduceBadRecords(ctx context.Context, env *Env, t ReduceTask, bad []BadRecord) error {
	if env.BadRecords == nil {
		return fmt.Errorf("reduce partition %d of batch %d: %d malformed rows and no badRecordsPath", t.Partition, t.Batch, len(bad))
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, r := range bad {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	key := fmt.Sprintf("batch_id=%d/reduce-%05d.jsonl", t.Batch, t.Partition)
	if err := env.BadRecords.Put(ctx, key, []byte(b.String())); err != nil {
		return fmt.Errorf("write bad records of batch %d: %w", t.Batch, err)
	}
	env.Logger.Warn("malformed rows set aside", "batch", t.Batch, "partition", t.Partition, "count", len(bad), "in", env.Spec.BadRecordsDir(t.Batch))
	return nil
}

func batchOf(env *Env, id ids.BatchID) sink.Batch { return sink.Batch{QueryID: env.QueryID, ID: id} }
