package microbatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
)

// listSource serves a fixed list of JSON lines; an offset is the index of
// the next line, and each batch takes at most perBatch lines.
type listSource struct {
	lines    []string
	perBatch int
}

func off(n int) source.Offset { return source.Offset(strconv.Itoa(n)) }
func num(o source.Offset) int { n, _ := strconv.Atoi(string(o)); return n }

func (s *listSource) Initial(context.Context) (source.Offset, error) { return off(0), nil }
func (s *listSource) Latest(context.Context, source.Offset, time.Time) (source.Offset, error) {
	return off(len(s.lines)), nil
}
func (s *listSource) Next(_ context.Context, start, limit source.Offset) (source.Offset, error) {
	return off(min(num(limit), num(start)+s.perBatch)), nil
}
func (s *listSource) Splits(_ context.Context, start, end source.Offset) ([]source.Split, error) {
	if num(start) == num(end) {
		return nil, nil
	}
	d, _ := json.Marshal([2]int{num(start), num(end)})
	return []source.Split{{ID: string(start), Desc: d}}, nil
}
func (s *listSource) Read(_ context.Context, sp source.Split, fn func(*source.Record) error) error {
	var r [2]int
	json.Unmarshal(sp.Desc, &r)
	for i := r[0]; i < r[1]; i++ {
		if err := fn(&source.Record{Value: []byte(s.lines[i]), Part: "list", Offset: int64(i)}); err != nil {
			return err
		}
	}
	return nil
}
func (s *listSource) Close() error { return nil }

type collect struct{ batches map[ids.BatchID][]row.Row }

func (c *collect) WriteBatch(_ context.Context, id ids.BatchID, rows []row.Row) error {
	c.batches[id] = append([]row.Row(nil), rows...)
	return nil
}

func line(course string, minute float64) string {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(minute * float64(time.Minute)))
	return fmt.Sprintf(`{"course_id":%q,"event_time":%q}`, course, t.Format(time.RFC3339))
}

// runQuery runs a tile-like query over lines with the given trigger and
// returns its progress and output per batch.
func runQuery(t *testing.T, lines []string, perBatch int, mutate func(*query.Spec)) ([]*progress.Report, map[ids.BatchID][]row.Row) {
	t.Helper()
	return runQueryWith(t, lines, perBatch, mutate, nil)
}

