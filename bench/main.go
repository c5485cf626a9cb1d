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
	"strconv"
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
	kafka             KafkaConfig
	kafkaRSS          string
	kafkaOptions      string
	state             StateConfig
	stateGroups       string
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
	flag.StringVar(&c.only, "only", "", "comma-separated subset of raw,gen,file,nodata,kafka (default all but kafka, which runs only when named)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&c.markdown, "markdown", false, "also print the results as a Markdown table for bench/README.md")
	flag.IntVar(&c.kafka.Rows, "kafka-n", 10_000_000, "kafka: catch-up backlog, records (0: no catch-up runs)")
	flag.Int64Var(&c.kafka.MaxOffsets, "kafka-max-offsets", 500_000, "kafka: maxOffsetsPerTrigger of the catch-up runs")
	flag.IntVar(&c.kafka.Runs, "kafka-runs", 5, "kafka: catch-up rounds (raw loop and engine once each)")
	var partitions int
	flag.IntVar(&partitions, "kafka-partitions", 8, "kafka: partitions per topic")
	flag.StringVar(&c.kafkaRSS, "kafka-rss", "1000000,10000000", "kafka: backlogs of the driver-run peak-RSS runs, comma-separated (empty: none)")
	flag.Int64Var(&c.kafka.RSSMaxOffsets, "kafka-rss-max-offsets", 200_000, "kafka: maxOffsetsPerTrigger of the peak-RSS runs")
	flag.IntVar(&c.kafka.RSSRuns, "kafka-rss-runs", 3, "kafka: rounds of peak-RSS runs (each round runs every backlog once)")
	flag.StringVar(&c.kafka.Driver, "kafka-driver", "", "kafka: prebuilt driver binary for the RSS runs (default: go build ./cmd/driver into the work directory)")
	flag.StringVar(&c.kafka.HeapProfile, "kafka-heap-profile", "", "kafka: run the engine in this process over the largest RSS backlog and write heap profiles into this directory")
	flag.IntVar(&c.kafka.HeapEvery, "kafka-heap-every", 10, "kafka: batches between heap profiles")
	flag.StringVar(&c.kafkaOptions, "kafka-options", "", "kafka: client options of the engine's source, k=v,k=v (the spec's kafka.* options without the prefix, e.g. max.partition.fetch.bytes=1048576)")
	flag.StringVar(&c.stateGroups, "state-groups", "1000000", "state: groups in the one pebble partition, comma-separated runs (e.g. 1000000,10000000)")
	flag.IntVar(&c.state.Batch, "state-batch", 250_000, "state: groups added per committed batch (a batch's changes are held in memory until it commits)")
	flag.StringVar(&c.state.MemLimit, "state-memlimit", "512MiB", "state: GOMEMLIMIT of each phase process")
	flag.IntVar(&c.state.ValueBytes, "state-value-bytes", 24, "state: bytes per group's aggregate")
	flag.BoolVar(&c.state.MemoryToo, "state-memory", true, "state: also load the checkpoint with the in-memory provider, for contrast")
	flag.Parse()
	for _, s := range strings.Split(c.stateGroups, ",") {
		if s = strings.TrimSpace(s); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				fmt.Fprintf(os.Stderr, "sluicebench: -state-groups: %q is not a positive count\n", s)
				os.Exit(2)
			}
			c.state.Groups = append(c.state.Groups, n)
		}
	}
	c.kafka.Partitions = int32(partitions)
	for _, s := range strings.Split(c.kafkaRSS, ",") {
		if s = strings.TrimSpace(s); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				fmt.Fprintf(os.Stderr, "sluicebench: -kafka-rss: %q is not a positive record count\n", s)
				os.Exit(2)
			}
			c.kafka.RSSRows = append(c.kafka.RSSRows, n)
		}
	}
	for _, kv := range strings.Split(c.kafkaOptions, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "sluicebench: -kafka-options: %q is not key=value\n", kv)
			os.Exit(2)
		}
		if c.kafka.ClientOptions == nil {
			c.kafka.ClientOptions = map[string]string{}
		}
		c.kafka.ClientOptions[strings.TrimPrefix(k, "kafka.")] = v
	}
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
	Kafka                    *KafkaResults
}

