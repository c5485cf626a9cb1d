package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// The whole-process measurement: `driver run -f` as the user runs it, a
// process from start to exit (start-up, every batch, the final commit,
// shut-down), against the fair reference over the same files as a
// process too (this program re-executed with refProcessEnv). Both are
// started through the launcher (see launch), which reports each one's own
// peak RSS and CPU time.

// refProcessEnv, set to a directory, makes this program the reference as a
// process: it counts the directory's files with refFiles, prints "rows N
// windows W" and exits.
const refProcessEnv = "SLUICEBENCH_REFERENCE_FILES"

// processCourses is the whole-process run's distinct courses.
const processCourses = 1000

// refGeneratorEnv, set to the generator's options as JSON, makes this
// program the generator's reference as a process.
const refGeneratorEnv = "SLUICEBENCH_REFERENCE_GENERATOR"

// refKafkaEnv, set to a kafkaRefJob as JSON, makes this program the
// Kafka reference as a process (the broker is the bench's).
const refKafkaEnv = "SLUICEBENCH_REFERENCE_KAFKA"

// refBareEnv, set to 1 with one of the above, makes the reference process
// the bare loop (bare.go) instead of the fair reference.
const refBareEnv = "SLUICEBENCH_REFERENCE_BARE"

// refProfileEnv, set to a file, makes the reference process write a CPU
// profile of its run there.
const refProfileEnv = "SLUICEBENCH_REFERENCE_CPUPROFILE"

// kafkaRefJob is what a Kafka reference process reads.
type kafkaRefJob struct {
	Addr, Topic string
	Ends        map[int32]int64
}

func init() {
	dir, gen, kjob := os.Getenv(refProcessEnv), os.Getenv(refGeneratorEnv), os.Getenv(refKafkaEnv)
	if (dir == "" && gen == "" && kjob == "") || os.Getenv(rssLaunchEnv) == "1" {
		return
	}
	kind := fairRef
	if os.Getenv(refBareEnv) == "1" {
		kind = bareRef
	}
	var res *RawResult
	var n int64
	var err error
	if file := os.Getenv(refProfileEnv); file != "" {
		f, perr := os.Create(file)
		if perr == nil {
			perr = pprof.StartCPUProfile(f)
		}
		if perr != nil {
			fmt.Fprintln(os.Stderr, "reference: cpu profile:", perr)
			os.Exit(1)
		}
		defer f.Close()
	}
	switch {
	case gen != "":
		var opts query.GeneratorSource
		if err = json.Unmarshal([]byte(gen), &opts); err == nil {
			res, err = refGenerator(kind, opts, int(opts.Rows), refParallelism())
			n = opts.Rows
		}
	case kjob != "":
		var job kafkaRefJob
		if err = json.Unmarshal([]byte(kjob), &job); err == nil {
			res, n, err = refKafka(context.Background(), kind, job.Addr, job.Topic, job.Ends, refParallelism())
		}
	default:
		res, n, err = refFiles(kind, dir, refParallelism())
	}
	pprof.StopCPUProfile() // writes the profile, if one was started
	if err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		os.Exit(1)
	}
	fmt.Printf("rows %d windows %d\n", n, len(res.Counts))
	os.Exit(0)
}

// ProcRun is one child process started through the launcher.
type ProcRun struct {
	Elapsed   time.Duration // launcher start to exit
	CPU       time.Duration // the child's user + system time
	MaxRSSKiB int64
	Stdout    string // the child's stdout and stderr (the launcher merges them)
}

// launchProcess runs args through the launcher with extra environment.
func launchProcess(ctx context.Context, env []string, args ...string) (*ProcRun, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to use as the launcher: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(append(os.Environ(), env...), rssLaunchEnv+"=1")
	var child strings.Builder
	cmd.Stderr = &child
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	pr := &ProcRun{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "maxrss "); ok {
			pr.MaxRSSKiB, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "cpu "); ok {
			ns, _ := strconv.ParseInt(v, 10, 64)
			pr.CPU = time.Duration(ns)
		}
	}
	err = cmd.Wait()
	pr.Elapsed = time.Since(start)
	pr.Stdout = child.String()
	if err != nil {
		return nil, fmt.Errorf("%s: %v; output tail:\n%s", strings.Join(args, " "), err, tail(pr.Stdout, 2000))
	}
	return pr, nil
}

