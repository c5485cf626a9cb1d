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
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is the command line.
type config struct {
	rows               int
	runs               int
	maxRowsPerTrigger  int64
	rowsPerFile        int
	noDataBatches      int
	noDataCourses      int
	noDataInterval     time.Duration
	parallelism        int
	dir                string
	only               string
	cpuProfile         string
	processProfile     string
	markdown           bool
	report             string
	scale              ScaleConfig
	groupsCourses      []int
	kills              int
	executors          []int
	latencyFor         time.Duration
	kafka              KafkaConfig
	kafkaRSS           string
	kafkaOptions       string
	partitions         PartitionsConfig
	partCounts         string
	partExecutors      string
	partBatch          string
	state              StateConfig
	stateGroups        string
	bigFileBytes       int64
	bigS3Events        int64
	bigS3Runs          int
	bigS3MinPartitions int
	quick              bool
	executorKills      int
	s3Batches          int
	backlog            []int
	backlogMaxOffsets  int64
	backlogRuns        int
	modeTimeout        time.Duration
	set                map[string]bool // flags the command line set
	longRun            LongRunConfig
	sqlRows            int
	sqlRuns            int
}

func main() {
	var c config
	flag.IntVar(&c.rows, "n", 3_000_000, "events per run")
	flag.IntVar(&c.runs, "runs", 5, "rounds; each round runs the raw loop and both engine runs once (figures are medians)")
	flag.Int64Var(&c.maxRowsPerTrigger, "max-rows-per-trigger", 500_000, "generator maxRowsPerTrigger (the file source takes the same rows per batch)")
	flag.IntVar(&c.rowsPerFile, "rows-per-file", 100_000, "lines per file for the file source")
	flag.IntVar(&c.noDataBatches, "nodata-batches", 40, "no-data batches to time")
	flag.IntVar(&c.noDataCourses, "nodata-courses", 100, "events (one per course) per file in the no-data measurement")
	flag.DurationVar(&c.noDataInterval, "nodata-interval", 20*time.Millisecond, "processingTime trigger of the no-data measurement")
	flag.IntVar(&c.parallelism, "parallelism", 0, "engine task parallelism (0: GOMAXPROCS)")
	flag.StringVar(&c.dir, "dir", "", "work directory (default: a new temporary directory, removed at the end)")
	flag.StringVar(&c.only, "only", "", "comma-separated subset of raw,gen,file,process,nodata,groups,nodata-s3,recovery,executors,latency,kafka,scaling,partitions,bigfile,longrun,"+strings.Join(modeNames(), ",")+" (default all but nodata-s3, recovery, executors, latency, kafka, scaling and the last group, which run only when named or with -report; partitions only when named)")
	flag.BoolVar(&c.quick, "quick", false, "reduced sizes for every measurement whose size flags are not set (a whole -report in about 10 minutes on a loaded 2-core machine; the report lists the sizes)")
	flag.IntVar(&c.executorKills, "executor-kills", 20, "executor-recovery: executor SIGKILLs mid-batch (driver serve + 2 executors)")
	flag.IntVar(&c.s3Batches, "s3-batches", 10, "s3-requests: data batches of the tile on the S3-compatible server")
	backlog := flag.String("backlog", "1000000,10000000,100000000", "backlog: records behind on kfake, one `driver run` per size (a size whose broker would not fit in available memory is skipped and says so)")
	flag.Int64Var(&c.backlogMaxOffsets, "backlog-max-offsets", 200_000, "backlog: maxOffsetsPerTrigger of every backlog run")
	flag.IntVar(&c.backlogRuns, "backlog-runs", 1, "backlog: driver runs per size (the figure is their median)")
	flag.DurationVar(&c.modeTimeout, "mode-timeout", 3*time.Hour, "stop a measurement after this long and record it as failed (0: no limit)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&c.processProfile, "process-cpuprofile", "", "process: driver run writes a CPU profile of each round to this path with the source and round appended (PATH.file.1, PATH.gen.1, ...)")
	flag.BoolVar(&c.markdown, "markdown", false, "also print the results as a Markdown table for bench/README.md")
	flag.StringVar(&c.report, "report", "", "write DIR/report.md, DIR/report.json, PNG plots and CPU profiles of the run into this directory")
	flag.IntVar(&c.kafka.Rows, "kafka-n", 10_000_000, "kafka: catch-up backlog, records (0: no catch-up runs)")
	flag.Int64Var(&c.kafka.MaxOffsets, "kafka-max-offsets", 500_000, "kafka: maxOffsetsPerTrigger of the catch-up runs")
	flag.IntVar(&c.kafka.Runs, "kafka-runs", 5, "kafka: catch-up rounds (fair reference, bare loop and engine once each)")
	flag.IntVar(&c.kafka.ProcessRuns, "kafka-process-runs", -1, "kafka: rounds of the whole-process pair (driver run against the references as processes, the broker in this process); -1: as -kafka-runs, 0: none")
	var partitions int
	flag.IntVar(&partitions, "kafka-partitions", 8, "kafka: partitions per topic")
	flag.StringVar(&c.kafkaRSS, "kafka-rss", "1000000,10000000", "kafka: backlogs of the driver-run peak-RSS runs, comma-separated (empty: none)")
	flag.Int64Var(&c.kafka.RSSMaxOffsets, "kafka-rss-max-offsets", 200_000, "kafka: maxOffsetsPerTrigger of the peak-RSS runs")
	flag.IntVar(&c.kafka.RSSRuns, "kafka-rss-runs", 3, "kafka: rounds of peak-RSS runs (each round runs every backlog once)")
	flag.StringVar(&c.kafka.Driver, "kafka-driver", "", "kafka: prebuilt driver binary for the RSS runs (default: go build ./cmd/driver into the work directory)")
	flag.StringVar(&c.kafka.HeapProfile, "kafka-heap-profile", "", "kafka: run the engine in this process over the largest RSS backlog and write heap profiles into this directory")
	flag.IntVar(&c.kafka.HeapEvery, "kafka-heap-every", 10, "kafka: batches between heap profiles")
	flag.StringVar(&c.kafkaOptions, "kafka-options", "", "kafka: client options of the engine's source, k=v,k=v (the spec's kafka.* options without the prefix, e.g. max.partition.fetch.bytes=1048576)")
	scaleRows := flag.String("scale-n", "1000000,10000000,100000000", "scaling: events per run of the events series")
	scaleCourses := flag.String("scale-courses", "100,10000,1000000", "scaling: distinct courses of the courses series")
	scalePartitions := flag.String("scale-partitions", "1,8,64", "scaling: state partitions of the partitions series")
	flag.IntVar(&c.scale.Runs, "scale-runs", 3, "scaling: rounds per point")
	flag.IntVar(&c.kills, "kills", 20, "recovery: driver SIGKILLs (each on a fresh checkpoint, mid batch 1)")
	flag.DurationVar(&c.latencyFor, "latency-for", 30*time.Second, "latency: steady load per trigger (0 and 1s)")
	executors := flag.String("executors", "1,2,3", "executors: executor process counts to run against one driver run process")
	groupsCourses := flag.String("groups-courses", "10000,1000000,10000000", "bytes per open group: course counts (3 rows each, a minute of event time); each size's figure is its heap difference from a 100-course run over the difference of open groups")
	flag.IntVar(&c.partitions.Rows, "partitions-n", 2_000_000, "partitions: events per throughput topic (0: no throughput runs)")
	flag.StringVar(&c.partCounts, "partitions-counts", "8,64,512,1024", "partitions: partition counts of the throughput topics (the first is the base of the ratios)")
	flag.StringVar(&c.partExecutors, "partitions-executors", "0,2,16", "partitions: executors of the throughput runs (0: one process; n: n in-process executors over loopback gRPC)")
	flag.Int64Var(&c.partitions.MaxOffsets, "partitions-max-offsets", 500_000, "partitions: maxOffsetsPerTrigger of the throughput runs")
	flag.IntVar(&c.partitions.Runs, "partitions-runs", 1, "partitions: rounds of the throughput and batch runs (figures are medians)")
	flag.IntVar(&c.partitions.State, "partitions-state", 64, "partitions: state partitions (shufflePartitions) of the throughput and batch runs")
	flag.Int64Var(&c.partitions.BatchRows, "partitions-batch-rows", 20_000, "partitions: rows per batch of the batch figures (each topic holds ten batches; 0: none)")
	flag.StringVar(&c.partBatch, "partitions-batch-counts", "8,1024", "partitions: partition counts of the batch figures")
	flag.IntVar(&c.partitions.ScaleExecutors, "partitions-scale-executors", 64, "partitions: executor processes of the scale simulation (0: none)")
	flag.IntVar(&c.partitions.ScalePartitions, "partitions-scale-partitions", 1024, "partitions: topic partitions of the scale simulation")
	flag.IntVar(&c.partitions.ScaleLeave, "partitions-scale-leave", 16, "partitions: executors that leave at once (SIGTERM) half-way through the scale simulation")
	flag.IntVar(&c.partitions.ScaleRows, "partitions-scale-n", 400_000, "partitions: events of the scale simulation (batches of 20000)")
	flag.DurationVar(&c.partitions.ScaleIdle, "partitions-scale-idle", 10*time.Second, "partitions: how long the idle driver's CPU is measured with every executor heartbeating")
	flag.StringVar(&c.stateGroups, "state-groups", "10000,1000000,10000000", "state: groups in the one pebble partition, comma-separated runs (bytes per group on pebble at each; the largest is the 1 GiB RSS target)")
	flag.IntVar(&c.state.Batch, "state-batch", 250_000, "state: groups added per committed batch (a batch's changes are held in memory until it commits)")
	flag.StringVar(&c.state.MemLimit, "state-memlimit", "512MiB", "state: GOMEMLIMIT of each phase process")
	flag.IntVar(&c.state.ValueBytes, "state-value-bytes", 24, "state: bytes per group's aggregate")
	flag.BoolVar(&c.state.MemoryToo, "state-memory", true, "state: also load the checkpoint with the in-memory provider, for contrast")
	flag.Int64Var(&c.bigFileBytes, "bigfile-bytes", 2<<30, "bigfile (-only bigfile, or -report): size of the JSON-lines file driver run reads with bounded memory")
	flag.Int64Var(&c.bigS3Events, "bigfile-s3-events", 8_000_000, "bigfile-s3: generator events in the one JSON-lines object on the S3 test server (8 M: about 760 MB)")
	flag.IntVar(&c.bigS3Runs, "bigfile-s3-runs", 2, "bigfile-s3: rounds of driver run against driver serve + 2 executors")
	flag.IntVar(&c.bigS3MinPartitions, "bigfile-s3-min-partitions", 16, "bigfile-s3: source.file.minPartitions (byte ranges of the one object per batch)")
	flag.IntVar(&c.sqlRows, "sql-n", 2_000_000, "sql: events of the tile in SQL, in YAML and with a WHERE keeping 10 % (same files)")
	flag.IntVar(&c.sqlRuns, "sql-runs", 3, "sql: rounds (each runs the three variants once; figures are medians)")
	flag.IntVar(&c.longRun.Batches, "longrun-batches", 10_000, "longrun: micro-batches of the long run on the S3 test server (at least 200)")
	flag.IntVar(&c.longRun.SampleEvery, "longrun-sample", 100, "longrun: batches between samples of the checkpoint's object count and RSS")
	flag.IntVar(&c.longRun.Retain, "longrun-retain", 100, "longrun: minBatchesToRetain of the long run")
	flag.Int64Var(&c.longRun.Rows, "longrun-rows", 5, "longrun: generator rows per second, one second of event time each (batches run back to back: most take a row or two, and one that finds none after the watermark moved is a no-data batch)")
	breakdown := flag.String("breakdown", "", "print the CPU profiles' breakdowns by part side by side and exit: label=FILE[+FILE...],label=FILE (the files of one run are merged)")
	breakdownEvents := flag.Int64("breakdown-events", 0, "-breakdown: events the profiled runs processed")
	flag.Parse()
	if *breakdown != "" {
		t, err := breakdownTable(strings.Split(*breakdown, ","), *breakdownEvents)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluicebench:", err)
			os.Exit(1)
		}
		fmt.Print(t)
		return
	}
	c.set = setFlags()
	if c.quick {
		for name, v := range quickSizes {
			if !c.set[name] {
				if err := flag.Set(name, v); err != nil {
					panic(err) // a quickSizes entry names no flag
				}
			}
		}
	}
	var err error
	if c.partitions.Counts, err = int32List(c.partCounts); err == nil {
		c.partitions.BatchPartitions, err = int32List(c.partBatch)
	}
	if err == nil {
		var ex []int32
		ex, err = int32List(c.partExecutors)
		for _, e := range ex {
			c.partitions.Executors = append(c.partitions.Executors, int(e))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluicebench: -partitions-*:", err)
		os.Exit(2)
	}
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
	if c.kafka.ProcessRuns < 0 {
		c.kafka.ProcessRuns = c.kafka.Runs
	}
	for _, f := range []struct {
		name, v string
		dst     *[]int
	}{{"scale-n", *scaleRows, &c.scale.Rows}, {"scale-courses", *scaleCourses, &c.scale.Courses}, {"scale-partitions", *scalePartitions, &c.scale.Partitions}, {"groups-courses", *groupsCourses, &c.groupsCourses}, {"executors", *executors, &c.executors}, {"backlog", *backlog, &c.backlog}} {
		xs, err := parseInts(f.name, f.v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluicebench:", err)
			os.Exit(2)
		}
		*f.dst = xs
	}
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

// quickSizes are -quick's values of the size flags the command line did
// not set: the whole suite at reduced sizes (about 10 minutes for a
// -report on a loaded 2-core machine). The report's settings and each
// section say which sizes ran.
var quickSizes = map[string]string{
	"bigfile-bytes":        "268435456",
	"bigfile-s3-events":    "500000",
	"bigfile-s3-runs":      "1",
	"longrun-batches":      "1000",
	"n":                    "300000",
	"runs":                 "2",
	"max-rows-per-trigger": "100000",
	"rows-per-file":        "50000",
	"nodata-batches":       "12",
	"kafka-n":              "500000",
	"kafka-runs":           "2",
	"kafka-rss":            "",
	"scale-n":              "200000,1000000",
	"scale-courses":        "100,10000,100000",
	"scale-partitions":     "1,8",
	"scale-runs":           "1",
	"kills":                "8",
	"executor-kills":       "8",
	"latency-for":          "10s",
	"executors":            "1,2",
	"groups-courses":       "10000,200000",
	"state-groups":         "10000,200000",
	"state-batch":          "100000",
	"s3-batches":           "5",
	"backlog":              "100000,1000000",
	"mode-timeout":         "8m",
	"sql-n":                "300000",
	"sql-runs":             "2",
}

// Results are the medians of a whole invocation.
type Results struct {
	Rows                     int
	Runs                     int
	RawEPS, GenEPS, FileEPS  []float64 // events/s per round
	GenPair, FilePair        *Pair     // engine against the fair reference, per round
	ProcessPair              *Pair     // `driver run` against the reference, each as a whole process, file source
	ProcessGenPair           *Pair     // the same with the generator
	RawCPU, GenCPU, FileCPU  []float64 // CPU ns per event per round
	ParEPS, ParSpeedup       []float64 // raw loop on GOMAXPROCS goroutines; its speedup over one
	Load                     []string  // /proc/loadavg at start and end
	GenCores, FileCores      []float64 // CPU time / wall time of the engine runs
	PutMs                    []float64 // fsynced 1 KiB Put on local disk
	Gen, File                []*EngineRun
	NoData                   *NoDataRun
	RawWindows, EngineGroups int
	Kafka                    *KafkaResults
	Scaling                  []ScaleSeries
	Groups                   *GroupsResult
	NoDataS3                 []NoDataS3
	NoDataS3Top              string // top of the benchmark's CPU profile (with -report)
	ScalingTop               string // the courses series' most-minus-fewest CPU profile, when its target is missed (with -report)
	Recovery                 *RecoveryResult
	Executors                []*ExecutorsResult
	Latency                  []*LatencyResult
	BigFile                  *BigFileResult
	// Sections are the measurements of the modes list (section.go).
	Sections []*Section
	// Failures are the measurements that failed; the rest ran on.
	Failures []Failure
	LongRun  *LongRunResult
}

func run(ctx context.Context, c config, out io.Writer) error {
	want := map[string]bool{}
	for _, s := range strings.Split(c.only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	all := len(want) == 0
	known := map[string]bool{"raw": true, "gen": true, "file": true, "process": true, "nodata": true, "groups": true, "nodata-s3": true, "recovery": true, "executors": true, "latency": true, "kafka": true, "scaling": true, "partitions": true, "bigfile": true, "longrun": true}
	for _, m := range modes {
		known[m.Name] = true
	}
	for w := range want {
		if !known[w] {
			return fmt.Errorf("-only: unknown measurement %q", w)
		}
	}
	// kafka preloads a broker with millions of records: only when named.
	// A -report runs it too: the report is the whole suite (but for the
	// partitions scale simulation, run on its own).
	heavy := map[string]bool{"longrun": true, "kafka": true, "scaling": true, "nodata-s3": true, "recovery": true, "executors": true, "latency": true}
	for _, m := range modes {
		heavy[m.Name] = true
	}
	do := func(s string) bool {
		for _, m := range modes {
			if m.Name == s && m.notInReport {
				return want[s]
			}
		}
		return (all && s != "partitions" && (!heavy[s] || c.report != "")) || want[s]
	}

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

	var load *loadSampler
	machine := describeMachine()
	if c.report != "" {
		if err := os.MkdirAll(c.report, 0o755); err != nil {
			return fmt.Errorf("create report directory: %w", err)
		}
		load = startLoadSampler()
		machine.Start = time.Now()
	}
	res := &Results{Rows: c.rows, Runs: c.runs, Load: []string{loadAvg()}}
	// A measurement that fails is recorded (and in the report) and the
	// rest run on.
	step := func(name string, fn func(context.Context) error) {
		if !do(name) {
			return
		}
		mctx, cancel := context.WithCancel(ctx)
		if c.modeTimeout > 0 {
			mctx, cancel = context.WithTimeout(ctx, c.modeTimeout)
		}
		defer cancel()
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				}
			}()
			return fn(mctx)
		}()
		if err != nil {
			if mctx.Err() == context.DeadlineExceeded {
				err = fmt.Errorf("%w (stopped by -mode-timeout %v)", err, c.modeTimeout)
			}
			res.Failures = append(res.Failures, Failure{Mode: name, Err: err.Error()})
			fmt.Fprintf(out, "sluicebench: %s failed: %v\n", name, err)
		}
	}
	driverBin := func(ctx context.Context) (string, error) {
		if c.kafka.Driver == "" {
			d, err := buildDriver(ctx, dir)
			if err != nil {
				return "", err
			}
			c.kafka.Driver = d // built once
		}
		return c.kafka.Driver, nil
	}
	executorBin := "" // built once
	executorOnce := func(ctx context.Context) (string, error) {
		if executorBin == "" {
			e, err := buildExecutor(ctx, dir)
			if err != nil {
				return "", err
			}
			executorBin = e
		}
		return executorBin, nil
	}
	step("partitions", func(ctx context.Context) error {
		c.partitions.Dir = filepath.Join(dir, "partitions")
		return runPartitions(ctx, c.partitions, out)
	})
	if want["partitions"] && len(want) == 1 {
		return joinFailures(res.Failures)
	}
	fmt.Fprintf(out, "sluicebench: %d events, %d rounds, maxRowsPerTrigger %d, GOMAXPROCS %d, %s, %s\n",
		c.rows, c.runs, c.maxRowsPerTrigger, runtime.GOMAXPROCS(0), runtime.Version(), time.Now().UTC().Format(time.RFC3339))
	gopts := generatorOptions(int64(c.rows), c.maxRowsPerTrigger)

	var lines *Lines
	srcDir := filepath.Join(dir, "lines")
	filesOK := false
	if do("raw") || do("file") {
		t := time.Now()
		lines = generateLines(gopts, c.rows)
		fmt.Fprintf(out, "generated %d lines (%.1f bytes/line) in %v\n", lines.Len(), float64(len(lines.Data))/float64(lines.Len()), time.Since(t).Round(time.Millisecond))
	}
	step("file", func(ctx context.Context) error {
		n, err := writeFiles(srcDir, lines, c.rowsPerFile)
		if err != nil {
			return err
		}
		filesOK = true
		fmt.Fprintf(out, "wrote %d files of %d lines to %s\n", n, c.rowsPerFile, srcDir)
		return nil
	})
	if do("raw") || do("gen") || (do("file") && filesOK) {
		if err := runRounds(ctx, c, res, lines, srcDir, dir, func(s string) bool { return do(s) && (s != "file" || filesOK) }, out); err != nil {
			res.Failures = append(res.Failures, Failure{Mode: "raw,gen,file", Err: err.Error()})
			fmt.Fprintf(out, "sluicebench: the in-process rounds failed: %v\n", err)
		}
	}
	step("nodata", func(ctx context.Context) error {
		var nd *NoDataRun
		measure := func() error {
			var err error
			nd, err = runNoData(ctx, filepath.Join(dir, "nodata"), c.noDataBatches, c.noDataCourses, c.noDataInterval, c.parallelism)
			return err
		}
		var top string
		var err error
		if c.report != "" && c.cpuProfile == "" {
			top, err = profileTop(filepath.Join(c.report, "nodata.pprof"), measure)
		} else {
			err = measure()
		}
		if err != nil {
			return err
		}
		nd.ProfileTop = top
		res.NoData = nd
		res.PutMs, err = putLatency(ctx, filepath.Join(dir, "put-latency"), 50)
		return err
	})
	step("process", func(ctx context.Context) error {
		driver, err := driverBin(ctx)
		if err != nil {
			return err
		}
		prs, err := runProcessPairs(ctx, c, driver, dir, out)
		if err != nil {
			return err
		}
		res.ProcessPair, res.ProcessGenPair = prs[0], prs[1]
		return nil
	})
	step("executors", func(ctx context.Context) error {
		driver, err := driverBin(ctx)
		if err != nil {
			return err
		}
		executor, err := executorOnce(ctx)
		if err != nil {
			return err
		}
		res.Executors, err = runExecutors(ctx, c, driver, executor, dir, c.executors, out)
		return err
	})
	step("latency", func(ctx context.Context) error {
		// processingTime 0 and 1 s as Spark times batches, then 1 s with
		// the no-data batch at once (trigger.noDataBatchesAtOnce).
		for _, r := range []struct {
			trigger time.Duration
			atOnce  bool
		}{{0, false}, {time.Second, false}, {time.Second, true}} {
			lr, err := runLatency(ctx, r.trigger, r.atOnce, c.latencyFor, dir, out)
			if err != nil {
				return err
			}
			res.Latency = append(res.Latency, lr)
		}
		return nil
	})
	step("recovery", func(ctx context.Context) error {
		driver, err := driverBin(ctx)
		if err != nil {
			return err
		}
		res.Recovery, err = runRecovery(ctx, c, driver, dir, c.kills, out)
		return err
	})
	step("nodata-s3", func(ctx context.Context) error {
		var err error
		profile := ""
		if c.report != "" {
			profile = filepath.Join(c.report, "nodata-s3.pprof")
		}
		res.NoDataS3, res.NoDataS3Top, err = runNoDataS3(ctx, c.noDataBatches, profile, out)
		return err
	})
	step("groups", func(ctx context.Context) error {
		var err error
		profile := ""
		if c.report != "" {
			profile = filepath.Join(c.report, "groups-heap.pprof")
		}
		res.Groups, err = runGroups(ctx, c.groupsCourses, c.parallelism, dir, profile, out)
		return err
	})
	step("scaling", func(ctx context.Context) error {
		var err error
		res.Scaling, err = runScaling(ctx, c, c.scale, dir, out)
		if f, _ := flatness(res.Scaling, "courses"); err == nil && c.report != "" && c.cpuProfile == "" && f > 0 && (f < 0.85 || f > 1.15) {
			// The flatness target is missed: profile its two ends.
			res.ScalingTop, err = profileCourses(ctx, c, slices.Min(c.scale.Courses), slices.Max(c.scale.Courses), dir, c.report)
		}
		return err
	})
	step("kafka", func(ctx context.Context) error {
		c.kafka.Parallelism = c.parallelism
		c.kafka.ProcessProfile = c.processProfile
		if c.report != "" && c.cpuProfile == "" {
			c.kafka.ProfileDir = c.report
		}
		if do("backlog") && !c.set["kafka-rss"] {
			// The backlog measurement is the RSS runs, at its own sizes.
			c.kafka.RSSRows = nil
		}
		var err error
		res.Kafka, err = runKafka(ctx, c.kafka, dir, out)
		return err
	})
	env := &ModeEnv{Config: &c, Dir: dir, Out: out, Quick: c.quick, Set: func(f string) bool { return c.set[f] }, Driver: driverBin, Executor: executorOnce}
	for _, m := range modes {
		step(m.Name, func(ctx context.Context) error {
			fmt.Fprintf(out, "\n%s:\n", m.Name)
			s, err := m.Run(ctx, env)
			if s != nil {
				s.Mode = m.Name
				res.Sections = append(res.Sections, s)
			}
			return err
		})
	}
	if want["bigfile"] || (all && c.report != "") {
		driver := c.kafka.Driver
		if driver == "" {
			var err error
			if driver, err = buildDriver(ctx, dir); err != nil {
				return err
			}
			c.kafka.Driver = driver
		}
		bf, err := runBigFile(ctx, c, driver, dir, out)
		if err != nil {
			if c.report == "" {
				return fmt.Errorf("big file: %w", err)
			}
			res.Failures = append(res.Failures, Failure{Mode: "bigfile", Err: err.Error()})
		}
		res.BigFile = bf
	}
	step("longrun", func(ctx context.Context) error {
		var err error
		res.LongRun, err = runLongRun(ctx, c.longRun, dir, out)
		return err
	})
	var engineTop, refTop string
	if c.report != "" && do("file") && filesOK {
		var err error
		if engineTop, refTop, err = profiles(ctx, c, srcDir, dir, c.report); err != nil {
			res.Failures = append(res.Failures, Failure{Mode: "profiles", Err: err.Error()})
		} else if res.FilePair != nil {
			res.FilePair.Cost = compareCosts(filepath.Join(c.report, "engine-file.pprof"), filepath.Join(c.report, "reference-file.pprof"), int64(c.rows))
		}
	}
	res.Load = append(res.Load, loadAvg())
	if c.report != "" {
		machine.End = time.Now()
		machine.Load = load.finish()
		rep := &Report{Machine: machine, Results: res, Targets: targets(res), Table: tableLines(res, c), Config: map[string]string{
			"n": strconv.Itoa(c.rows), "runs": strconv.Itoa(c.runs), "max-rows-per-trigger": strconv.FormatInt(c.maxRowsPerTrigger, 10),
			"rows-per-file": strconv.Itoa(c.rowsPerFile), "parallelism": strconv.Itoa(c.parallelism), "only": c.only, "quick": strconv.FormatBool(c.quick),
		}}
		if err := writeReport(c.report, rep, engineTop, refTop); err != nil {
			return err
		}
		fmt.Fprintf(out, "report written to %s\n", filepath.Join(c.report, "report.md"))
	}
	fmt.Fprintln(out)
	printTable(out, res, c)
	if c.markdown {
		fmt.Fprintln(out)
		printMarkdown(out, res, c)
	}
	return joinFailures(res.Failures)
}

