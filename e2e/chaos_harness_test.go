package e2e

// The chaos harness: where a query keeps its checkpoint and sink (a place),
// how "the query" runs (a topology: one `driver run` process, or `driver
// serve` with executor processes), input that keeps arriving (a feeder),
// and the end-of-scenario checks every chaos test shares. Each scenario
// prints one summary line starting with "CHAOS": the scenario
// (what/topology/place), its seed, batches (the last committed batch id +
// 1), kills (SIGKILLs the scenario sent), retries (re-runs of logged batches
// plus extra attempts; for object-store faults also the faulted requests),
// windows checked against the oracle, duplicates and missing (both must be
// 0), then scenario-specific figures such as recovery times as
// median/max milliseconds. Run them with scripts/chaos.sh.
//
// Knobs (environment):
//
//	SLUICE_CHAOS_SEED=N        replay a run (every scenario prints its seed)
//	SLUICE_CHAOS_ITERATIONS=N  kills per random-kill scenario (default 5)
//	SLUICE_CHAOS_SOAK=1        the long soak: 300 iterations unless set
//	SLUICE_CHAOS_SUMMARY=FILE  also append the summary lines to FILE

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

// Tile parameters every chaos scenario uses: windows of 5 minutes, a
// watermark delay of 10 minutes, and input disorder below it, so no event
// is late and the oracle is exact.
const (
	chaosWindow   = 5 * time.Minute
	chaosDelay    = 10 * time.Minute
	chaosDisorder = 4 * time.Minute
)

// chaosSeed returns $SLUICE_CHAOS_SEED, or a fresh seed; either way it is
// logged so a failure replays.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("SLUICE_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_CHAOS_SEED=%q: not a number", s)
		}
		return n
	}
	n := uint64(time.Now().UnixNano()) % 1_000_000_000
	t.Logf("seed %d (replay with SLUICE_CHAOS_SEED=%d)", n, n)
	return n
}

// chaosIterations returns how many kills a random-kill scenario does.
func chaosIterations(t *testing.T, short int) int {
	t.Helper()
	if s := os.Getenv("SLUICE_CHAOS_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_CHAOS_ITERATIONS=%q: want a positive number", s)
		}
		return n
	}
	if chaosSoak() {
		return 300
	}
	return short
}

func chaosSoak() bool { return os.Getenv("SLUICE_CHAOS_SOAK") == "1" }

// place is where a query keeps its checkpoint and sink, and how processes
// and the test reach them.
type place struct {
	Name             string // "local" or "s3", for summaries
	Checkpoint, Sink string
	// Env is added to every process of the query (S3 endpoint and keys).
	Env []string
	// Store opens the locations from the test process (directly, never
	// through a fault proxy).
	Store objstore.Options
}

func localPlace(t *testing.T) place {
	dir := t.TempDir()
	return place{Name: "local", Checkpoint: filepath.Join(dir, "cp"), Sink: filepath.Join(dir, "out")}
}

// s3Place puts the query on bucket of srv; processes reach the server at
// endpoint (srv.Endpoint, or a fault proxy in front of it).
func s3Place(t *testing.T, srv *s3test.Server, bucket, endpoint string) place {
	return place{
		Name:       "s3",
		Checkpoint: srv.URI(bucket, "checkpoints/tile/"),
		Sink:       srv.URI(bucket, "warehouse/tile/"),
		Env:        append(srv.Env(), "AWS_ENDPOINT_URL_S3="+endpoint),
		Store:      objstore.Options{S3: srv.Options(bucket)},
	}
}

func (p place) open(t *testing.T, uri string) objstore.Store {
	t.Helper()
	s, err := objstore.Open(context.Background(), uri, p.Store)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p place) checkpoint(t *testing.T) objstore.Store { return p.open(t, p.Checkpoint) }
func (p place) sink(t *testing.T) objstore.Store       { return p.open(t, p.Sink) }

// chaosSpec is the tile over the file source in, on p.
func chaosSpec(in string, p place, filesPerTrigger int, trigger query.Trigger) query.Spec {
	spec := tiletest.Spec(in, p.Sink, p.Checkpoint)
	spec.Source.File.MaxFilesPerTrigger = filesPerTrigger
	spec.Trigger = trigger
	return spec
}