// runProcessPairs runs the whole-process pairs: the file source over n
// events of processCourses courses written as files (untimed), and the
// generator making the same events.
func runProcessPairs(ctx context.Context, c config, driver, dir string, out io.Writer) ([]*Pair, error) {
	opts := generatorOptions(int64(c.rows), c.maxRowsPerTrigger)
	opts.Courses = processCourses
	src := filepath.Join(dir, "process-lines")
	if _, err := writeFiles(src, generateLines(opts, c.rows), c.rowsPerFile); err != nil {
		return nil, err
	}
	defer os.RemoveAll(src)
	filesPerTrigger := max(int(c.maxRowsPerTrigger)/c.rowsPerFile, 1)
	file, err := runProcessPair(ctx, c, driver, dir, processJob{
		name: fmt.Sprintf("file source, whole process (%d courses)", processCourses), tag: "file", rows: c.rows, runs: c.runs,
		src:    query.Source{File: &query.FileSource{Path: src, MaxFilesPerTrigger: filesPerTrigger}, Schema: query.GeneratorSchema()},
		refEnv: refProcessEnv + "=" + src,
	}, out)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	gen, err := runProcessPair(ctx, c, driver, dir, processJob{
		name: fmt.Sprintf("generator, whole process (%d courses)", processCourses), tag: "gen", rows: c.rows, runs: c.runs,
		src: query.Source{Generator: &opts}, refEnv: refGeneratorEnv + "=" + string(b),
	}, out)
	if err != nil {
		return nil, err
	}
	return []*Pair{file, gen}, nil
}

// processJob is one whole-process pair: `driver run` over src against
// the references as processes (this program with refEnv, and with
// refBareEnv for the bare loop), rows events, runs rounds.
type processJob struct {
	name, tag  string
	src        query.Source
	refEnv     string
	rows, runs int
}