func run(ctx context.Context, c config, out io.Writer) error {
	want := map[string]bool{}
	for _, s := range strings.Split(c.only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	all := len(want) == 0
	// kafka preloads a broker with millions of records, state writes
	// millions of groups: only when named.
	do := func(s string) bool { return (all && s != "kafka" && s != "state") || want[s] }

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

	if do("state") {
		c.state.KeepWorkDir = c.dir != ""
		if _, err := runState(ctx, c.state, dir, out); err != nil {
			return fmt.Errorf("state measurement: %w", err)
		}
		if len(want) == 1 {
			return nil
		}
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
	if do("kafka") {
		c.kafka.Parallelism = c.parallelism
		kr, err := runKafka(ctx, c.kafka, dir, out)
		if err != nil {
			return fmt.Errorf("kafka measurement: %w", err)
		}
		res.Kafka = kr
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
	fixed, deltas, snapshots  []float64
	tailShare                 []float64 // MapTail / MapPhase
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
		s.fixed = append(s.fixed, float64(b.Writes.Fixed()))
		if b.MapPhase > 0 {
			s.tailShare = append(s.tailShare, b.MapTail.Seconds()/b.MapPhase.Seconds())
		}
		s.deltas = append(s.deltas, float64(b.Writes.Deltas))
		s.snapshots = append(s.snapshots, float64(b.Writes.Snapshots))
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

// line is one row of the results table.
type line struct{ name, value, target string }

// tableLines are the results, in the order both tables print them.
func tableLines(res *Results, c config) []line {
	var ls []line
	add := func(name, value, target string) { ls = append(ls, line{name, value, target}) }
	p := runtime.GOMAXPROCS(0)
	if len(res.RawEPS) > 0 {
		add("raw loop, 1 goroutine, M events/s", rangeOf(millions(res.RawEPS), "%.2f"), "≥ 1.5")
		add(fmt.Sprintf("raw loop, %d goroutines, M events/s", p), rangeOf(millions(res.ParEPS), "%.2f"), "")
		add(fmt.Sprintf("  speedup of %d goroutines over 1 (cores the machine gave)", p), rangeOf(res.ParSpeedup, "%.2f"), "")
	}
	if len(res.GenEPS) > 0 {
		add("engine, generator source, M events/s", rangeOf(millions(res.GenEPS), "%.2f"), "")
	}
	if len(res.FileEPS) > 0 {
		add("engine, file source, M events/s", rangeOf(millions(res.FileEPS), "%.2f"), "")
	}
	if len(res.GenRatio) > 0 {
		add("ratio engine / raw loop, generator source", rangeOf(res.GenRatio, "%.2f"), "≥ 1.0")
	}
	if len(res.FileRatio) > 0 {
		add("ratio engine / raw loop, file source", rangeOf(res.FileRatio, "%.2f"), "≥ 1.0")
	}
	if len(res.GenVsPar) > 0 || len(res.FileVsPar) > 0 {
		add(fmt.Sprintf("ratio engine / raw loop on %d goroutines, generator / file", p), rangeOf(res.GenVsPar, "%.2f")+" / "+rangeOf(res.FileVsPar, "%.2f"), "")
	}
	if len(res.RawCPU) > 0 {
		add("raw loop, CPU ns/event", rangeOf(res.RawCPU, "%.0f"), "")
	}
	if len(res.GenCPU) > 0 || len(res.FileCPU) > 0 {
		add("engine, CPU ns/event, generator / file", rangeOf(res.GenCPU, "%.0f")+" / "+rangeOf(res.FileCPU, "%.0f"), "")
		add("engine, cores used (CPU/wall), generator / file", rangeOf(res.GenCores, "%.2f")+" / "+rangeOf(res.FileCores, "%.2f"), "")
	}
	writes := func(label string, s batchStats, target string, split bool) {
		if s.count == 0 {
			return
		}
		add(fmt.Sprintf("%s: batches", label), fmt.Sprintf("%d", s.count), "")
		add(fmt.Sprintf("%s: triggerExecution ms", label), rangeOf(s.trigger, "%.0f"), target)
		if split {
			add(fmt.Sprintf("%s: share of map phase the last task ran alone", label), rangeOf(s.tailShare, "%.2f"), "")
		}
		add(fmt.Sprintf("%s: checkpoint writes", label), rangeOf(s.cpWrites, "%.0f"), "")
		add(fmt.Sprintf("%s:   offsets + commits + other", label), rangeOf(s.fixed, "%.0f"), "≤ 3")
		add(fmt.Sprintf("%s:   state deltas (changed partitions)", label), rangeOf(s.deltas, "%.0f"), "")
		add(fmt.Sprintf("%s:   state snapshots", label), rangeOf(s.snapshots, "%.0f"), "")
		add(fmt.Sprintf("%s: checkpoint gets / lists", label), rangeOf(s.reads, "%.0f")+" / "+rangeOf(s.lists, "%.0f"), "")
		add(fmt.Sprintf("%s: sink objects (files + log entry)", label), rangeOf(s.sinkW, "%.0f"), "")
	}
	if len(res.Gen) > 0 {
		writes(fmt.Sprintf("generator, data batch of %d rows", c.maxRowsPerTrigger), collect(allBatches(res.Gen), false), "", true)
		writes("generator, final no-data batch", collect(allBatches(res.Gen), true), "", false)
	}
	if len(res.File) > 0 {
		writes(fmt.Sprintf("file, data batch of %d files", max(int(c.maxRowsPerTrigger)/c.rowsPerFile, 1)), collect(allBatches(res.File), false), "", true)
	}
	if res.NoData != nil {
		n := collect(res.NoData.Batches, true)
		d := collect(res.NoData.Batches, false)
		var quiet, closing []Batch
		for _, b := range res.NoData.Batches {
			if b.Progress.NoData && b.Progress.Sink.NumOutputRows == 0 {
				quiet = append(quiet, b)
			} else if b.Progress.NoData {
				closing = append(closing, b)
			}
		}
		add("no-data batch, triggerExecution ms (all)", rangeOf(n.trigger, "%.0f"), "< 10")
		add("no-data batch, offsets write → progress ms (all)", rangeOf(n.fromWAL, "%.2f"), "")
		q, cl := collect(quiet, true), collect(closing, true)
		add(fmt.Sprintf("  closing a window (%d rows out), triggerExecution ms", c.noDataCourses), rangeOf(cl.trigger, "%.0f")+fmt.Sprintf(" (%d batches)", cl.count), "")
		add("  closing nothing, triggerExecution ms", rangeOf(q.trigger, "%.0f")+fmt.Sprintf(" (%d batches)", q.count), "")
		writes("no-data batch closing a window", cl, "", false)
		writes(fmt.Sprintf("data batch of %d rows (processingTime)", c.noDataCourses), d, "", false)
		add("local fsynced 1 KiB Put, ms", rangeOf(res.PutMs, "%.2f"), "")
	}
	if res.Kafka != nil {
		ls = append(ls, kafkaLines(res.Kafka)...)
	}
	return ls
}

func printTable(out io.Writer, res *Results, c config) {
	fmt.Fprintf(out, "medians of %d rounds [min–max], %d events; 1-minute load average %s\n", res.Runs, res.Rows, strings.Join(res.Load, " → "))
	for _, l := range tableLines(res, c) {
		fmt.Fprintf(out, "  %-72s %-30s %s\n", l.name, l.value, l.target)
	}
}

// printMarkdown prints the results and the machine as Markdown.
func printMarkdown(out io.Writer, res *Results, c config) {
	nproc := "?"
	if b, err := exec.Command("nproc").Output(); err == nil {
		nproc = strings.TrimSpace(string(b))
	}
	fmt.Fprintf(out, "Machine: nproc %s, GOMAXPROCS %d, %s/%s, %s, %s, 1-minute load average %s. %d events, %d rounds, maxRowsPerTrigger %d.\n\n",
		nproc, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"), strings.Join(res.Load, " → "), res.Rows, res.Runs, c.maxRowsPerTrigger)
	fmt.Fprintln(out, "| measurement | median [min–max] | target |")
	fmt.Fprintln(out, "|---|---|---|")
	for _, l := range tableLines(res, c) {
		fmt.Fprintf(out, "| %s | %s | %s |\n", strings.TrimSpace(l.name), l.value, l.target)
	}
}
