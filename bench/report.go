package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/query"
)

// The report (-report DIR): the whole suite's figures as DIR/report.md
// and DIR/report.json, PNG plots, the machine and its load during the
// run, a table of the targets with where each stands, and for a
// missed throughput target the top of a CPU profile of both sides.

// Machine describes where the figures come from.
type Machine struct {
	NumCPU     int
	GOMAXPROCS int
	CPUModel   string
	MemTotal   string
	GOOS       string
	GOARCH     string
	GoVersion  string
	Start, End time.Time
	// Load is the 1-minute load average sampled every loadEvery.
	Load []float64
}

const loadEvery = 2 * time.Second

// loadSampler samples /proc/loadavg until stopped.
type loadSampler struct {
	mu   sync.Mutex
	xs   []float64
	stop chan struct{}
	done chan struct{}
}

func startLoadSampler() *loadSampler {
	s := &loadSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(loadEvery)
		defer t.Stop()
		for {
			if v, err := strconv.ParseFloat(loadAvg(), 64); err == nil {
				s.mu.Lock()
				s.xs = append(s.xs, v)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *loadSampler) finish() []float64 {
	close(s.stop)
	<-s.done
	return s.xs
}

func describeMachine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(), CPUModel: "?", MemTotal: "?"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
			}
		}
	}
	return m
}

// Target is one of the report's targets and where the run stands.
type Target struct {
	Name     string
	Want     string
	Measured string // median [min–max], or empty: not measured
	Status   string // "met", "missed", "not measured"
	Gap      string
	Why      string // for a missed target: what the profile shows, what would close it
	// Profile is the top of the profile the Why refers to (pprof -top).
	Profile string `json:",omitempty"`
}

// Report is report.json.
type Report struct {
	Machine Machine
	Config  map[string]string
	Targets []Target
	Results *Results
	Table   []line `json:"-"`
}

func ratioTarget(name string, p *Pair, want float64) Target {
	t := Target{Name: name, Want: fmt.Sprintf("≥ %.2f", want)}
	if p == nil || len(p.Ratio) == 0 {
		t.Status = "not measured"
		return t
	}
	m := median(p.Ratio)
	t.Measured = rangeOf(p.Ratio, "%.2f")
	if m >= want {
		t.Status, t.Gap = "met", fmt.Sprintf("+%.2f", m-want)
	} else {
		t.Status, t.Gap = "missed", fmt.Sprintf("%.2f (engine %.0f %% slower than wanted)", m-want, 100*(want-m)/want)
		t.Why = "the engine-minus-reference profile below (file source, in process) lists the functions the engine spends CPU on beyond the reference; with spare cores, the data batches' \"share of map phase the last task ran alone\" row shows idle cores at the tail of each map phase"
		if p.Cost != nil {
			t.Why = p.Cost.Why(p.cores(), runtime.GOMAXPROCS(0))
		}
	}
	return t
}

func overheadTarget(p *Pair) Target {
	t := Target{Name: "exactly-once overhead, CPU per event, " + p.Name, Want: "≤ 20 %"}
	m := 100 * median(p.Overhead)
	t.Measured = rangeOf(percent(p.Overhead), "%.0f") + " % (" + rangeOf(p.CPUDiff, "%.0f") + " ns/event)"
	if m <= 20 {
		t.Status, t.Gap = "met", fmt.Sprintf("%.0f points under", 20-m)
	} else {
		t.Status, t.Gap = "missed", fmt.Sprintf("%.0f points over (%.0f ns/event too many)", m-20, median(p.CPUDiff)-0.2*median(p.RefCPU))
		t.Why = "the engine-minus-reference profile below (file source, in process) lists where the extra CPU per event goes"
		if p.Cost != nil {
			t.Why = p.Cost.Why(0, 0)
		}
	}
	return t
}

// sectionTargets are the targets that a Section measures (by
// name): the table lists them as not measured when the mode did not run.
var sectionTargets = []Target{
	{Name: pebbleTargetName, Want: "≤ 1024 MiB peak RSS in every phase"},
	{Name: bigFileS3TargetName, Want: "≥ 0.70"},
	{Name: sqlTargetName, Want: "0.95–1.05"},
	{Name: whereTargetName, Want: "> 1"},
}

