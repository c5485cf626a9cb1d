package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source/generator"
	"github.com/sluicehq/sluice/task"
)

// Tile query constants.
const (
	windowSize     = 5 * time.Minute
	watermarkDelay = 10 * time.Minute
	// eventTimePerRow spreads 3 M rows over about 8 hours of event time:
	// about 100 windows of 100 courses.
	eventTimePerRow = 10 * time.Millisecond
	seed            = 42
)

// generatorOptions are the generator settings every measurement shares.
// No late rows, and jitter well inside the watermark delay, so the engine
// drops nothing and its counts equal the raw loop's.
func generatorOptions(rows, maxRowsPerTrigger int64) query.GeneratorSource {
	return query.GeneratorSource{
		RowsPerSecond:     int64(time.Second / eventTimePerRow),
		Rows:              rows,
		Jitter:            query.Duration(30 * time.Second),
		Seed:              seed,
		EventTimePerRow:   query.Duration(eventTimePerRow),
		MaxRowsPerTrigger: maxRowsPerTrigger,
	}
}

// tileSpec is the course-activity tile over src, writing under dir.
func tileSpec(src query.Source, dir string, trigger query.Trigger) query.Spec {
	return query.Spec{
		Name:      "bench-course-activity-tile",
		Source:    src,
		Watermark: &query.Watermark{Column: query.GeneratorEventTime, Delay: query.Duration(watermarkDelay)},
		Aggregate: &query.Aggregate{
			Window:   &query.Window{Column: query.GeneratorEventTime, Size: query.Duration(windowSize)},
			GroupBy:  []string{query.GeneratorCourseID},
			Measures: []query.Measure{{Name: "event_count", Fn: query.FnCount}},
		},
		OutputMode:         query.Append,
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: filepath.Join(dir, "sink"), PartitionBy: "window_date"}},
		CheckpointLocation: filepath.Join(dir, "checkpoint"),
		Trigger:            trigger,
	}
}

// decoderFields are the fields the engine's map tasks decode with: the
// same list, with the same unused columns marked.
func decoderFields() []row.Field {
	spec := tileSpec(query.Source{Generator: &query.GeneratorSource{}}, "", query.Trigger{}).WithDefaults()
	return task.ValueFields(&spec)
}

// Lines holds JSON lines back to back; line i is Data[Ends[i-1]:Ends[i]].
type Lines struct {
	Data []byte
	Ends []int
}

// Len returns the number of lines.
func (l *Lines) Len() int { return len(l.Ends) }

// Line returns line i without its newline.
func (l *Lines) Line(i int) []byte {
	from := 0
	if i > 0 {
		from = l.Ends[i-1]
	}
	return l.Data[from:l.Ends[i]]
}

// generateLines renders the generator's rows [0, n) once, as its map tasks
// would.
func generateLines(opts query.GeneratorSource, n int) *Lines {
	g := generator.New(opts)
	l := &Lines{Data: make([]byte, 0, n*116), Ends: make([]int, 0, n)}
	for i := range n {
		l.Data = g.AppendLine(l.Data, int64(i))
		l.Ends = append(l.Ends, len(l.Data))
	}
	return l
}

// WindowKey identifies one output group of the tile.
type WindowKey struct {
	Start  int64 // window start, µs
	Course string
}

// RawResult is what one pass of the raw loop found.
type RawResult struct {
	Counts  map[WindowKey]int64
	MaxTime int64 // greatest event time, µs
	Elapsed time.Duration
	CPU     time.Duration // process CPU time during the loop
}

// rawLoop decodes every line with the engine's decoder, assigns its
// five-minute window and counts per (window, course), in one goroutine.
func rawLoop(lines *Lines) (*RawResult, error) {
	return rawLoopParallel(lines, 1)
}