// queryArgs is what one start of the query gets.
type queryArgs struct {
	spec     string   // spec file
	progress string   // --progress-json file
	env      []string // added to every process
	// runArgs are extra `driver run` flags; a topology that cannot honour
	// them skips the test.
	runArgs []string
}

// queryRun is one start of the query: a driver and the executors it
// started with.
type queryRun struct {
	started   time.Time
	driver    *Proc
	executors []*Proc
	progress  string
	addr      string // the driver's address, for executors
	// extra starts one more executor with extra environment and flags
	// (both override the defaults); nil for one process.
	extra func(env []string, args ...string) *Proc
}

// exited reports whether the driver has exited.
func (r *queryRun) exited() bool {
	select {
	case <-r.driver.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the driver and then every executor of the run.
func (r *queryRun) kill() {
	r.driver.Kill()
	for _, e := range r.executors {
		e.Kill()
	}
}

// wait waits for the driver to exit and then stops the executors.
func (r *queryRun) wait(timeout time.Duration) error {
	err := r.driver.Wait(timeout)
	for _, e := range r.executors {
		e.Kill()
	}
	return err
}

func (r *queryRun) logs() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s:\n%s", r.driver.name, r.driver.Logs())
	for _, e := range r.executors {
		fmt.Fprintf(&b, "--- %s:\n%s", e.name, e.Logs())
	}
	return b.String()
}

// topology starts the query.
type topology struct {
	name  string
	start func(t *testing.T, a queryArgs) *queryRun
}

// oneProcess runs the query in one `driver run` process.
var oneProcess = topology{name: "driver-run", start: func(t *testing.T, a queryArgs) *queryRun {
	t.Helper()
	args := append([]string{"run", "-f", a.spec, "--progress-json", a.progress}, a.runArgs...)
	p := NewProc(t, "driver", bins.driver, args...).Env(a.env...)
	started := time.Now()
	p.Start()
	return &queryRun{started: started, driver: p, progress: a.progress}
}}

var chaosListening = regexp.MustCompile(`msg="driver listening" address=(\S+)`)

// executorsTopology runs the query on `driver serve` with n executor
// processes, each in a fresh directory (another node). secure are flags
// given to the driver and every executor (TLS, token; see secureArgs).
func executorsTopology(n int, secure ...string) topology {
	name := fmt.Sprintf("serve+%d-executors", n)
	if len(secure) > 0 {
		name += "+mtls"
	}
	return topology{name: name, start: func(t *testing.T, a queryArgs) *queryRun {
		t.Helper()
		if len(a.runArgs) > 0 {
			t.Skipf("driver serve has no equivalent of %v", a.runArgs)
		}
		if bins.executor == "" {
			t.Skip("no executor binary")
		}
		args := []string{"serve", "--listen", "127.0.0.1:0", "--heartbeat-timeout", "3s", "--min-executors", strconv.Itoa(n),
			"--exit-when-done", "--query", a.spec, "--progress-json", a.progress}
		args = append(args, secure...)
		d := NewProc(t, "driver", bins.driver, args...).Env(a.env...)
		r := &queryRun{started: time.Now(), driver: d, progress: a.progress}
		d.Start()
		d.WaitForLog(`msg="driver listening"`, 30*time.Second)
		m := chaosListening.FindStringSubmatch(d.Logs())
		if m == nil {
			t.Fatalf("no driver address in:\n%s", d.Logs())
		}
		r.addr = m[1]
		r.extra = func(env []string, args ...string) *Proc {
			e := NewProc(t, fmt.Sprintf("executor-%d", len(r.executors)+1), bins.executor,
				append(append([]string{"--driver", r.addr, "--data-dir", "data", "--listen", "127.0.0.1:0"}, secure...), args...)...).Env(a.env...).Env(env...)
			e.Start()
			r.executors = append(r.executors, e)
			return e
		}
		for range n {
			r.extra(nil)
		}
		return r
	}}
}

// feeder writes the tile's input as JSON-lines files into a directory
// while the query runs, one file every interval, each appearing atomically
// (written aside, then renamed in, names in order). File k holds perFile
// events whose nominal times continue where file k-1's ended, each shifted
// back by less than chaosDisorder, so no event is ever late. It keeps only
// the counts the oracle needs, so a soak can run for hours.
type feeder struct {
	dir, tmp string
	seed     uint64
	perFile  int
	step     time.Duration

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu     sync.Mutex
	files  int
	events int
	counts map[tiletest.Window]int64 // Count zero in the key
	maxT   time.Time
	err    error
}

func newFeeder(t *testing.T, seed uint64, perFile int, step time.Duration) *feeder {
	base := t.TempDir()
	f := &feeder{dir: filepath.Join(base, "in"), tmp: filepath.Join(base, "tmp"), seed: seed, perFile: perFile, step: step,
		stop: make(chan struct{}), done: make(chan struct{}), counts: map[tiletest.Window]int64{}}
	for _, d := range []string{f.dir, f.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// write adds file number f.files.
func (f *feeder) write() error {
	f.mu.Lock()
	k := f.files
	f.mu.Unlock()
	events := tiletest.Events(f.seed*1_000_003+uint64(k), f.perFile, f.step, chaosDisorder, 8)
	shift := time.Duration(k*f.perFile) * f.step
	var b strings.Builder
	for i := range events {
		events[i].Time = events[i].Time.Add(shift)
		events[i].ID = fmt.Sprintf("f%d-%d", k, i)
		b.WriteString(events[i].JSON())
		b.WriteByte('\n')
	}
	name := fmt.Sprintf("part-%06d.jsonl", k)
	tmp := filepath.Join(f.tmp, name)
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, name)); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range events {
		us, w := e.Time.UnixMicro(), chaosWindow.Microseconds()
		start := time.UnixMicro(us - (us%w+w)%w).UTC()
		f.counts[tiletest.Window{Start: start, Course: e.Course}]++
		if e.Time.After(f.maxT) {
			f.maxT = e.Time
		}
	}
	f.files++
	f.events += len(events)
	return nil
}

// writeN writes n files now.
func (f *feeder) writeN(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := f.write(); err != nil {
			t.Fatal(err)
		}
	}
}