// targets is the targets table of the run.
func targets(res *Results) []Target {
	kp := (*Pair)(nil)
	if res.Kafka != nil && len(res.Kafka.Ratio) > 0 {
		kp = res.Kafka.pair()
	}
	ts := []Target{
		ratioTarget("engine / fair reference, file source, in process", res.FilePair, 0.85),
		ratioTarget("engine / fair reference, generator, in process", res.GenPair, 0.85),
		ratioTarget("engine / fair reference, file source, whole `driver run` process", res.ProcessPair, 0.85),
		ratioTarget("engine / fair reference, generator, whole `driver run` process", res.ProcessGenPair, 0.85),
		ratioTarget("engine / fair reference, Kafka (kfake), in process", kp, 0.8),
	}
	// The report's targets: against the bare loop (bare.go), as whole
	// processes.
	var kproc *Pair
	if res.Kafka != nil {
		kproc = res.Kafka.Process
	}
	ts = append(ts,
		ratioTarget("engine / bare loop, file source, whole `driver run` process", res.ProcessPair.bareView(), 0.85),
		ratioTarget("engine / bare loop, Kafka (kfake), whole `driver run` process", kproc.bareView(), 0.8),
	)
	for _, p := range res.pairs() {
		ts = append(ts, overheadTarget(p))
	}
	nd := Target{Name: "no-data batch, local disk, triggerExecution ms", Want: "≤ 10 ms", Status: "not measured"}
	if res.NoData != nil {
		s := collect(res.NoData.Batches, true)
		if s.count > 0 {
			m := median(s.trigger)
			nd.Measured = rangeOf(s.trigger, "%.0f")
			if m <= 10 {
				nd.Status, nd.Gap = "met", fmt.Sprintf("%.0f ms under", 10-m)
			} else {
				nd.Status, nd.Gap = "missed", fmt.Sprintf("%.0f ms over", m-10)
				var phases []string
				for _, k := range []string{"addBatch", "map", "reduce", "commitOffsets"} {
					if xs := s.phases[k]; len(xs) > 0 {
						phases = append(phases, fmt.Sprintf("%s %.0f ms", k, median(xs)))
					}
				}
				put := ""
				if len(res.PutMs) > 0 {
					put = fmt.Sprintf("; a fsynced 1 KiB Put on this disk takes %.2f ms (median) and the batch writes %.0f checkpoint objects (median)", median(res.PutMs), median(s.cpWrites))
				}
				nd.Why = fmt.Sprintf("the batch's phases (progress durationMs, medians): %s%s. A batch that closes a window writes a state delta and a Parquet file per changed partition, the sink log and the commit, each an fsynced Put: if the closing batches are the slow ones (results table), fewer or parallel writes would close the gap; the CPU profile of the run follows (time off-CPU in fsync does not show in it, the phases do)", strings.Join(phases, ", "), put)
				nd.Profile = res.NoData.ProfileTop
			}
		}
	}
	ts = append(ts, nd)
	ts = append(ts, longRunTargets(res.LongRun)...)
	st := Target{Name: "no-data batch on the S3-compatible server, median of the engine benchmark, ms", Want: "≤ 20 ms", Status: "not measured"}
	for _, r := range res.NoDataS3 {
		if r.Where != "s3" {
			continue
		}
		closing := "–"
		if r.Closing > 0 {
			closing = fmt.Sprintf("%.1f", r.Closing)
		}
		st.Measured = fmt.Sprintf("%.1f (closing a window: %s)", r.Quiet, closing)
		if r.Quiet <= 20 {
			st.Status, st.Gap = "met", fmt.Sprintf("%.1f ms under", 20-r.Quiet)
		} else {
			st.Status, st.Gap = "missed", fmt.Sprintf("%.1f ms over", r.Quiet-20)
			st.Why = "the CPU profile of the benchmark (every sub-benchmark, `nodata-s3.pprof`) follows; on the S3-compatible server each checkpoint write is an HTTP request to a server that fsyncs, so the request count per batch (the S3 requests section) times the request latency is the floor: fewer requests per no-data batch (no listing, one conditional PUT for the commit) would close the gap"
			st.Profile = res.NoDataS3Top
			if st.Profile == "" {
				st.Why = "not profiled by this run (run with -report, or `go test ./driver/microbatch -run '^$' -bench NoDataBatch/s3 -cpuprofile F`): " + st.Why
			}
		}
	}
	ts = append(ts, st)
	rt := Target{Name: "new driver → first commit after a SIGKILL mid-batch, max (median in brackets)", Want: "≤ 2 s", Status: "not measured"}
	if r := res.Recovery; r != nil && len(r.StartToCommit) > 0 {
		mx := slices.Max(r.StartToCommit)
		rt.Measured = fmt.Sprintf("%.0f ms (%.0f ms), %d kills", mx, median(r.StartToCommit), r.Kills)
		if mx <= 2000 {
			rt.Status, rt.Gap = "met", fmt.Sprintf("%.0f ms under", 2000-mx)
		} else {
			rt.Status, rt.Gap = "missed", fmt.Sprintf("%.0f ms over", mx-2000)
			rt.Why = "the slowest restart's driver log follows (its timestamps show which step of start-up, checkpoint reading and the re-run of the batch took the time); the start-up of a process (binary load, Go runtime) is in the gap between the kill and the first line. Not a CPU profile: a restart takes well under a second, too few samples for one (`driver run --cpuprofile` profiles a longer one)"
			rt.Profile = r.SlowestLog
		}
	}
	ts = append(ts, rt)
	et := Target{Name: "2 executor processes / one process (throughput, start to exit)", Want: "≥ 0.90", Status: "not measured"}
	for _, e := range res.Executors {
		if e.Executors == 2 {
			p := &Pair{Name: "2 executors"}
			p.Ratio = e.Ratio
			et = ratioTarget(et.Name, p, 0.9)
			if et.Status == "missed" {
				et.Why = "the driver's `query run ended` line of each cluster round follows, with the batches, the shuffle's bytes and records and map retries. With every process on the same cores, the shuffle over gRPC (encoding, copying, the executors' second decode), the driver's RPCs and each process's own runtime are work one process does not do; both overlap a batch's reduce and commit with the next batch's map tasks (the cluster through map tasks run ahead). What would close it: partials sent once per group per executor rather than per map task, and fewer RPCs per batch (a map task's result and the finishing of tasks run ahead in one call)"
				if e.Cost != nil {
					et.Why = strings.TrimSuffix(e.Cost.Why(0, 0), ".") + ". " + capitalize(et.Why)
				}
				et.Profile = strings.Join(e.RunEnded, "\n") + "\n"
				if len(e.RunEnded) == 0 {
					et.Profile = ""
				}
			}
		}
	}
	ts = append(ts, et)
	for _, l := range res.Latency {
		want := l.Trigger + 250*time.Millisecond
		p99 := quantile(l.Ms, 0.99)
		lt := Target{Name: "end-to-end latency beyond the semantic delay, p99, " + l.name(), Want: fmt.Sprintf("≤ %v", want),
			Measured: fmt.Sprintf("%.0f ms (median %.0f, max %.0f, %d windows)", p99, median(l.Ms), l.Ms[len(l.Ms)-1], len(l.Ms))}
		if wantMs := float64(want.Milliseconds()); p99 <= wantMs {
			lt.Status, lt.Gap = "met", fmt.Sprintf("%.0f ms under", wantMs-p99)
		} else {
			lt.Status, lt.Gap = "missed", fmt.Sprintf("%.0f ms over", p99-wantMs)
			lt.Why = "not profiled by this run: a window is emitted by the batch after the one whose data lifted the watermark (a no-data batch); that batch's planning, reduce and commit, and the sink reader's poll, are the candidates"
			if l.Trigger > 0 && !l.AtOnce {
				lt.Why = fmt.Sprintf("Spark's timing, not a cost: the record waits for a trigger (up to %v, the allowance), its batch lifts the watermark, and the no-data batch that writes the window runs at the trigger after that one, a second wait of up to %v that the target does not allow for. trigger.noDataBatchesAtOnce runs that batch at once (its row below); it is off by default because the next data batch then drops late rows against a newer watermark than Spark's (docs/query.md#triggernodatabatchesatonce)", l.Trigger, l.Trigger)
			}
		}
		ts = append(ts, lt)
	}
	if len(res.Latency) == 0 {
		ts = append(ts, Target{Name: "end-to-end latency beyond the semantic delay, p99", Want: "≤ trigger + 250 ms", Status: "not measured"})
	}
	gt := Target{Name: "bytes per open group in memory", Want: "≤ 200", Status: "not measured"}
	if g := res.Groups; g != nil && (len(g.Runs) > 0 || g.BytesPerGroup > 0) {
		var sizes []string
		for _, r := range g.Runs {
			sizes = append(sizes, fmt.Sprintf("%.0f at %d", r.BytesPerGroup, r.OpenGroups))
		}
		gt.Measured = fmt.Sprintf("%.0f at the largest size (%s open groups; one run per size)", g.BytesPerGroup, strings.Join(sizes, ", "))
		if g.BytesPerGroup <= 200 {
			gt.Status, gt.Gap = "met", fmt.Sprintf("%.0f under", 200-g.BytesPerGroup)
		} else {
			gt.Status, gt.Gap = "missed", fmt.Sprintf("%.0f over", g.BytesPerGroup-200)
			gt.Why = "the live heap of the largest size is profiled below (`groups-heap.pprof`): the functions that allocated what the open groups hold; the engine's per-group cost is the aggregation table's entry (key bytes, aggregate, map overhead) in the state store's map, so a denser layout of that table (keys and aggregates in one arena, an open-addressing index) is what would close the gap"
			if g.HeapTop == "" {
				gt.Why = "no heap profile in this run (run with -report to get one): " + gt.Why
			}
		}
	}
	ts = append(ts, gt)
	ft := Target{Name: "engine throughput from the fewest to the most distinct courses (scaling)", Want: "flat within 15 %", Status: "not measured"}
	if f, span := flatness(res.Scaling, "courses"); f > 0 {
		ft.Name += ", " + span
		ft.Measured = fmt.Sprintf("%.2f× (median at the most / at the fewest)", f)
		if f >= 0.85 && f <= 1.15 {
			ft.Status, ft.Gap = "met", fmt.Sprintf("%.0f %% off", 100*abs(1-f))
		} else {
			ft.Status, ft.Gap = "missed", fmt.Sprintf("%.0f %% off, %.0f points beyond", 100*abs(1-f), 100*abs(1-f)-15)
			ft.Why = "the reference's own curve (in the results) shows what a growing map costs any program (cache misses once the groups outgrow the caches), the rest is the engine's: state entries per group, the shuffle of partial aggregates (one per group per map task) and the Parquet rows of closed windows all grow with the distinct courses. The CPU profile below is one engine run at the most courses minus one at the fewest (`scaling-courses-*.pprof`; positive: what the larger key space costs)"
			ft.Profile = res.ScalingTop
			if ft.Profile == "" {
				ft.Why = "not profiled by this run (with -report it is): " + ft.Why
			}
		}
	}
	ts = append(ts, ft)
	have := map[string]bool{}
	for _, s := range res.Sections {
		for _, t := range s.Targets {
			ts = append(ts, t)
			have[t.Name] = true
		}
	}
	// Targets the sections measure, listed even when their mode did not run.
	for _, t := range sectionTargets {
		if !have[t.Name] {
			ts = append(ts, Target{Name: t.Name, Want: t.Want, Status: "not measured"})
		}
	}
	return ts
}