// rawLoopParallel is rawLoop on p goroutines, each counting a contiguous
// share of the lines in its own map, merged at the end: what the machine
// allows in parallel right now, as a yardstick for the engine's use of
// its cores.
func rawLoopParallel(lines *Lines, p int) (*RawResult, error) {
	res := &RawResult{Counts: make(map[WindowKey]int64)}
	cpu := processCPU()
	start := time.Now()
	parts := make([]*RawResult, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	n := lines.Len()
	for i := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = countLines(lines, i*n/p, (i+1)*n/p)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if p == 1 {
		res.Counts = parts[0].Counts
	}
	for _, part := range parts {
		if p > 1 {
			for k, c := range part.Counts {
				res.Counts[k] += c
			}
		}
		res.MaxTime = max(res.MaxTime, part.MaxTime)
	}
	res.Elapsed = time.Since(start)
	res.CPU = processCPU() - cpu
	return res, nil
}

// countLines is the raw loop's body over lines [from, to).
func countLines(lines *Lines, from, to int) (*RawResult, error) {
	dec := row.NewDecoder(decoderFields())
	win := eventtime.Spec{Size: windowSize.Microseconds(), Slide: windowSize.Microseconds()}
	const courseCol, timeCol = 1, 3
	counts := make(map[WindowKey]int64)
	var r row.Row
	var starts []int64
	res := &RawResult{Counts: counts}
	for i := from; i < to; i++ {
		var err error
		if r, err = dec.Decode(lines.Line(i), r); err != nil {
			return nil, fmt.Errorf("decode line %d: %w", i, err)
		}
		t := r[timeCol].I
		if t > res.MaxTime {
			res.MaxTime = t
		}
		starts = win.Windows(t, starts[:0])
		for _, s := range starts {
			counts[WindowKey{s, r[courseCol].S}]++
		}
	}
	return res, nil
}

// writeFiles writes the lines as JSON-lines files of perFile lines each,
// named so that name order is line order.
func writeFiles(dir string, lines *Lines, perFile int) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("create source directory: %w", err)
	}
	files := 0
	for from := 0; from < lines.Len(); from += perFile {
		to := min(from+perFile, lines.Len())
		buf := make([]byte, 0, lines.Ends[to-1]-lines.Ends[max(from-1, 0)]+(to-from)+lines.Ends[0])
		for i := from; i < to; i++ {
			buf = append(buf, lines.Line(i)...)
			buf = append(buf, '\n')
		}
		name := filepath.Join(dir, fmt.Sprintf("part-%06d.jsonl", files))
		if err := os.WriteFile(name, buf, 0o644); err != nil {
			return 0, fmt.Errorf("write source file: %w", err)
		}
		files++
	}
	return files, nil
}

// Requests counts checkpoint-store calls.
type Requests struct {
	Get, Put, PutIfAbsent, List, Delete int64
}

// Writes counts the calls that create or replace an object.
func (r Requests) Writes() int64 { return r.Put + r.PutIfAbsent }

func requestsOf(s map[string]objstore.OpStats) Requests {
	return Requests{
		Get: s[objstore.OpGet].Requests, Put: s[objstore.OpPut].Requests, PutIfAbsent: s[objstore.OpPutIfAbsent].Requests,
		List: s[objstore.OpList].Requests, Delete: s[objstore.OpDelete].Requests,
	}
}

// WriteKinds classifies a batch's checkpoint writes by key.
type WriteKinds struct {
	Offsets, Commits, Deltas, Snapshots, Other int
}

// Fixed is every write other than state files (the durability target
// allows 3 of them).
func (w WriteKinds) Fixed() int { return w.Offsets + w.Commits + w.Other }

func classify(trace []objstore.TraceEntry) WriteKinds {
	var w WriteKinds
	for _, e := range trace {
		if e.Op != objstore.OpPut && e.Op != objstore.OpPutIfAbsent {
			continue
		}
		switch {
		case strings.HasPrefix(e.Key, "offsets/"):
			w.Offsets++
		case strings.HasPrefix(e.Key, "commits/"):
			w.Commits++
		case strings.HasSuffix(e.Key, ".delta"):
			w.Deltas++
		case strings.HasSuffix(e.Key, ".snapshot"):
			w.Snapshots++
		default:
			w.Other++
		}
	}
	return w
}

func (r Requests) minus(o Requests) Requests {
	return Requests{r.Get - o.Get, r.Put - o.Put, r.PutIfAbsent - o.PutIfAbsent, r.List - o.List, r.Delete - o.Delete}
}

// Batch is one batch's progress with the checkpoint requests made between
// the previous batch's report and its own, the objects its sink log entry
// accounts for, and the time from the start of its offsets write to its
// report.
type Batch struct {
	Progress   progress.Report
	Requests   Requests
	Writes     WriteKinds
	SinkWrites int // data files + the log entry; -1 when not known
	FromWAL    time.Duration
	// MapPhase runs from the offsets write to the last map task's end;
	// MapTail is how long the last map task ran after the one before it
	// ended (with equal splits, the time one task ran alone).
	MapPhase, MapTail time.Duration
}

// EngineRun is one run of the engine.
type EngineRun struct {
	Elapsed    time.Duration
	CPU        time.Duration // process CPU time during the run
	Batches    []Batch
	InputRows  int64
	OutputRows int64
	// StateRows is the state's row count after the last batch.
	StateRows int64
	// Watermark is the last batch's evicting watermark, µs.
	Watermark int64
	SinkDir   string
}