// run writes a file every interval until Stop (or the test ends).
func (f *feeder) run(t *testing.T, interval time.Duration) {
	t.Cleanup(func() {
		f.stopOnce.Do(func() { close(f.stop) })
		<-f.done
	})
	go func() {
		defer close(f.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
				if err := f.write(); err != nil {
					f.mu.Lock()
					f.err = err
					f.mu.Unlock()
					return
				}
			}
		}
	}()
}

// Stop stops writing (after run) and returns how many files and events
// were written.
func (f *feeder) Stop(t *testing.T) (files, events int) {
	t.Helper()
	f.stopOnce.Do(func() { close(f.stop) })
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatalf("feeder: %v", f.err)
	}
	return f.files, f.events
}

// oracle returns the windows the tile emits for everything written, once
// the query has read it all: those that end at or before the final
// watermark, max event time - delay.
func (f *feeder) oracle() []tiletest.Window {
	f.mu.Lock()
	defer f.mu.Unlock()
	wm := f.maxT.Truncate(time.Millisecond).Add(-chaosDelay)
	var out []tiletest.Window
	for k, n := range f.counts {
		if !k.Start.Add(chaosWindow).After(wm) {
			out = append(out, tiletest.Window{Start: k.Start, Course: k.Course, Count: n})
		}
	}
	tiletest.Sort(out)
	return out
}

// sinkReport compares the sink with the oracle as a reader that lists the
// directory sees it and as one that follows the sink log does, and lists
// files the log does not name.
type sinkReport struct {
	duplicates, missing, wrong int
	diff                       string
	orphans                    []string
}

func (r sinkReport) ok() bool { return r.diff == "" && len(r.orphans) == 0 }