// profileTop runs fn under a CPU profile written to file and returns the
// top of `go tool pprof -top` (empty when the go tool is not there).
func profileTop(file string, fn func() error) (string, error) {
	f, err := os.Create(file)
	if err != nil {
		return "", err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return "", fmt.Errorf("start cpu profile: %w", err)
	}
	runErr := fn()
	pprof.StopCPUProfile()
	f.Close()
	if runErr != nil {
		return "", runErr
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", file).Output()
	if err != nil {
		return "", nil
	}
	return string(out), nil
}

// profiles profiles one engine file-source run and one reference run of
// the same files (only when no -cpuprofile is running already).
func profiles(ctx context.Context, c config, srcDir, dir, outDir string) (engineTop, refTop string, err error) {
	if c.cpuProfile != "" {
		return "", "", nil
	}
	filesPerTrigger := max(int(c.maxRowsPerTrigger)/c.rowsPerFile, 1)
	runDir := filepath.Join(dir, "profile-engine")
	defer os.RemoveAll(runDir)
	engineTop, err = profileTop(filepath.Join(outDir, "engine-file.pprof"), func() error {
		spec := tileSpec(query.Source{File: &query.FileSource{Path: srcDir, MaxFilesPerTrigger: filesPerTrigger}, Schema: query.GeneratorSchema()},
			runDir, query.Trigger{AvailableNow: true})
		_, err := runEngine(ctx, spec, c.parallelism)
		return err
	})
	if err != nil {
		return "", "", err
	}
	if _, err = profileTop(filepath.Join(outDir, "reference-file.pprof"), func() error {
		_, _, err := refFiles(fairRef, srcDir, refParallelism())
		return err
	}); err != nil {
		return "", "", err
	}
	// What the engine spends beyond the reference, function by function.
	diff, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=20",
		"-diff_base", filepath.Join(outDir, "reference-file.pprof"), filepath.Join(outDir, "engine-file.pprof")).Output()
	if err != nil {
		return engineTop, "", nil
	}
	return engineTop, string(diff), nil
}

