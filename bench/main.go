package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/sluicehq/sluice/query"
)

// config is the command line.
type config struct {
	rows              int
	runs              int
	maxRowsPerTrigger int64
	rowsPerFile       int
	noDataBatches     int
	noDataCourses     int
	noDataInterval    time.Duration
	parallelism       int
	dir               string
	only              string
	cpuProfile        string
	markdown          bool
}

func main() {
	var c config
	flag.IntVar(&c.rows, "n", 3_000_000, "events per run")
	flag.IntVar(&c.runs, "runs", 5, "rounds; each round runs the raw loop and both engine runs once (figures are medians)")
	flag.Int64Var(&c.maxRowsPerTrigger, "max-rows-per-trigger", 500_000, "generator maxRowsPerTrigger (the file source takes the same rows per batch)")
	flag.IntVar(&c.rowsPerFile, "rows-per-file", 100_000, "lines per file for the file source (the generator's split size is 100000)")
	flag.IntVar(&c.noDataBatches, "nodata-batches", 40, "no-data batches to time")
	flag.IntVar(&c.noDataCourses, "nodata-courses", 100, "events (one per course) per file in the no-data measurement")
	flag.DurationVar(&c.noDataInterval, "nodata-interval", 20*time.Millisecond, "processingTime trigger of the no-data measurement")
	flag.IntVar(&c.parallelism, "parallelism", 0, "engine task parallelism (0: GOMAXPROCS)")
	flag.StringVar(&c.dir, "dir", "", "work directory (default: a new temporary directory, removed at the end)")
	flag.StringVar(&c.only, "only", "", "comma-separated subset of raw,gen,file,nodata (default all)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&c.markdown, "markdown", false, "also print the results as a Markdown table for bench/README.md")
	flag.Parse()
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sluicebench:", err)
		os.Exit(1)
	}
}

// Results are the medians of a whole invocation.
type Results struct {
	Rows                     int
	Runs                     int
	RawEPS, GenEPS, FileEPS  []float64 // events/s per round
	GenRatio, FileRatio      []float64 // engine / raw loop per round
	RawCPU, GenCPU, FileCPU  []float64 // CPU ns per event per round
	ParEPS, ParSpeedup       []float64 // raw loop on GOMAXPROCS goroutines; its speedup over one
	GenVsPar, FileVsPar      []float64 // engine / parallel raw loop per round
	Load                     []string  // /proc/loadavg at start and end
	GenCores, FileCores      []float64 // CPU time / wall time of the engine runs
	PutMs                    []float64 // fsynced 1 KiB Put on local disk
	Gen, File                []*EngineRun
	NoData                   *NoDataRun
	RawWindows, EngineGroups int
}