func checkSinkStore(t *testing.T, store objstore.Store, want []tiletest.Window) sinkReport {
	t.Helper()
	ctx := context.Background()
	var rep sinkReport
	for _, read := range []struct {
		name string
		fn   func(context.Context, objstore.Store) ([]query.Column, []tiletest.Window, error)
	}{{"directory listing", readWindows(parquet.ReadAllFiles)}, {"sink log", readWindows(parquet.ReadCommitted)}} {
		_, got, err := read.fn(ctx, store)
		if err != nil {
			t.Fatalf("read the sink by %s: %v", read.name, err)
		}
		d := tiletest.Diff(want, got)
		if d == "" {
			continue
		}
		rep.diff += read.name + ":\n" + d
		var dup, miss, wrong int
		for _, l := range strings.Split(d, "\n") {
			switch {
			case strings.HasPrefix(l, "duplicate:"):
				dup++
			case strings.HasPrefix(l, "missing:"):
				miss++
			case l != "":
				wrong++
			}
		}
		rep.duplicates, rep.missing, rep.wrong = max(rep.duplicates, dup), max(rep.missing, miss), max(rep.wrong, wrong)
	}
	entries, err := parquet.LogEntries(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for _, e := range entries {
		for _, f := range e.Files {
			logged[f] = true
		}
	}
	files, err := parquet.ListDirectory(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !logged[f] {
			rep.orphans = append(rep.orphans, f)
		}
	}
	return rep
}

func readWindows(read func(context.Context, objstore.Store) ([]query.Column, []row.Row, error)) func(context.Context, objstore.Store) ([]query.Column, []tiletest.Window, error) {
	return func(ctx context.Context, s objstore.Store) ([]query.Column, []tiletest.Window, error) {
		cols, rows, err := read(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		if len(rows) == 0 {
			return cols, nil, nil
		}
		got, err := tiletest.FromRows(cols, rows)
		return cols, got, err
	}
}

// logReport summarises a drained checkpoint's log.
type logReport struct {
	batches    int64       // id of the last commit + 1
	firstKept  ids.BatchID // oldest commit still in the log (> 0 after cleanup)
	lastOffset ids.BatchID
}

// checkLogStore requires a drained checkpoint's log to be sound:
// offsets/ and commits/ gap-free (from the oldest entry cleanup kept) and
// ending at the same batch, each batch starting where the previous one
// ended, late watermark = the previous batch's, and each batch's watermark
// the one the previous commit computed.
func checkLogStore(t *testing.T, cp objstore.Store) logReport {
	t.Helper()
	ctx := context.Background()
	log := checkpoint.New(cp)
	if _, err := log.ReadMetadata(ctx); err != nil {
		t.Fatalf("checkpoint metadata: %v", err)
	}
	oids, err := log.OffsetIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cids, err := log.CommitIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cids) == 0 || len(oids) == 0 {
		t.Fatalf("the checkpoint holds %d offsets and %d commits", len(oids), len(cids))
	}
	for name, logged := range map[string][]ids.BatchID{"offsets": oids, "commits": cids} {
		for i := 1; i < len(logged); i++ {
			if logged[i] != logged[i-1]+1 {
				t.Fatalf("%s/ is not gap-free: %d follows %d (ids %v)", name, logged[i], logged[i-1], logged)
			}
		}
	}
	if oids[len(oids)-1] != cids[len(cids)-1] {
		t.Fatalf("after the drain offsets/ ends at %d but commits/ at %d", oids[len(oids)-1], cids[len(cids)-1])
	}
	var prev *checkpoint.OffsetEntry
	for _, id := range oids {
		cur, err := log.Offsets(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if cur.BatchID != id {
			t.Fatalf("offsets/%d says batch %d", id, cur.BatchID)
		}
		if prev != nil {
			if !bytes.Equal(prev.Sources[0].End, cur.Sources[0].Start) {
				t.Fatalf("offsets/%d starts at %s, offsets/%d ended at %s", id, cur.Sources[0].Start, id-1, prev.Sources[0].End)
			}
			if cur.LateWatermark != prev.BatchWatermark {
				t.Fatalf("offsets/%d drops late rows against %d µs, batch %d evicted with %d µs", id, cur.LateWatermark, id-1, prev.BatchWatermark)
			}
			if c, err := log.Commit(ctx, id-1); err == nil {
				if want := max(prev.BatchWatermark, c.NextBatchWatermark); cur.BatchWatermark != want {
					t.Fatalf("offsets/%d evicts with watermark %d µs, commits/%d computed %d µs", id, cur.BatchWatermark, id-1, want)
				}
			}
		}
		prev = cur
	}
	return logReport{batches: int64(cids[len(cids)-1]) + 1, firstKept: cids[0], lastOffset: oids[len(oids)-1]}
}

// pendingBatch returns the batch the log planned but did not commit (the
// one a restart must re-run as logged), or nil.
func pendingBatch(t *testing.T, cp objstore.Store) *checkpoint.OffsetEntry {
	t.Helper()
	ctx := context.Background()
	last, commit, err := checkpoint.New(cp).Latest(ctx)
	if errors.Is(err, objstore.ErrNotExist) || last == nil {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if commit != nil && commit.BatchID >= last.BatchID {
		return nil
	}
	return last
}

// checkRerun requires a restart's first batch to be the pending one, run
// again with its logged offsets and watermark.
func checkRerun(t *testing.T, pending *checkpoint.OffsetEntry, first progress.Report) {
	t.Helper()
	if first.BatchID != pending.BatchID || !first.Rerun {
		t.Fatalf("restart ran batch %d (rerun=%v) first; batch %d was logged but not committed", first.BatchID, first.Rerun, pending.BatchID)
	}
	if first.BatchWatermarkMs != pending.BatchWatermark.Millis() || first.LateWatermarkMs != pending.LateWatermark.Millis() {
		t.Fatalf("re-run of batch %d used watermarks %d/%d ms, logged %d/%d ms", pending.BatchID, first.BatchWatermarkMs, first.LateWatermarkMs, pending.BatchWatermark.Millis(), pending.LateWatermark.Millis())
	}
	if len(first.Sources) == 0 || !bytes.Equal(first.Sources[0].StartOffset, pending.Sources[0].Start) || !bytes.Equal(first.Sources[0].EndOffset, pending.Sources[0].End) {
		t.Fatalf("re-run of batch %d read %v, logged [%s, %s)", pending.BatchID, first.Sources, pending.Sources[0].Start, pending.Sources[0].End)
	}
}

// readProgressIf reads a progress file that may not exist (a run killed
// before its first batch).
func readProgressIf(t *testing.T, path string) []progress.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	// The driver may be writing the last line while it is read: only
	// whole lines count.
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []progress.Report
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var p progress.Report
		if err := json.Unmarshal(line, &p); err != nil {
			t.Fatalf("progress line %q: %v", line, err)
		}
		out = append(out, p)
	}
	return out
}

// committedAt is when a batch's commit finished, by the driver's clock:
// its start plus its triggerExecution duration.
func committedAt(t *testing.T, p progress.Report) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, p.Timestamp)
	if err != nil {
		t.Fatalf("progress timestamp %q: %v", p.Timestamp, err)
	}
	return ts.Add(time.Duration(p.DurationMs["triggerExecution"]) * time.Millisecond)
}