// writeReport writes DIR/report.md, DIR/report.json and the plots.
func writeReport(outDir string, rep *Report, engineTop, refTop string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("create report directory: %w", err)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(outDir, "report.json"), b, 0o644); err != nil {
		return fmt.Errorf("write report.json: %w", err)
	}
	plots, err := writePlots(outDir, rep)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(outDir, "report.md"))
	if err != nil {
		return fmt.Errorf("write report.md: %w", err)
	}
	defer f.Close()
	writeMarkdown(f, rep, plots, engineTop, refTop)
	return f.Close()
}

// referencesText says in words what the two references measure.
const referencesText = `Each engine figure is compared with two programs run in the same rounds on the same input, one goroutine per core (one franz-go reader per core for Kafka, with the engine's fetch settings), each counting per (window, course) in its own Go map, merged at the end; neither has a checkpoint, state store or sink:

- **the fair reference** decodes with the engine's own decoder and field list (row.Decoder, every Spark conversion rule and check, the columns the query never reads checked but not converted). Engine / fair reference is what exactly-once and the engine around the decoder (planning, tasks, state, Parquet, commits) cost.
- **the bare loop** is what a user writes first: fastjson's parser, GetStringBytes of course_id and event_time, time.Parse(time.RFC3339Nano), no schema, no Spark conversion, no malformed-record handling. Engine / bare loop is what the whole engine costs against the cheapest program that gets the tile's counts on well-formed input, decoder included.`