// recorder collects per-batch progress and request deltas.
type recorder struct {
	mu       sync.Mutex
	counting *objstore.Counting
	last     Requests
	traced   int // trace entries already attributed
	walStart map[ids.BatchID]time.Time
	mapDone  map[ids.BatchID][]time.Time
	batches  []Batch
	notify   chan<- progress.Report
}

func (r *recorder) wrap(s objstore.Store) objstore.Store {
	r.counting = objstore.NewCounting(s)
	return &walTimer{Forward: objstore.Forward{Store: r.counting}, rec: r}
}

// baseline makes the next delta start now (after Build).
func (r *recorder) baseline() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = requestsOf(r.counting.Stats())
	r.counting.StartTrace()
	r.traced = 0
}

func (r *recorder) progress(p *progress.Report) {
	now := time.Now()
	r.mu.Lock()
	cur := requestsOf(r.counting.Stats())
	trace := r.counting.Trace()
	b := Batch{Progress: *p, Requests: cur.minus(r.last), Writes: classify(trace[r.traced:]), SinkWrites: -1}
	r.traced = len(trace)
	if t, ok := r.walStart[p.BatchID]; ok {
		b.FromWAL = now.Sub(t)
		if done := r.mapDone[p.BatchID]; len(done) > 0 {
			b.MapPhase = done[len(done)-1].Sub(t)
			if len(done) > 1 {
				b.MapTail = done[len(done)-1].Sub(done[len(done)-2])
			}
		}
	}
	r.last = cur
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	if r.notify != nil {
		r.notify <- *p
	}
}

// hook notes when map tasks end (the engine's fault-injection hook).
func (r *recorder) hook(point string, batch ids.BatchID) {
	if point != "map-done" {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mapDone == nil {
		r.mapDone = map[ids.BatchID][]time.Time{}
	}
	r.mapDone[batch] = append(r.mapDone[batch], now)
}

// walTimer notes when each batch's offsets entry starts being written; an
// objstore.Forward, so the run takes the same store paths as without it.
type walTimer struct {
	objstore.Forward
	rec *recorder
}

func (w *walTimer) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	var id ids.BatchID
	if _, err := fmt.Sscanf(key, "offsets/%d", &id); err == nil {
		w.rec.mu.Lock()
		if w.rec.walStart == nil {
			w.rec.walStart = map[ids.BatchID]time.Time{}
		}
		w.rec.walStart[id] = time.Now()
		w.rec.mu.Unlock()
	}
	return w.Forward.PutIfAbsent(ctx, key, data)
}

// runEngine builds and runs spec in this process and times the whole of
// it: Build, Run and Close.
func runEngine(ctx context.Context, spec query.Spec, parallelism int) (*EngineRun, error) {
	rec := &recorder{}
	opts := microbatch.Options{
		Parallelism: parallelism,
		WrapStore:   checkpointOnly(rec.wrap),
		Observer:    progress.Committed(rec.progress),
		Hook:        rec.hook,
	}
	cpu := processCPU()
	start := time.Now()
	job, err := microbatch.Build(ctx, spec, opts)
	if err != nil {
		return nil, fmt.Errorf("build engine: %w", err)
	}
	rec.baseline()
	runErr := job.Run(ctx, nil)
	closeErr := job.Close()
	elapsed := time.Since(start)
	cpu = processCPU() - cpu
	if err := errors.Join(runErr, closeErr); err != nil {
		return nil, fmt.Errorf("run engine: %w", err)
	}
	run, err := summarize(ctx, rec, spec, elapsed)
	if err != nil {
		return nil, err
	}
	run.CPU = cpu
	return run, nil
}

// summarize folds a finished run's batches and adds the sink's objects.
func summarize(ctx context.Context, rec *recorder, spec query.Spec, elapsed time.Duration) (*EngineRun, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	run := &EngineRun{Elapsed: elapsed, Batches: rec.batches, SinkDir: spec.Sink.Parquet.Path}
	for _, b := range run.Batches {
		run.InputRows += b.Progress.NumInputRows
		run.OutputRows += b.Progress.Sink.NumOutputRows
		for _, op := range b.Progress.StateOperators {
			run.StateRows = op.NumRowsTotal
		}
		run.Watermark = b.Progress.BatchWatermarkMs * 1000
	}
	st, err := objstore.NewFS(run.SinkDir)
	if err != nil {
		return nil, fmt.Errorf("open sink directory: %w", err)
	}
	entries, err := parquet.LogEntries(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("read sink log: %w", err)
	}
	writes := map[ids.BatchID]int{}
	for _, e := range entries {
		writes[e.BatchID] = len(e.Files) + 1
	}
	for i := range run.Batches {
		if n, ok := writes[run.Batches[i].Progress.BatchID]; ok {
			run.Batches[i].SinkWrites = n
		}
	}
	return run, nil
}