// runQueryWith is runQuery with a hook on the scheduler's config.
func runQueryWith(t *testing.T, lines []string, perBatch int, mutate func(*query.Spec), config func(*microbatch.Config)) ([]*progress.Report, map[ids.BatchID][]row.Row) {
	t.Helper()
	spec := query.Spec{
		Name: "t",
		Source: query.Source{Schema: []query.Field{
			{Name: "course_id", Type: "string"}, {Name: "event_time", Type: "timestamp"},
		}},
		Watermark:          &query.Watermark{Column: "event_time", Delay: query.Duration(10 * time.Minute)},
		Aggregate:          &query.Aggregate{Window: &query.Window{Column: "event_time", Size: query.Duration(5 * time.Minute)}, GroupBy: []string{"course_id"}, Measures: []query.Measure{{Name: "n", Fn: "count"}}},
		OutputMode:         query.Append,
		CheckpointLocation: "mem",
		Trigger:            query.Trigger{AvailableNow: true},
		ShufflePartitions:  2,
	}
	mutate(&spec)
	spec = spec.WithDefaults()
	store := objstore.NewMem()
	src := &listSource{lines: lines, perBatch: perBatch}
	out := &collect{batches: map[ids.BatchID][]row.Row{}}
	var reports []*progress.Report
	cfg := microbatch.Config{
		Spec: spec, Checkpoint: store, Source: src, Writer: out,
		Observer: progress.Committed(func(p *progress.Report) { reports = append(reports, p) }),
	}
	if config != nil {
		config(&cfg)
	}
	q, err := microbatch.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := &task.Env{QueryID: q.QueryID(), Spec: &spec, Source: src, BadRecords: store,
		State: statestore.NewMemory(store, statestore.MemoryOptions{})}
	if spec.Aggregate != nil {
		if env.Layout, err = agg.Compile(&spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Run(context.Background(), &task.Local{Env: env}, nil); err != nil {
		t.Fatal(err)
	}
	return reports, out.batches
}

func kinds(ps []*progress.Report) string {
	s := ""
	for _, p := range ps {
		if p.NoData {
			s += "n"
		} else {
			s += "d"
		}
	}
	return s
}

var lines = []string{line("a", 1), line("a", 2), line("b", 3), line("a", 31), line("b", 32), line("a", 33)}

func TestAvailableNowDrainsInCappedBatchesThenRunsTheTrailingNoDataBatch(t *testing.T) {
	progress, out := runQuery(t, lines, 2, func(*query.Spec) {})
	// Batches of 2 lines. Batch 1 raises the watermark to 00:21, so data
	// batch 2 (not a no-data batch: data is waiting) closes the two 00:00
	// windows; batch 2 raises it to 00:23 and the trailing no-data batch
	// runs, closing nothing more.
	if got := kinds(progress); got != "dddn" {
		t.Fatalf("batches %s, want dddn (three capped data batches, then one no-data batch)", got)
	}
	if len(out[0]) != 0 || len(out[1]) != 0 || len(out[2]) != 2 || len(out[3]) != 0 {
		t.Fatalf("rows per batch %d %d %d %d, want 0 0 2 0", len(out[0]), len(out[1]), len(out[2]), len(out[3]))
	}
	for _, p := range progress {
		if got := string(p.Sources[0].LatestOffset); got != "6" {
			t.Fatalf("batch %d reports latestOffset %q, want the 6 lines available when it was planned", p.BatchID, got)
		}
	}
	if progress[3].BatchWatermarkMs != time.Date(2026, 1, 1, 0, 23, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("no-data batch watermark %d", progress[3].BatchWatermarkMs)
	}
}

func TestOnceRunsExactlyOneBatchAndNoNoDataBatch(t *testing.T) {
	progress, _ := runQuery(t, lines, 10, func(s *query.Spec) { s.Trigger = query.Trigger{Once: true} })
	if got := kinds(progress); got != "d" {
		t.Fatalf("once ran %s, want exactly one data batch", got)
	}
}

func TestNoDataMicroBatchesFalseLeavesClosedWindowsForTheNextDataBatch(t *testing.T) {
	f := false
	progress, _ := runQuery(t, lines, 10, func(s *query.Spec) { s.NoDataMicroBatches = &f })
	if got := kinds(progress); got != "d" {
		t.Fatalf("with noDataMicroBatches false ran %s, want only the data batch", got)
	}
}

func TestCompleteModeNeverRunsNoDataBatches(t *testing.T) {
	progress, out := runQuery(t, lines, 3, func(s *query.Spec) { s.OutputMode = query.Complete })
	if got := kinds(progress); got != "dd" {
		t.Fatalf("complete mode ran %s, want dd", got)
	}
	if len(out[1]) != 4 {
		t.Fatalf("complete mode's last batch emitted %d rows, want the whole table of 4", len(out[1]))
	}
}

func TestUpdateModeNoDataBatchEvictsWithoutEmitting(t *testing.T) {
	progress, out := runQuery(t, lines, 10, func(s *query.Spec) { s.OutputMode = query.Update })
	if got := kinds(progress); got != "dn" {
		t.Fatalf("update ran %s, want dn", got)
	}
	if len(out[1]) != 0 || progress[1].StateOperators[0].NumRowsRemoved != 2 {
		t.Fatalf("update's no-data batch should emit nothing and evict 2 groups, emitted %d, removed %d", len(out[1]), progress[1].StateOperators[0].NumRowsRemoved)
	}
}

func TestQueryAndRunIDsAreVersion4UUIDs(t *testing.T) {
	progress, _ := runQuery(t, lines, 10, func(*query.Spec) {})
	for _, id := range []string{progress[0].ID, progress[0].RunID} {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("id %q: parse %v, version %d, variant %v: want a canonical version-4 RFC 4122 UUID", id, err, u.Version(), u.Variant())
		}
	}
	if progress[0].ID == progress[0].RunID {
		t.Fatalf("query id and run id are the same: %s", progress[0].ID)
	}
}

// runIdle runs the tile over src on store with trigger and returns the
// Idle reports and the number of batches; runIdleOn runs the default
// trigger and calls onIdle with the number of reports so far.
func runIdle(t *testing.T, ctx context.Context, store objstore.Store, src *listSource, trigger query.Trigger) ([]progress.Idle, int) {
	t.Helper()
	return runIdleTrigger(t, ctx, store, src, trigger, func(int) {})
}

func runIdleOn(t *testing.T, ctx context.Context, store objstore.Store, src source.Source, onIdle func(n int)) ([]progress.Idle, int) {
	t.Helper()
	return runIdleTrigger(t, ctx, store, src, query.Trigger{}, onIdle)
}

func runIdleTrigger(t *testing.T, ctx context.Context, store objstore.Store, src source.Source, trigger query.Trigger, onIdle func(n int)) ([]progress.Idle, int) {
	t.Helper()
	var spec query.Spec
	runQueryConfig(&spec, trigger)
	var idles []progress.Idle
	batches := 0
	q, err := microbatch.Open(ctx, microbatch.Config{
		Spec: spec, Checkpoint: store, Source: src, Writer: &collect{batches: map[ids.BatchID][]row.Row{}},
		Observer: progress.Funcs{
			OnCommitted: func(*progress.Report) { batches++ },
			OnIdle: func(i progress.Idle) {
				idles = append(idles, i)
				onIdle(len(idles))
			},
		},
		IdlePoll: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	env := &task.Env{QueryID: q.QueryID(), Spec: &spec, Source: src, BadRecords: store,
		State: statestore.NewMemory(store, statestore.MemoryOptions{})}
	if env.Layout, err = agg.Compile(&spec); err != nil {
		t.Fatal(err)
	}
	if err := q.Run(ctx, &task.Local{Env: env}, nil); err != nil {
		t.Fatal(err)
	}
	return idles, batches
}

func runQueryConfig(s *query.Spec, trigger query.Trigger) {
	*s = query.Spec{
		Name: "t",
		Source: query.Source{Schema: []query.Field{
			{Name: "course_id", Type: "string"}, {Name: "event_time", Type: "timestamp"},
		}},
		Watermark:          &query.Watermark{Column: "event_time", Delay: query.Duration(10 * time.Minute)},
		Aggregate:          &query.Aggregate{Window: &query.Window{Column: "event_time", Size: query.Duration(5 * time.Minute)}, GroupBy: []string{"course_id"}, Measures: []query.Measure{{Name: "n", Fn: "count"}}},
		OutputMode:         query.Append,
		CheckpointLocation: "mem",
		Trigger:            trigger,
		ShufflePartitions:  2,
	}
	*s = s.WithDefaults()
}

// Idle is reported when a run finds nothing to do, with the last commit and
// the watermark held; never by an availableNow run that ran batches.
func TestIdleIsReportedWhenThereIsNothingToRun(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem()
	src := &listSource{lines: lines, perBatch: 10}
	idles, batches := runIdle(t, ctx, store, src, query.Trigger{AvailableNow: true})
	if batches != 2 || len(idles) != 0 {
		t.Fatalf("availableNow with data: %d batches, idle reports %v; want 2 batches and no idle report", batches, idles)
	}
	idles, batches = runIdle(t, ctx, store, src, query.Trigger{AvailableNow: true})
	wm := eventtime.Watermark(time.Date(2026, 1, 1, 0, 23, 0, 0, time.UTC).UnixMicro())
	if batches != 0 || len(idles) != 1 || idles[0].LastCommitted != 1 || idles[0].Watermark != wm {
		t.Fatalf("availableNow with nothing new: %d batches, idle reports %+v; want one report of batch 1, watermark %d", batches, idles, wm)
	}
	// The default trigger polls while idle: one report per idle spell, a
	// new one after new data ran.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	polling := &pollCounter{listSource: src}
	idles, _ = runIdleOn(t, runCtx, store, polling, func(n int) {
		if n == 1 {
			src.lines = append(src.lines, line("a", 61))
			return
		}
		polling.after(5, cancel) // five more idle polls, then stop
	})
	if len(idles) != 2 || idles[1].LastCommitted <= idles[0].LastCommitted {
		t.Fatalf("default trigger: idle reports %+v; want two, the second after more commits", idles)
	}
}

// pollCounter counts Latest calls (one per poll) and can cancel after n
// more.
type pollCounter struct {
	*listSource
	calls, stopAt int
	stop          func()
}

func (p *pollCounter) Latest(ctx context.Context, start source.Offset, now time.Time) (source.Offset, error) {
	p.calls++
	if p.stop != nil && p.calls >= p.stopAt {
		p.stop()
	}
	return p.listSource.Latest(ctx, start, now)
}

func (p *pollCounter) after(n int, stop func()) { p.stopAt, p.stop = p.calls+n, stop }

func TestInputRowsPerSecondIsRowsOverTheGapSinceThePreviousBatchStarted(t *testing.T) {
	// A clock that moves 250 ms each time it is read: batch starts are
	// far apart and known from each progress's timestamp.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(250 * time.Millisecond); return now }
	ps, _ := runQueryWith(t, lines, 2, func(*query.Spec) {}, func(c *microbatch.Config) { c.Now = clock })
	if len(ps) < 3 {
		t.Fatalf("want at least 3 batches, got %d", len(ps))
	}
	if ps[0].InputRowsPerSecond != 0 {
		t.Fatalf("first batch of a run: inputRowsPerSecond = %v, want 0", ps[0].InputRowsPerSecond)
	}
	for i := 1; i < len(ps); i++ {
		prev, _ := time.Parse(time.RFC3339Nano, ps[i-1].Timestamp)
		cur, _ := time.Parse(time.RFC3339Nano, ps[i].Timestamp)
		want := float64(ps[i].NumInputRows) / cur.Sub(prev).Seconds()
		if got := ps[i].InputRowsPerSecond; got != want || ps[i].Sources[0].InputRowsPerSecond != want {
			t.Fatalf("batch %d: %d rows, %v after the previous start: inputRowsPerSecond = %v (source %v), want %v",
				ps[i].BatchID, ps[i].NumInputRows, cur.Sub(prev), got, ps[i].Sources[0].InputRowsPerSecond, want)
		}
		if ps[i].NumInputRows > 0 && want <= 0 {
			t.Fatalf("batch %d: rows but no rate", ps[i].BatchID)
		}
	}
}

func TestInputRowsPerSecondEdges(t *testing.T) {
	t0 := time.Unix(100, 0)
	for _, c := range []struct {
		rows        int64
		prev, start time.Time
		want        float64
	}{
		{10, time.Time{}, t0, 0},                    // first batch of a run
		{10, t0, t0, 0},                             // no time passed: no rate rather than +Inf
		{10, t0.Add(time.Second), t0, 0},            // a clock that went back
		{10, t0, t0.Add(2 * time.Second), 5},        // 10 rows over 2 s
		{0, t0, t0.Add(time.Second), 0},             // a no-data batch
		{3, t0, t0.Add(1500 * time.Millisecond), 2}, // fractional seconds
	} {
		if got := progress.InputRowsPerSecond(c.rows, c.prev, c.start); got != c.want {
			t.Errorf("InputRowsPerSecond(%d, %v, %v) = %v, want %v", c.rows, c.prev, c.start, got, c.want)
		}
	}
}
