package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/query"
)

// Executors (-only executors, in -report): the same files as the
// whole-process pair, `driver run` (one process) against `driver serve
// --exit-when-done --min-executors N` with N `executor` processes on this
// machine, each timed from the first process's start to the driver's
// exit, rounds alternating the order. The figure is the cluster's
// throughput over the one process's of the same round.

// ExecutorsResult is one executor count's rounds.
type ExecutorsResult struct {
	Executors int
	OneEPS    []float64
	EPS       []float64
	Ratio     []float64 // cluster / one process
	// RunEnded is the driver's "query run ended" log line of each round
	// (batches, shuffle bytes and records, map retries, seconds).
	RunEnded []string `json:",omitempty"`
	// Cost compares the first round's profiles (with -report): the
	// cluster's processes (driver serve and every executor, merged)
	// against the one driver run process.
	Cost *CostCompare `json:",omitempty"`
}

var driverAddrInLog = regexp.MustCompile(`msg="driver listening" address=(\S+)`)

// buildExecutor builds cmd/executor into dir.
func buildExecutor(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "executor")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/executor")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the executor: %w", err)
	}
	return bin, nil
}

// runCluster runs spec on `driver serve` with n executors and returns the
// time from the driver's start to its exit. A non-empty profile makes
// each process write a CPU profile: PROFILE.driver, PROFILE.executor-I.
func runCluster(ctx context.Context, driver, executor, specFile, runDir string, n int, want int64, profile string, env ...string) (time.Duration, string, error) {
	var ended string
	d, err := runClusterLog(ctx, driver, executor, specFile, runDir, n, want, profile, env, func(dlog string) {
		for _, l := range strings.Split(dlog, "\n") {
			if strings.Contains(l, `msg="query run ended"`) {
				ended = l
			}
		}
	})
	return d, ended, err
}