// joinFailures is the error of an invocation in which measurements failed.
func joinFailures(fs []Failure) error {
	if len(fs) == 0 {
		return nil
	}
	var names []string
	for _, f := range fs {
		names = append(names, f.Mode)
	}
	return fmt.Errorf("%d measurement(s) failed: %s (each one's error is printed above and in the report)", len(fs), strings.Join(names, ", "))
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
	phases                    map[string][]float64 // durationMs by phase
}

func collect(batches []Batch, noData bool) batchStats {
	var s batchStats
	for _, b := range batches {
		if b.Progress.NoData != noData {
			continue
		}
		s.count++
		s.trigger = append(s.trigger, float64(b.Progress.DurationMs["triggerExecution"]))
		if s.phases == nil {
			s.phases = map[string][]float64{}
		}
		for k, v := range b.Progress.DurationMs {
			s.phases[k] = append(s.phases[k], float64(v))
		}
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
		add("decode only, lines in memory, 1 goroutine, M events/s", rangeOf(millions(res.RawEPS), "%.2f"), "")
		add(fmt.Sprintf("decode only, lines in memory, %d goroutines, M events/s", p), rangeOf(millions(res.ParEPS), "%.2f"), "")
		add(fmt.Sprintf("  speedup of %d goroutines over 1 (cores the machine gave)", p), rangeOf(res.ParSpeedup, "%.2f"), "")
	}
	for _, pr := range res.pairs() {
		ls = append(ls, pairLines(pr)...)
	}
	if len(res.GenCores) > 0 || len(res.FileCores) > 0 {
		add("engine in process, cores used (CPU/wall), generator / file", rangeOf(res.GenCores, "%.2f")+" / "+rangeOf(res.FileCores, "%.2f"), "")
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
		for _, k := range []string{"addBatch", "map", "reduce", "commitOffsets"} {
			add("  no-data batch phase "+k+" ms (progress durationMs, whole ms)", rangeOf(n.phases[k], "%.0f"), "")
		}
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
	ls = append(ls, scalingLines(res.Scaling)...)
	ls = append(ls, longRunLines(res.LongRun)...)
	for _, r := range res.NoDataS3 {
		closing := "– (none in so few iterations)"
		if r.Closing > 0 {
			closing = fmt.Sprintf("%.1f", r.Closing)
		}
		add("no-data batch (go test ./driver/microbatch -bench NoDataBatch), "+r.Where+", ms, closing nothing / closing a window", fmt.Sprintf("%.1f / %s", r.Quiet, closing), "")
	}
	for _, l := range res.Latency {
		add(fmt.Sprintf("latency beyond the semantic delay, kfake, %s, ms: median / p99 / max (%d windows)", l.name(), len(l.Ms)),
			fmt.Sprintf("%.0f / %.0f / %.0f", median(l.Ms), quantile(l.Ms, 0.99), l.Ms[len(l.Ms)-1]), fmt.Sprintf("p99 ≤ %v", l.Trigger+250*time.Millisecond))
	}
	for _, e := range res.Executors {
		add(fmt.Sprintf("driver serve + %d executor processes / one driver run process, throughput (start to exit)", e.Executors), rangeOf(e.Ratio, "%.2f")+" ("+rangeOf(millions(e.EPS), "%.2f")+" vs "+rangeOf(millions(e.OneEPS), "%.2f")+" M events/s)", "")
	}
	if r := res.Recovery; r != nil {
		add(fmt.Sprintf("recovery, new driver → first commit after a SIGKILL mid-batch, ms (%d kills)", r.Kills), rangeOf(r.StartToCommit, "%.0f"), "≤ 2000 max")
		add("recovery, kill → first commit, ms", rangeOf(r.KillToCommit, "%.0f"), "")
	}
	ls = append(ls, bigFileLines(res.BigFile)...)
	if g := res.Groups; g != nil {
		add(fmt.Sprintf("live heap after the run, baseline %d courses: %d open groups, MiB", g.Base.Courses, g.Base.OpenGroups), fmt.Sprintf("%.1f", float64(g.Base.HeapBytes)/(1<<20)), "")
		for _, r := range g.Runs {
			add(fmt.Sprintf("live heap after the run, %d courses: %d open groups, MiB; bytes per open group over the baseline", r.Courses, r.OpenGroups), fmt.Sprintf("%.1f; %.0f", float64(r.HeapBytes)/(1<<20), r.BytesPerGroup), "≤ 200")
		}
	}
	for _, s := range res.Sections {
		for _, r := range s.Rows {
			add(r.Name, r.Value, r.Target)
		}
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

// int32List parses "8,64,512" (empty: none).
func int32List(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, int32(n))
	}
	return out, nil
}