// NoDataRun is the no-data batch measurement.
type NoDataRun struct {
	Batches []Batch // every batch, data and no-data
	// ProfileTop is the top of a CPU profile of the run (with -report).
	ProfileTop string `json:",omitempty"`
}

// noDataLines is one file of the no-data measurement: one event per course
// at event time base + k windows, so each file's batch raises the
// watermark by one window and the no-data batch after it closes one.
func noDataLines(k, courses int) []byte {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * windowSize)
	var b []byte
	for c := range courses {
		t := base.Add(time.Duration(c) * time.Millisecond)
		b = fmt.Appendf(b, `{"event_id":"n-%d-%d","course_id":"c-%03d","lesson_id":"l-%d","event_time":"%s"}`+"\n",
			k, c, c, c%generator.Lessons, t.Format("2006-01-02T15:04:05.000Z07:00"))
	}
	return b
}

// runNoData runs a file-source query on a processingTime trigger and adds
// one file at a time, each after the previous file's no-data batch has
// reported, until want no-data batches have run. Each file's data batch
// raises the watermark, so a no-data batch follows it.
func runNoData(ctx context.Context, dir string, want, courses int, interval time.Duration, parallelism int) (*NoDataRun, error) {
	srcDir := filepath.Join(dir, "source")
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		return nil, fmt.Errorf("create source directory: %w", err)
	}
	spec := tileSpec(query.Source{File: &query.FileSource{Path: srcDir, MaxFilesPerTrigger: 1}, Schema: query.GeneratorSchema()}, dir,
		query.Trigger{ProcessingTime: query.Duration(interval)})
	events := make(chan progress.Report, 16)
	rec := &recorder{notify: events}
	job, err := microbatch.Build(ctx, spec, microbatch.Options{Parallelism: parallelism, WrapStore: checkpointOnly(rec.wrap), Observer: progress.Committed(rec.progress)})
	if err != nil {
		return nil, fmt.Errorf("build engine: %w", err)
	}
	defer job.Close()
	rec.baseline()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(runCtx, nil) }()

	addFile := func(k int) error {
		tmp := filepath.Join(srcDir, fmt.Sprintf(".tmp-%06d.jsonl", k))
		if err := os.WriteFile(tmp, noDataLines(k, courses), 0o644); err != nil {
			return fmt.Errorf("write source file: %w", err)
		}
		return os.Rename(tmp, filepath.Join(srcDir, fmt.Sprintf("part-%06d.jsonl", k)))
	}
	// The first files only raise the watermark to where windows start
	// closing; files 0..2 give no no-data batch with output yet but still
	// count.
	noData := 0
	for k := 0; noData < want; k++ {
		if err := addFile(k); err != nil {
			return nil, err
		}
		deadline := time.NewTimer(30 * time.Second)
	wait:
		for {
			select {
			case p := <-events:
				if p.NoData {
					noData++
					break wait
				}
			case err := <-done:
				deadline.Stop()
				return nil, fmt.Errorf("query stopped before %d no-data batches: %v", want, err)
			case <-deadline.C:
				return nil, fmt.Errorf("no no-data batch within 30s after file %d", k)
			}
		}
		deadline.Stop()
	}
	cancel()
	if err := <-done; err != nil {
		return nil, fmt.Errorf("run engine: %w", err)
	}
	run, err := summarize(ctx, rec, spec, 0)
	if err != nil {
		return nil, err
	}
	return &NoDataRun{Batches: run.Batches}, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// putLatency times n Puts of a 1 KiB object on the local file store (each
// fsyncs the file and its directory), as a yardstick for batch times on
// local disk.
func putLatency(ctx context.Context, dir string, n int) ([]float64, error) {
	st, err := objstore.NewFS(dir)
	if err != nil {
		return nil, fmt.Errorf("open put-latency store: %w", err)
	}
	data := make([]byte, 1024)
	out := make([]float64, 0, n)
	for i := range n {
		t := time.Now()
		if err := st.Put(ctx, fmt.Sprintf("p/%d", i), data); err != nil {
			return nil, fmt.Errorf("time put: %w", err)
		}
		out = append(out, float64(time.Since(t).Microseconds())/1000)
	}
	return out, nil
}

// checkpointOnly applies wrap to the checkpoint store only.
func checkpointOnly(wrap func(objstore.Store) objstore.Store) func(string, objstore.Store) objstore.Store {
	return func(role string, s objstore.Store) objstore.Store {
		if role != task.RoleCheckpoint {
			return s
		}
		return wrap(s)
	}
}