// retries counts re-runs of logged batches and extra attempts.
func retries(progress []progress.Report) int {
	n := 0
	for _, p := range progress {
		if p.Rerun {
			n++
		}
		if p.Attempts > 1 {
			n += p.Attempts - 1
		}
	}
	return n
}

// summary is a scenario's one-line report.
type summary struct {
	scenario                string
	seed                    uint64
	batches                 int64
	kills, retries, windows int
	duplicates, missing     int
	extra                   []string
}

func (s summary) line() string {
	l := fmt.Sprintf("CHAOS scenario=%s seed=%d batches=%d kills=%d retries=%d windows=%d duplicates=%d missing=%d",
		s.scenario, s.seed, s.batches, s.kills, s.retries, s.windows, s.duplicates, s.missing)
	if len(s.extra) > 0 {
		l += " " + strings.Join(s.extra, " ")
	}
	return l
}

// report prints the summary (test log, stdout with -v, and
// $SLUICE_CHAOS_SUMMARY).
func (s summary) report(t *testing.T) {
	t.Helper()
	l := s.line()
	t.Log(l)
	if path := os.Getenv("SLUICE_CHAOS_SUMMARY"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, l)
			f.Close()
		}
	}
}

// finish checks the sink and the log of a drained query, fills the
// summary's counts, prints it, and fails the test on any difference.
func finish(t *testing.T, p place, want []tiletest.Window, s summary) logReport {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the oracle has no window: the scenario checks nothing")
	}
	rep := checkSinkStore(t, p.sink(t), want)
	lr := checkLogStore(t, p.checkpoint(t))
	s.batches, s.windows, s.duplicates, s.missing = lr.batches, len(want), rep.duplicates, rep.missing
	s.report(t)
	if rep.diff != "" {
		t.Fatalf("the sink differs from the oracle (%d duplicates, %d missing, %d wrong):\n%s", rep.duplicates, rep.missing, rep.wrong, truncate(rep.diff, 4000))
	}
	if len(rep.orphans) > 0 {
		t.Fatalf("files in the sink directory the sink log does not list: %v", rep.orphans)
	}
	return lr
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n..."
}

// durations summarises samples as "median/max" milliseconds.
func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("%d/%d", s[len(s)/2].Milliseconds(), s[len(s)-1].Milliseconds())
}

// chaosRand is the scenario's random source.
func chaosRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xc4a05)) }