// runProcessPair runs, job.runs rounds alternating the order, `driver
// run` over job.src, the fair reference process and the bare loop
// process. With -process-cpuprofile, driver run profiles itself
// (--cpuprofile) into PATH.<tag>.<round>.
func runProcessPair(ctx context.Context, c config, driver, dir string, job processJob, out io.Writer) (*Pair, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to run as the reference: %w", err)
	}
	name := job.name
	pair := &Pair{Name: name}
	// With -report, the first round of each side is profiled (every
	// side, so the round's ratios stay fair) into the report directory.
	var engProfile, refProfile, bareProfile string
	if c.report != "" && c.processProfile == "" {
		engProfile = filepath.Join(c.report, "process-engine-"+job.tag+".pprof")
		refProfile = filepath.Join(c.report, "process-reference-"+job.tag+".pprof")
		bareProfile = filepath.Join(c.report, "process-bare-"+job.tag+".pprof")
	}
	refSide := func(envs []string, what string, dst **ProcRun, windows *int) func() error {
		return func() error {
			var err error
			if *dst, err = launchProcess(ctx, envs, self); err != nil {
				return fmt.Errorf("%s process: %w", what, err)
			}
			var rows int
			if _, err := fmt.Sscanf(lastLine((*dst).Stdout, "rows "), "rows %d windows %d", &rows, windows); err != nil || rows != job.rows {
				return fmt.Errorf("%s process: counted %d rows (%v), want %d; output: %s", what, rows, err, job.rows, tail((*dst).Stdout, 500))
			}
			return nil
		}
	}
	for r := range job.runs {
		runDir := filepath.Join(dir, fmt.Sprintf("process-%d", r))
		refEnvs := []string{job.refEnv}
		bareEnvs := []string{job.refEnv, refBareEnv + "=1"}
		if refProfile != "" && r == 0 {
			refEnvs = append(refEnvs, refProfileEnv+"="+refProfile)
			bareEnvs = append(bareEnvs, refProfileEnv+"="+bareProfile)
		}
		var ref, bare, eng *ProcRun
		var refWindows, bareWindows int
		var engRows, engWindows int64
		err := inTurn(r, refSide(refEnvs, "reference", &ref, &refWindows), refSide(bareEnvs, "bare loop", &bare, &bareWindows), func() error {
			defer os.RemoveAll(runDir)
			spec := tileSpec(job.src, runDir, query.Trigger{AvailableNow: true})
			if err := os.MkdirAll(runDir, 0o755); err != nil {
				return err
			}
			b, err := json.MarshalIndent(spec, "", "  ")
			if err != nil {
				return fmt.Errorf("encode spec: %w", err)
			}
			specFile, progress := filepath.Join(runDir, "query.json"), filepath.Join(runDir, "progress.jsonl")
			if err := os.WriteFile(specFile, b, 0o644); err != nil {
				return fmt.Errorf("write spec: %w", err)
			}
			args := []string{"run", "-f", specFile, "--progress-json", progress}
			if c.processProfile != "" {
				args = append(args, "--cpuprofile", fmt.Sprintf("%s.%s.%d", c.processProfile, job.tag, r+1))
			} else if engProfile != "" && r == 0 {
				args = append(args, "--cpuprofile", engProfile)
			}
			if eng, err = launchProcess(ctx, nil, append([]string{driver}, args...)...); err != nil {
				return fmt.Errorf("driver run: %w", err)
			}
			engRows, engWindows, err = progressTotals(progress)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if engRows != int64(job.rows) || engWindows != int64(refWindows) || bareWindows != refWindows {
			return nil, fmt.Errorf("%s: driver run read %d rows and has %d windows (emitted + open); the reference %d rows, %d windows; the bare loop %d windows", name, engRows, engWindows, job.rows, refWindows, bareWindows)
		}
		rows := job.rows
		pair.add(eps(rows, ref.Elapsed), eps(rows, eng.Elapsed), nsPer(rows, ref.CPU), nsPer(rows, eng.CPU))
		pair.addBare(eps(rows, bare.Elapsed), nsPer(rows, bare.CPU))
		pair.RefRSS = append(pair.RefRSS, float64(ref.MaxRSSKiB)/1024)
		pair.EngRSS = append(pair.EngRSS, float64(eng.MaxRSSKiB)/1024)
		pair.BareRSS = append(pair.BareRSS, float64(bare.MaxRSSKiB)/1024)
		fmt.Fprintf(out, "round %d %s: reference %.3f s %.0f MiB | bare loop %.3f s %.0f MiB | driver run %.3f s %.0f MiB\n", r+1, name,
			ref.Elapsed.Seconds(), float64(ref.MaxRSSKiB)/1024, bare.Elapsed.Seconds(), float64(bare.MaxRSSKiB)/1024, eng.Elapsed.Seconds(), float64(eng.MaxRSSKiB)/1024)
		printPairRound(out, r, pair, nil)
	}
	if engProfile != "" {
		pair.Cost = compareCosts(engProfile, refProfile, int64(job.rows))
		pair.BareCost = compareCostFiles([]string{engProfile}, []string{bareProfile}, int64(job.rows), [2]string{"the engine", "the bare loop"})
	}
	return pair, nil
}

// progressTotals sums a --progress-json file's input rows and returns the
// emitted rows plus the last batch's open state rows (the windows).
func progressTotals(file string) (rows, windows int64, err error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, fmt.Errorf("read progress: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var open int64
	for sc.Scan() {
		var p progress.Report
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return 0, 0, fmt.Errorf("decode progress: %w", err)
		}
		rows += p.NumInputRows
		windows += p.Sink.NumOutputRows
		for _, op := range p.StateOperators {
			open = op.NumRowsTotal
		}
	}
	return rows, windows + open, sc.Err()
}

// lastLine returns the last line of s that starts with prefix.
func lastLine(s, prefix string) string {
	ls := strings.Split(s, "\n")
	for i := len(ls) - 1; i >= 0; i-- {
		if strings.HasPrefix(ls[i], prefix) {
			return ls[i]
		}
	}
	return ""
}