// busyLoad is the median 1-minute load, per CPU, above which a run's
// machine counts as busy with other work.
const busyLoad = 1.25

func writeMarkdown(w io.Writer, rep *Report, plots []string, engineTop, refTop string) {
	m := rep.Machine
	fmt.Fprintf(w, "# sluicebench report\n\n")
	fmt.Fprintf(w, "## Machine\n\n")
	fmt.Fprintf(w, "- %d CPUs (GOMAXPROCS %d), %s, memory %s, %s/%s, %s\n", m.NumCPU, m.GOMAXPROCS, m.CPUModel, m.MemTotal, m.GOOS, m.GOARCH, m.GoVersion)
	fmt.Fprintf(w, "- run %s → %s (%s)\n", m.Start.UTC().Format(time.RFC3339), m.End.UTC().Format(time.RFC3339), m.End.Sub(m.Start).Round(time.Second))
	if len(m.Load) > 0 {
		fmt.Fprintf(w, "- 1-minute load average during the run (every %v): %s\n", loadEvery, rangeOf(m.Load, "%.1f"))
		// The benchmark alone keeps about one runnable thread per core
		// busy, so a load up to the core count is its own.
		if median(m.Load) > busyLoad*float64(m.NumCPU) {
			fmt.Fprintf(w, "- **The machine was busy** (median load above %.2g× its CPUs, more than the benchmark's own threads): the figures below are not representative; rerun on an idle machine.\n", busyLoad)
		} else {
			fmt.Fprintf(w, "- the median load stayed within %.2g× the CPUs, what the benchmark's own threads make (about one runnable thread per core)\n", busyLoad)
		}
	}
	var keys []string
	for k := range rep.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(w, "- settings:")
	for _, k := range keys {
		fmt.Fprintf(w, " %s=%s", k, rep.Config[k])
	}
	fmt.Fprintf(w, "\n\nEvery figure is the median of the rounds with [min–max]; every ratio is taken within one round, and the rounds alternate which side runs first.\n\n%s\n\n", referencesText)

	fmt.Fprintf(w, "## Targets\n\n| target | wanted | measured | status | gap |\n|---|---|---|---|---|\n")
	for _, t := range rep.Targets {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.Name, t.Want, orDash(t.Measured), t.Status, orDash(t.Gap))
	}
	if fs := rep.Results.Failures; len(fs) > 0 {
		fmt.Fprintf(w, "\n## Failures\n\nThese measurements failed; their figures are missing or partial, the rest ran on.\n\n")
		for _, f := range fs {
			fmt.Fprintf(w, "- **%s**:\n\n```\n%s\n```\n", f.Mode, strings.TrimSpace(tail(f.Err, 3000)))
		}
	}
	var missed []Target
	for _, t := range rep.Targets {
		if t.Status == "missed" {
			missed = append(missed, t)
		}
	}
	if len(missed) > 0 {
		fmt.Fprintf(w, "\n## Why targets are missed\n\n")
		for _, t := range missed {
			if t.Why != "" {
				fmt.Fprintf(w, "- **%s**: %s\n", t.Name, t.Why)
			}
			if t.Profile != "" {
				fmt.Fprintf(w, "\n  ```\n%s  ```\n", indent(t.Profile, "  "))
			}
		}
		if g := rep.Results.Groups; g != nil && g.HeapTop != "" && g.BytesPerGroup > 200 {
			fmt.Fprintf(w, "\nBytes per open group: the live heap with %d open groups (`go tool pprof -sample_index=inuse_space groups-heap.pprof`):\n\n```\n%s```\n", g.Runs[len(g.Runs)-1].OpenGroups, g.HeapTop)
		}
		if engineTop != "" {
			fmt.Fprintf(w, "\nThe throughput and CPU targets: one engine run and one reference run over the same files, profiled (`engine-file.pprof`, `reference-file.pprof` here; `go tool pprof -top -diff_base reference-file.pprof engine-file.pprof` shows what the engine does beyond the reference). The reference spends its CPU on the same decoder; whatever the engine spends beyond it (planning, state, Parquet, checkpoint fsyncs, idle cores at the end of a map phase) is the gap.\n\nEngine:\n\n```\n%s```\n\nEngine minus reference (`-diff_base`; positive: CPU the engine spends that the reference does not):\n\n```\n%s```\n", engineTop, refTop)
		}
	}
	fmt.Fprintf(w, "\n## Results\n\n| measurement | median [min–max] | target |\n|---|---|---|\n")
	for _, l := range rep.Table {
		fmt.Fprintf(w, "| %s | %s | %s |\n", strings.TrimSpace(l.name), l.value, l.target)
	}
	drawn := map[string]bool{}
	for _, p := range plots {
		drawn[p] = true
	}
	inSection := map[string]bool{}
	for _, s := range rep.Results.Sections {
		sectionMarkdown(w, s, drawn)
		for _, p := range s.Plots {
			inSection[p.File] = true
		}
	}
	if len(plots) > len(inSection) {
		fmt.Fprintf(w, "\n## Plots\n\n")
		for _, p := range plots {
			if !inSection[p] {
				fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
			}
		}
	}
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// writePlots draws the per-round ratios, CPU per event and the load, and
// returns the files' names.
func writePlots(dir string, rep *Report) ([]string, error) {
	var names []string
	pairs := rep.Results.pairs()
	if len(pairs) > 0 {
		p := plot.New()
		p.Title.Text = "engine / fair reference and engine / bare loop, per round"
		p.X.Label.Text = "round"
		p.Y.Label.Text = "ratio"
		var args []any
		series := func(ratios []float64) plotter.XYs {
			pts := make(plotter.XYs, len(ratios))
			for i, r := range ratios {
				pts[i] = plotter.XY{X: float64(i + 1), Y: r}
			}
			return pts
		}
		for _, pr := range pairs {
			args = append(args, pr.Name, series(pr.Ratio))
			if len(pr.BareRatio) > 0 {
				args = append(args, pr.Name+" / bare loop", series(pr.BareRatio))
			}
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return nil, fmt.Errorf("plot ratios: %w", err)
		}
		for _, want := range []float64{0.85, 0.8} {
			l, err := plotter.NewLine(plotter.XYs{{X: 1, Y: want}, {X: float64(max(len(pairs[0].Ratio), 2)), Y: want}})
			if err != nil {
				return nil, err
			}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
			p.Add(l)
		}
		p.Y.Min = 0
		p.Legend.Top = true
		if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "ratios.png")); err != nil {
			return nil, fmt.Errorf("plot ratios: %w", err)
		}
		names = append(names, "ratios.png")

		c := plot.New()
		c.Title.Text = "CPU ns per event (median): reference and engine"
		c.Y.Label.Text = "ns/event"
		var ref, eng plotter.Values
		var labels []string
		for _, pr := range pairs {
			ref = append(ref, median(pr.RefCPU))
			eng = append(eng, median(pr.EngCPU))
			labels = append(labels, strings.ReplaceAll(pr.Name, ", ", "\n"))
		}
		w := vg.Points(18)
		br, err := plotter.NewBarChart(ref, w)
		if err != nil {
			return nil, err
		}
		br.Offset = -w / 2
		br.Color = plotutil.Color(0)
		be, err := plotter.NewBarChart(eng, w)
		if err != nil {
			return nil, err
		}
		be.Offset = w / 2
		be.Color = plotutil.Color(1)
		c.Add(br, be)
		c.Legend.Add("reference", br)
		c.Legend.Add("engine", be)
		c.Legend.Top = true
		c.Legend.Left = true
		c.NominalX(labels...)
		if err := c.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "cpu.png")); err != nil {
			return nil, fmt.Errorf("plot cpu: %w", err)
		}
		names = append(names, "cpu.png")
	}
	lp, err := longRunPlots(dir, rep.Results.LongRun)
	if err != nil {
		return nil, err
	}
	names = append(names, lp...)
	sp, err := scalingPlots(dir, rep.Results.Scaling)
	if err != nil {
		return nil, err
	}
	names = append(names, sp...)
	for _, s := range rep.Results.Sections {
		for _, p := range s.Plots {
			if err := drawPlot(dir, p); err != nil {
				// One bad plot does not cost the report.
				s.Text += fmt.Sprintf("\n\n(Plot %s failed: %v.)", p.File, err)
				continue
			}
			names = append(names, p.File)
		}
	}
	if len(rep.Machine.Load) > 1 {
		p := plot.New()
		p.Title.Text = "1-minute load average during the run"
		p.X.Label.Text = "seconds"
		pts := make(plotter.XYs, len(rep.Machine.Load))
		for i, v := range rep.Machine.Load {
			pts[i] = plotter.XY{X: float64(i) * loadEvery.Seconds(), Y: v}
		}
		if err := plotutil.AddLines(p, "load", pts); err != nil {
			return nil, err
		}
		p.Y.Min = 0
		if err := p.Save(8*vg.Inch, 3*vg.Inch, filepath.Join(dir, "load.png")); err != nil {
			return nil, fmt.Errorf("plot load: %w", err)
		}
		names = append(names, "load.png")
	}
	return names, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// scalingPlots draws one throughput curve per scaling series.
func scalingPlots(dir string, series []ScaleSeries) ([]string, error) {
	var names []string
	for _, s := range series {
		if len(s.Points) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = "throughput against " + s.Name + " (generator, in process, median)"
		p.X.Label.Text = s.Name + " (log scale)"
		p.Y.Label.Text = "M events/s"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		var ref, eng plotter.XYs
		for _, pt := range s.Points {
			ref = append(ref, plotter.XY{X: float64(pt.X), Y: median(pt.Pair.RefEPS) / 1e6})
			eng = append(eng, plotter.XY{X: float64(pt.X), Y: median(pt.Pair.EngEPS) / 1e6})
		}
		if err := plotutil.AddLinePoints(p, "reference", ref, "engine", eng); err != nil {
			return nil, fmt.Errorf("plot scaling: %w", err)
		}
		p.Y.Min = 0
		p.Legend.Top = true
		name := "scaling-" + strings.ReplaceAll(s.Name, " ", "-") + ".png"
		if err := p.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("plot scaling: %w", err)
		}
		names = append(names, name)
	}
	return names, nil
}