func run(ctx context.Context, c config, out io.Writer) error {
	want := map[string]bool{}
	for _, s := range strings.Split(c.only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	all := len(want) == 0
	do := func(s string) bool { return all || want[s] }

	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluicebench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return fmt.Errorf("create cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	fmt.Fprintf(out, "sluicebench: %d events, %d rounds, maxRowsPerTrigger %d, GOMAXPROCS %d, %s, %s\n",
		c.rows, c.runs, c.maxRowsPerTrigger, runtime.GOMAXPROCS(0), runtime.Version(), time.Now().UTC().Format(time.RFC3339))
	res := &Results{Rows: c.rows, Runs: c.runs, Load: []string{loadAvg()}}
	gopts := generatorOptions(int64(c.rows), c.maxRowsPerTrigger)

	var lines *Lines
	srcDir := filepath.Join(dir, "lines")
	if do("raw") || do("file") {
		t := time.Now()
		lines = generateLines(gopts, c.rows)
		fmt.Fprintf(out, "generated %d lines (%.1f bytes/line) in %v\n", lines.Len(), float64(len(lines.Data))/float64(lines.Len()), time.Since(t).Round(time.Millisecond))
	}
	if do("file") {
		n, err := writeFiles(srcDir, lines, c.rowsPerFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %d files of %d lines to %s\n", n, c.rowsPerFile, srcDir)
	}
	filesPerTrigger := max(int(c.maxRowsPerTrigger)/c.rowsPerFile, 1)
	if do("raw") {
		if _, err := rawLoop(lines); err != nil { // warm-up, not counted
			return err
		}
	}

	for r := range c.runs {
		var raw, par float64
		if do("raw") {
			rr, err := rawLoop(lines)
			if err != nil {
				return err
			}
			raw = eps(c.rows, rr.Elapsed)
			res.RawEPS = append(res.RawEPS, raw)
			res.RawCPU = append(res.RawCPU, nsPer(c.rows, rr.CPU))
			res.RawWindows = len(rr.Counts)
			fmt.Fprintf(out, "round %d raw loop      %7.3f s  %6.3f M events/s  %5.0f CPU ns/event  (%d windows)\n",
				r+1, rr.Elapsed.Seconds(), raw/1e6, nsPer(c.rows, rr.CPU), len(rr.Counts))
			p := runtime.GOMAXPROCS(0)
			pr, err := rawLoopParallel(lines, p)
			if err != nil {
				return err
			}
			par = eps(c.rows, pr.Elapsed)
			res.ParEPS = append(res.ParEPS, par)
			res.ParSpeedup = append(res.ParSpeedup, par/raw)
			fmt.Fprintf(out, "round %d raw loop ×%d   %7.3f s  %6.3f M events/s  %5.0f CPU ns/event  %.2f cores  speedup %.2f\n",
				r+1, p, pr.Elapsed.Seconds(), par/1e6, nsPer(c.rows, pr.CPU), pr.CPU.Seconds()/pr.Elapsed.Seconds(), par/raw)
		}
		if do("gen") {
			g := gopts
			spec := tileSpec(query.Source{Generator: &g}, filepath.Join(dir, fmt.Sprintf("gen-%d", r)), query.Trigger{AvailableNow: true})
			er, err := runEngine(ctx, spec, c.parallelism)
			if err != nil {
				return fmt.Errorf("engine with generator source: %w", err)
			}
			if err := checkRun(er, c.rows); err != nil {
				return fmt.Errorf("engine with generator source: %w", err)
			}
			v := eps(c.rows, er.Elapsed)
			res.GenEPS = append(res.GenEPS, v)
			res.GenCPU = append(res.GenCPU, nsPer(c.rows, er.CPU))
			res.GenCores = append(res.GenCores, er.CPU.Seconds()/er.Elapsed.Seconds())
			res.Gen = append(res.Gen, er)
			res.EngineGroups = int(er.OutputRows + er.StateRows)
			line := fmt.Sprintf("round %d engine (gen)  %7.3f s  %6.3f M events/s  %5.0f CPU ns/event  %.2f cores  %d batches",
				r+1, er.Elapsed.Seconds(), v/1e6, nsPer(c.rows, er.CPU), er.CPU.Seconds()/er.Elapsed.Seconds(), len(er.Batches))
			if raw > 0 {
				res.GenRatio = append(res.GenRatio, v/raw)
				res.GenVsPar = append(res.GenVsPar, v/par)
				line += fmt.Sprintf("  ratio %.2f (%.2f of raw ×P)", v/raw, v/par)
			}
			fmt.Fprintln(out, line)
			os.RemoveAll(filepath.Join(dir, fmt.Sprintf("gen-%d", r)))
		}
		if do("file") {
			spec := tileSpec(query.Source{File: &query.FileSource{Path: srcDir, MaxFilesPerTrigger: filesPerTrigger}, Schema: query.GeneratorSchema()},
				filepath.Join(dir, fmt.Sprintf("file-%d", r)), query.Trigger{AvailableNow: true})
			er, err := runEngine(ctx, spec, c.parallelism)
			if err != nil {
				return fmt.Errorf("engine with file source: %w", err)
			}
			if err := checkRun(er, c.rows); err != nil {
				return fmt.Errorf("engine with file source: %w", err)
			}
			v := eps(c.rows, er.Elapsed)
			res.FileEPS = append(res.FileEPS, v)
			res.FileCPU = append(res.FileCPU, nsPer(c.rows, er.CPU))
			res.FileCores = append(res.FileCores, er.CPU.Seconds()/er.Elapsed.Seconds())
			res.File = append(res.File, er)
			line := fmt.Sprintf("round %d engine (file) %7.3f s  %6.3f M events/s  %5.0f CPU ns/event  %.2f cores  %d batches",
				r+1, er.Elapsed.Seconds(), v/1e6, nsPer(c.rows, er.CPU), er.CPU.Seconds()/er.Elapsed.Seconds(), len(er.Batches))
			if raw > 0 {
				res.FileRatio = append(res.FileRatio, v/raw)
				res.FileVsPar = append(res.FileVsPar, v/par)
				line += fmt.Sprintf("  ratio %.2f (%.2f of raw ×P)", v/raw, v/par)
			}
			fmt.Fprintln(out, line)
			os.RemoveAll(filepath.Join(dir, fmt.Sprintf("file-%d", r)))
		}
	}
	if do("nodata") {
		nd, err := runNoData(ctx, filepath.Join(dir, "nodata"), c.noDataBatches, c.noDataCourses, c.noDataInterval, c.parallelism)
		if err != nil {
			return fmt.Errorf("no-data measurement: %w", err)
		}
		res.NoData = nd
		if res.PutMs, err = putLatency(ctx, filepath.Join(dir, "put-latency"), 50); err != nil {
			return err
		}
	}
	res.Load = append(res.Load, loadAvg())
	fmt.Fprintln(out)
	printTable(out, res, c)
	if c.markdown {
		fmt.Fprintln(out)
		printMarkdown(out, res, c)
	}
	return nil
}

// checkRun refuses a run that did not read every row.
func checkRun(er *EngineRun, rows int) error {
	if er.InputRows != int64(rows) {
		return fmt.Errorf("read %d rows, want %d", er.InputRows, rows)
	}
	return nil
}

func eps(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// loadAvg returns the 1-minute load average, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func nsPer(n int, d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }

// batchStats summarises batches of one kind (data or no-data).
type batchStats struct {
	count                     int
	trigger, fromWAL          []float64 // ms
	writes, cpWrites, reads   []float64
	lists, stateWrites, sinkW []float64
}

func collect(batches []Batch, noData bool) batchStats {
	var s batchStats
	for _, b := range batches {
		if b.Progress.NoData != noData {
			continue
		}
		s.count++
		s.trigger = append(s.trigger, float64(b.Progress.DurationMs["triggerExecution"]))
		s.fromWAL = append(s.fromWAL, float64(b.FromWAL.Microseconds())/1000)
		s.cpWrites = append(s.cpWrites, float64(b.Requests.Writes()))
		s.reads = append(s.reads, float64(b.Requests.Get))
		s.lists = append(s.lists, float64(b.Requests.List))
		sw := 0
		for _, op := range b.Progress.StateOperators {
			sw += op.NumStateStoreWrites
		}
		s.stateWrites = append(s.stateWrites, float64(sw))
		if b.SinkWrites >= 0 {
			s.sinkW = append(s.sinkW, float64(b.SinkWrites))
		}
	}
	return s
}

func allBatches(runs []*EngineRun) []Batch {
	var out []Batch
	for _, r := range runs {
		out = append(out, r.Batches...)
	}
	return out
}

// rangeOf renders the median and the range of xs.
func rangeOf(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", median(xs), lo, hi)
}

func millions(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x / 1e6
	}
	return out
}

func printTable(out io.Writer, res *Results, c config) {
	fmt.Fprintf(out, "medians of %d rounds [min–max], %d events; 1-minute load average %s\n", res.Runs, res.Rows, strings.Join(res.Load, " → "))
	row := func(name, value, target string) {
		fmt.Fprintf(out, "  %-44s %-28s %s\n", name, value, target)
	}
	row("raw loop, 1 goroutine (M events/s)", rangeOf(millions(res.RawEPS), "%.2f"), "target ≥ 1.5")
	row("engine, generator source (M events/s)", rangeOf(millions(res.GenEPS), "%.2f"), "")
	row("engine, file source (M events/s)", rangeOf(millions(res.FileEPS), "%.2f"), "")
	row("ratio engine/raw, generator source", rangeOf(res.GenRatio, "%.2f"), "target ≥ 1.0")
	row("ratio engine/raw, file source", rangeOf(res.FileRatio, "%.2f"), "target ≥ 1.0")
	row(fmt.Sprintf("raw loop, %d goroutines (M events/s)", runtime.GOMAXPROCS(0)), rangeOf(millions(res.ParEPS), "%.2f"), "")
	row("  its speedup over 1 goroutine", rangeOf(res.ParSpeedup, "%.2f"), "cores the machine gave")
	row("engine / parallel raw loop, generator", rangeOf(res.GenVsPar, "%.2f"), "")
	row("engine / parallel raw loop, file", rangeOf(res.FileVsPar, "%.2f"), "")
	row("raw loop CPU ns/event", rangeOf(res.RawCPU, "%.0f"), "")
	row("engine CPU ns/event, generator source", rangeOf(res.GenCPU, "%.0f"), "")
	row("engine CPU ns/event, file source", rangeOf(res.FileCPU, "%.0f"), "")
	row("engine cores used (CPU/wall), generator", rangeOf(res.GenCores, "%.2f"), "")
	row("engine cores used (CPU/wall), file", rangeOf(res.FileCores, "%.2f"), "")
	for _, src := range []struct {
		name string
		runs []*EngineRun
	}{{"gen", res.Gen}, {"file", res.File}} {
		if len(src.runs) == 0 {
			continue
		}
		d := collect(allBatches(src.runs), false)
		n := collect(allBatches(src.runs), true)
		row(fmt.Sprintf("%s: data batches per run", src.name), fmt.Sprintf("%d", d.count/len(src.runs)), "")
		row(fmt.Sprintf("%s: data batch triggerExecution (ms)", src.name), rangeOf(d.trigger, "%.0f"), "")
		row(fmt.Sprintf("%s: checkpoint writes / data batch", src.name), rangeOf(d.cpWrites, "%.0f"), "target ≤ 3 + changed state partitions")
		row(fmt.Sprintf("%s: state files written / data batch", src.name), rangeOf(d.stateWrites, "%.0f"), "")
		row(fmt.Sprintf("%s: checkpoint gets, lists / data batch", src.name), rangeOf(d.reads, "%.0f")+", "+rangeOf(d.lists, "%.0f"), "")
		row(fmt.Sprintf("%s: sink objects / data batch", src.name), rangeOf(d.sinkW, "%.0f"), "")
		row(fmt.Sprintf("%s: checkpoint writes / no-data batch", src.name), rangeOf(n.cpWrites, "%.0f"), "")
		row(fmt.Sprintf("%s: sink objects / no-data batch", src.name), rangeOf(n.sinkW, "%.0f"), "")
	}
	if res.NoData != nil {
		n := collect(res.NoData.Batches, true)
		d := collect(res.NoData.Batches, false)
		row("no-data batch triggerExecution (ms)", rangeOf(n.trigger, "%.0f"), fmt.Sprintf("target < 10 (%d batches)", n.count))
		row("no-data batch, offsets write → report (ms)", rangeOf(n.fromWAL, "%.2f"), "")
		row("small data batch triggerExecution (ms)", rangeOf(d.trigger, "%.0f"), fmt.Sprintf("%d batches of %d rows", d.count, c.noDataCourses))
		row("small data batch, offsets write → report (ms)", rangeOf(d.fromWAL, "%.2f"), "")
		row("checkpoint writes / small data batch", rangeOf(d.cpWrites, "%.0f"), "")
		row("state files written / small data batch", rangeOf(d.stateWrites, "%.0f"), "")
		row("checkpoint gets, lists / small data batch", rangeOf(d.reads, "%.0f")+", "+rangeOf(d.lists, "%.0f"), "")
		row("checkpoint writes / no-data batch", rangeOf(n.cpWrites, "%.0f"), "")
		row("state files written / no-data batch", rangeOf(n.stateWrites, "%.0f"), "")
		row("checkpoint gets, lists / no-data batch", rangeOf(n.reads, "%.0f")+", "+rangeOf(n.lists, "%.0f"), "")
		row("sink objects / no-data batch", rangeOf(n.sinkW, "%.0f"), "")
		row("local fsynced 1 KiB Put (ms)", rangeOf(res.PutMs, "%.2f"), "")
	}
}

// printMarkdown prints the headline figures and the machine as Markdown.
func printMarkdown(out io.Writer, res *Results, c config) {
	nproc := "?"
	if b, err := exec.Command("nproc").Output(); err == nil {
		nproc = strings.TrimSpace(string(b))
	}
	fmt.Fprintf(out, "Machine: nproc %s, GOMAXPROCS %d, %s/%s, %s, %s, 1-minute load average %s. %d events, %d rounds, maxRowsPerTrigger %d.\n\n",
		nproc, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"), strings.Join(res.Load, " → "), res.Rows, res.Runs, c.maxRowsPerTrigger)
	fmt.Fprintln(out, "| measurement | median [min–max] | target |")
	fmt.Fprintln(out, "|---|---|---|")
	md := func(name, v, target string) { fmt.Fprintf(out, "| %s | %s | %s |\n", name, v, target) }
	md("raw loop, 1 goroutine, M events/s", rangeOf(millions(res.RawEPS), "%.2f"), "≥ 1.5")
	md("engine, generator source, M events/s", rangeOf(millions(res.GenEPS), "%.2f"), "")
	md("engine, file source, M events/s", rangeOf(millions(res.FileEPS), "%.2f"), "")
	md("ratio engine / raw loop, generator source", rangeOf(res.GenRatio, "%.2f"), "≥ 1.0")
	md("ratio engine / raw loop, file source", rangeOf(res.FileRatio, "%.2f"), "≥ 1.0")
	md(fmt.Sprintf("raw loop, %d goroutines, M events/s (speedup over 1)", runtime.GOMAXPROCS(0)), rangeOf(millions(res.ParEPS), "%.2f")+" ("+rangeOf(res.ParSpeedup, "%.2f")+")", "")
	md("engine / parallel raw loop, generator / file source", rangeOf(res.GenVsPar, "%.2f")+" / "+rangeOf(res.FileVsPar, "%.2f"), "")
	md("raw loop CPU ns/event", rangeOf(res.RawCPU, "%.0f"), "")
	md("engine CPU ns/event, generator / file source", rangeOf(res.GenCPU, "%.0f")+" / "+rangeOf(res.FileCPU, "%.0f"), "")
	md("engine cores used (CPU/wall), generator / file source", rangeOf(res.GenCores, "%.2f")+" / "+rangeOf(res.FileCores, "%.2f"), "")
	if len(res.Gen) > 0 {
		d := collect(allBatches(res.Gen), false)
		md("checkpoint writes per data batch (generator, 500k rows)", rangeOf(d.cpWrites, "%.0f"), "≤ 3 + changed state partitions")
		md("state files per data batch (generator)", rangeOf(d.stateWrites, "%.0f"), "")
		md("sink objects per data batch (generator)", rangeOf(d.sinkW, "%.0f"), "")
	}
	if res.NoData != nil {
		n := collect(res.NoData.Batches, true)
		d := collect(res.NoData.Batches, false)
		md("no-data batch triggerExecution, ms", rangeOf(n.trigger, "%.0f"), "< 10")
		md("no-data batch, offsets write to report, ms", rangeOf(n.fromWAL, "%.2f"), "")
		md("checkpoint writes per small data batch", rangeOf(d.cpWrites, "%.0f"), "≤ 3 + changed state partitions")
		md("state files per small data batch", rangeOf(d.stateWrites, "%.0f"), "")
		md("checkpoint writes per no-data batch", rangeOf(n.cpWrites, "%.0f"), "")
		md("state files per no-data batch", rangeOf(n.stateWrites, "%.0f"), "")
		md("sink objects per no-data batch", rangeOf(n.sinkW, "%.0f"), "")
		md("local fsynced 1 KiB Put, ms", rangeOf(res.PutMs, "%.2f"), "")
	}
}