// env is added to every process's environment (the S3 test server's
// settings, for instance).
func runClusterLog(ctx context.Context, driver, executor, specFile, runDir string, n int, want int64, profile string, env []string, onExit func(driverLog string)) (time.Duration, error) {
	token := filepath.Join(runDir, "token")
	if err := os.WriteFile(token, []byte("sluicebench-cluster-token\n"), 0o600); err != nil {
		return 0, err
	}
	var dlog syncbuf.Buffer
	start := time.Now()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--token-file", token, "--min-executors", fmt.Sprint(n),
		"--exit-when-done", "--query", specFile, "--progress-json", filepath.Join(runDir, "progress.jsonl"),
		// Its own registry: the default (./sluice-registry) would be shared
		// by every run (a run would resume the last one's record).
		"--registry", filepath.Join(runDir, "registry")}
	if profile != "" {
		args = append(args, "--cpuprofile", profile+".driver")
	}
	drv := exec.CommandContext(ctx, driver, args...)
	drv.Stdout, drv.Stderr = &dlog, &dlog
	if len(env) > 0 {
		drv.Env = append(os.Environ(), env...)
	}
	if err := drv.Start(); err != nil {
		return 0, fmt.Errorf("start driver serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- drv.Wait() }()
	var execs []*exec.Cmd
	defer func() {
		for _, e := range execs {
			if profile != "" {
				// A drained executor writes its profile on the way out.
				e.Process.Signal(syscall.SIGTERM)
			} else {
				e.Process.Kill()
			}
			e.Wait()
		}
	}()
	var addr string
	deadline := time.Now().Add(time.Minute)
	for addr == "" {
		if m := driverAddrInLog.FindStringSubmatch(dlog.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("driver serve exited before listening: %v\n%s", err, tail(dlog.String(), 1500))
		case <-time.After(recoveryPoll):
		}
		if time.Now().After(deadline) {
			drv.Process.Kill()
			<-exited
			return 0, fmt.Errorf("driver serve did not log its address within a minute:\n%s", tail(dlog.String(), 1500))
		}
	}
	elog := &syncbuf.Buffer{}
	for i := range n {
		eargs := []string{"--driver", addr, "--token-file", token, "--data-dir", filepath.Join(runDir, fmt.Sprintf("executor-%d", i))}
		if profile != "" {
			eargs = append(eargs, "--cpuprofile", fmt.Sprintf("%s.executor-%d", profile, i))
		}
		e := exec.CommandContext(ctx, executor, eargs...)
		e.Stdout, e.Stderr = elog, elog
		if len(env) > 0 {
			e.Env = append(os.Environ(), env...)
		}
		if err := e.Start(); err != nil {
			drv.Process.Kill()
			<-exited
			return 0, fmt.Errorf("start executor: %w", err)
		}
		execs = append(execs, e)
	}
	select {
	case err := <-exited:
		if err != nil {
			return 0, fmt.Errorf("driver serve: %v\n%s\nexecutors:\n%s", err, tail(dlog.String(), 1500), tail(elog.String(), 1000))
		}
	case <-time.After(30 * time.Minute):
		drv.Process.Kill()
		<-exited
		return 0, fmt.Errorf("driver serve did not exit within 30 minutes")
	}
	elapsed := time.Since(start)
	onExit(dlog.String())
	if rows, _, err := progressTotals(filepath.Join(runDir, "progress.jsonl")); err != nil || rows != want {
		return 0, fmt.Errorf("driver serve read %d rows (%v), want %d\n%s", rows, err, want, tail(dlog.String(), 1500))
	}
	return elapsed, nil
}

func runExecutors(ctx context.Context, c config, driver, executor, dir string, counts []int, out io.Writer) ([]*ExecutorsResult, error) {
	opts := generatorOptions(int64(c.rows), 0)
	opts.Courses = processCourses
	src := filepath.Join(dir, "executors-lines")
	if _, err := writeFiles(src, generateLines(opts, c.rows), c.rowsPerFile); err != nil {
		return nil, err
	}
	defer os.RemoveAll(src)
	filesPerTrigger := max(int(c.maxRowsPerTrigger)/c.rowsPerFile, 1)
	writeSpec := func(runDir string) (string, error) {
		spec := tileSpec(query.Source{File: &query.FileSource{Path: src, MaxFilesPerTrigger: filesPerTrigger}, Schema: query.GeneratorSchema()}, runDir, query.Trigger{AvailableNow: true})
		b, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return "", err
		}
		f := filepath.Join(runDir, "query.json")
		return f, os.WriteFile(f, b, 0o644)
	}
	var all []*ExecutorsResult
	for _, n := range counts {
		res := &ExecutorsResult{Executors: n}
		// With -report, the first round of the 2-executor runs (the
		// target's) is profiled on both sides.
		profile := func(r int) string {
			if c.report == "" || c.cpuProfile != "" || n != 2 || r != 0 {
				return ""
			}
			return filepath.Join(c.report, "executors-2")
		}
		for r := range c.runs {
			var one, cl time.Duration
			oneDir, clDir := filepath.Join(dir, fmt.Sprintf("one-%d-%d", n, r)), filepath.Join(dir, fmt.Sprintf("cluster-%d-%d", n, r))
			err := alternate(r, func() error {
				spec, err := writeSpec(oneDir)
				if err != nil {
					return err
				}
				progress := filepath.Join(oneDir, "progress.jsonl")
				args := []string{driver, "run", "-f", spec, "--progress-json", progress}
				if profile(r) != "" {
					args = append(args, "--cpuprofile", profile(r)+".one")
				}
				pr, err := launchProcess(ctx, nil, args...)
				if err != nil {
					return fmt.Errorf("driver run: %w", err)
				}
				one = pr.Elapsed
				if rows, _, err := progressTotals(progress); err != nil || rows != int64(c.rows) {
					return fmt.Errorf("driver run read %d rows (%v), want %d", rows, err, c.rows)
				}
				return nil
			}, func() error {
				spec, err := writeSpec(clDir)
				if err != nil {
					return err
				}
				var ended string
				cl, ended, err = runCluster(ctx, driver, executor, spec, clDir, n, int64(c.rows), profile(r))
				if ended != "" {
					res.RunEnded = append(res.RunEnded, ended)
				}
				return err
			})
			os.RemoveAll(oneDir)
			os.RemoveAll(clDir)
			if err != nil {
				return nil, fmt.Errorf("%d executors: %w", n, err)
			}
			res.OneEPS = append(res.OneEPS, eps(c.rows, one))
			res.EPS = append(res.EPS, eps(c.rows, cl))
			res.Ratio = append(res.Ratio, one.Seconds()/cl.Seconds())
			if p := profile(r); p != "" {
				files := []string{p + ".driver"}
				for i := range n {
					files = append(files, fmt.Sprintf("%s.executor-%d", p, i))
				}
				res.Cost = compareCostFiles(files, []string{p + ".one"}, int64(c.rows), [2]string{"the cluster (driver serve and its executors)", "one driver run process"})
			}
			fmt.Fprintf(out, "round %d: driver run %.3f s | driver serve + %d executors %.3f s | ratio %.2f\n", r+1, one.Seconds(), n, cl.Seconds(), one.Seconds()/cl.Seconds())
		}
		all = append(all, res)
	}
	return all, nil
}
