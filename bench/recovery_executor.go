package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/query"
)

// Executor recovery (-only executor-recovery, in -report): `driver serve`
// and two executor processes run the tile over files, one file per batch
// (availableNow). For each kill, when batch b's offsets entry exists and
// its commit does not (mid-batch), one executor (alternately the first and
// the second) gets SIGKILL and a replacement starts at once with an empty
// data directory, as a pod restart would; the figure is kill → batch b's
// commit. Batches between kills run undisturbed, so the timeline shows
// the ordinary pace too. The run then drains every file, and the rows the
// driver read must equal the rows written: the oracle that the kills lost
// nothing.

// ExecutorRecovery is the measurement.
type ExecutorRecovery struct {
	Kills        int
	RowsPerBatch int
	KillToCommit []float64 // ms
	// Timeline: seconds from the driver's start to each batch's commit,
	// and to each kill.
	CommitAt map[ids.BatchID]float64
	KillAt   []float64
	// Missed counts batches that committed before the kill could land
	// (the harness then waits for the next one).
	Missed int
}

// commitWatcher records when each commits/N first appears.
type commitWatcher struct {
	dir   string
	start time.Time
	mu    sync.Mutex
	seen  map[ids.BatchID]time.Time
	stop  chan struct{}
	done  chan struct{}
}

func watchCommits(dir string, start time.Time) *commitWatcher {
	w := &commitWatcher{dir: dir, start: start, seen: map[ids.BatchID]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			w.scan()
			select {
			case <-w.stop:
				w.scan()
				return
			case <-time.After(recoveryPoll):
			}
		}
	}()
	return w
}

func (w *commitWatcher) scan() {
	es, err := os.ReadDir(w.dir)
	if err != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range es {
		if n, err := ids.ParseBatchID(e.Name()); err == nil {
			if _, ok := w.seen[n]; !ok {
				w.seen[n] = now
			}
		}
	}
}

// at returns when batch n's commit was first seen.
func (w *commitWatcher) at(n ids.BatchID) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.seen[n]
	return t, ok
}

func (w *commitWatcher) close() map[ids.BatchID]float64 {
	close(w.stop)
	<-w.done
	out := map[ids.BatchID]float64{}
	for n, t := range w.seen {
		out[n] = t.Sub(w.start).Seconds()
	}
	return out
}

func runExecutorRecoveryMode(ctx context.Context, e *ModeEnv) (*Section, error) {
	c := e.Config
	kills := c.executorKills
	sec := &Section{Title: "Recovery after an executor SIGKILL (driver serve + 2 executor processes)"}
	driver, err := e.Driver(ctx)
	if err != nil {
		return sec, err
	}
	executor, err := e.Executor(ctx)
	if err != nil {
		return sec, err
	}
	r, err := runExecutorRecovery(ctx, driver, executor, filepath.Join(e.Dir, "executor-recovery"), kills, c.rowsPerFile, e.Out)
	if r == nil {
		return sec, err
	}
	sec.Data = r
	sec.Text = fmt.Sprintf("`driver serve --exit-when-done` with two `executor` processes on this machine, the tile over files of %d rows, one file per batch (availableNow). Mid-batch (batch b's offsets entry written, its commit not), one executor gets SIGKILL and a replacement starts at once with an empty data directory; timed: kill → batch b's commit (the checkpoint polled every %v). %d kills (wanted %d; -executor-kills), %d batches committed before a kill landed and were skipped. After the kills the run drains every file and must have read every row (it did, or this section reports the failure). The driver-kill figures are in the results table (recovery rows); the driver removes a silent executor after --heartbeat-timeout (5 s by default), but a killed executor's connections close at once, so its in-flight tasks fail without waiting for that.",
		r.RowsPerBatch, recoveryPoll, r.Kills, kills, r.Missed)
	if len(r.KillToCommit) > 0 {
		sec.Rows = []Row{{Name: fmt.Sprintf("recovery, executor SIGKILL mid-batch → that batch's commit, ms (%d kills, driver serve + 2 executors)", r.Kills),
			Value: rangeOf(r.KillToCommit, "%.0f") + fmt.Sprintf(", max %.0f", slices.Max(r.KillToCommit))}}
		sec.Table = &Table{Header: []string{"kills", "kill → commit median ms", "max ms", "min ms", "ordinary batch (commit to commit) median ms"},
			Rows: [][]string{{fmt.Sprint(r.Kills), fmt.Sprintf("%.0f", median(r.KillToCommit)), fmt.Sprintf("%.0f", slices.Max(r.KillToCommit)), fmt.Sprintf("%.0f", slices.Min(r.KillToCommit)), fmt.Sprintf("%.0f", ordinaryBatchMs(r))}}}
	}
	var xs, ys []float64
	var batches []ids.BatchID
	for n := range r.CommitAt {
		batches = append(batches, n)
	}
	slices.Sort(batches)
	for _, n := range batches {
		xs, ys = append(xs, r.CommitAt[n]), append(ys, float64(n))
	}
	if len(xs) > 0 {
		sec.Plots = []Plot{{File: "recovery-timeline.png", Title: "executor kills: batch committed against time", XLabel: "seconds since the driver started", YLabel: "batch committed",
			Series: []Series{{Name: "commit", X: xs, Y: ys}}, Marks: r.KillAt, MarksLabel: "executor SIGKILL"}}
	}
	return sec, err
}

// ordinaryBatchMs is the median time between consecutive commits of
// batches no kill touched.
func ordinaryBatchMs(r *ExecutorRecovery) float64 {
	var ds []float64
	for n, t := range r.CommitAt {
		prev, ok := r.CommitAt[n-1]
		if !ok {
			continue
		}
		killed := false
		for _, k := range r.KillAt {
			if k > prev && k <= t {
				killed = true
			}
		}
		if !killed {
			ds = append(ds, 1000*(t-prev))
		}
	}
	return median(ds)
}

// runExecutorRecovery runs the kills; it returns what it measured even on
// an error.
func runExecutorRecovery(ctx context.Context, driver, executor, dir string, kills, rowsPerFile int, out io.Writer) (*ExecutorRecovery, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	files := 2*kills + 4
	rows := files * rowsPerFile
	opts := generatorOptions(int64(rows), 0)
	opts.Courses = processCourses
	src := filepath.Join(dir, "lines")
	if _, err := writeFiles(src, generateLines(opts, rows), rowsPerFile); err != nil {
		return nil, err
	}
	spec := tileSpec(query.Source{File: &query.FileSource{Path: src, MaxFilesPerTrigger: 1}, Schema: query.GeneratorSchema()}, dir, query.Trigger{AvailableNow: true})
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	specFile := filepath.Join(dir, "query.json")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		return nil, err
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("sluicebench-cluster-token\n"), 0o600); err != nil {
		return nil, err
	}
	progress := filepath.Join(dir, "progress.jsonl")
	var dlog, elog syncbuf.Buffer
	start := time.Now()
	drv := exec.CommandContext(ctx, driver, "serve", "--listen", "127.0.0.1:0", "--token-file", token, "--min-executors", "2",
		"--exit-when-done", "--query", specFile, "--progress-json", progress, "--registry", filepath.Join(dir, "registry"))
	drv.Stdout, drv.Stderr = &dlog, &dlog
	if err := drv.Start(); err != nil {
		return nil, fmt.Errorf("start driver serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- drv.Wait() }()
	driverDone := false
	var execs []*exec.Cmd
	defer func() {
		if !driverDone {
			drv.Process.Kill()
			<-exited
		}
		for _, x := range execs {
			x.Process.Kill()
			x.Wait()
		}
	}()
	addr, err := waitDriverAddr(&dlog, exited)
	if err != nil {
		driverDone = true
		return nil, err
	}
	startExecutor := func(i int) (*exec.Cmd, error) {
		x := exec.CommandContext(ctx, executor, "--driver", addr, "--token-file", token, "--data-dir", filepath.Join(dir, fmt.Sprintf("executor-%d", i)))
		x.Stdout, x.Stderr = &elog, &elog
		if err := x.Start(); err != nil {
			return nil, fmt.Errorf("start executor: %w", err)
		}
		execs = append(execs, x)
		return x, nil
	}
	live := make([]*exec.Cmd, 2)
	for i := range live {
		if live[i], err = startExecutor(i); err != nil {
			return nil, err
		}
	}
	w := watchCommits(filepath.Join(spec.CheckpointLocation, "commits"), start)
	res := &ExecutorRecovery{RowsPerBatch: rowsPerFile}
	fail := func(err error) (*ExecutorRecovery, error) {
		res.CommitAt = w.close()
		return res, fmt.Errorf("%w; driver output:\n%s\nexecutors:\n%s", err, tail(dlog.String(), 1500), tail(elog.String(), 1000))
	}
	next := 2 // batches 0 and 1 run undisturbed
	for k := 0; k < kills; {
		if next >= files-1 {
			return fail(fmt.Errorf("after %d kills and %d batches that committed before the kill landed, no batch is left: use larger -rows-per-file", k, res.Missed))
		}
		batch := ids.BatchID(next)
		offsets := filepath.Join(spec.CheckpointLocation, "offsets", batch.String())
		if err := waitForCond(ctx, func() bool { return exists(offsets) }, exited, 2*time.Minute); err != nil {
			driverDone = true
			return fail(fmt.Errorf("kill %d: waiting for batch %d to start: %w", k+1, batch, err))
		}
		if _, done := w.at(batch); done || exists(filepath.Join(spec.CheckpointLocation, "commits", batch.String())) {
			res.Missed++
			next++
			continue
		}
		victim := k % 2
		live[victim].Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		live[victim].Wait()
		if exists(filepath.Join(spec.CheckpointLocation, "commits", batch.String())) {
			// Committed between the check and the kill: not mid-batch.
			if live[victim], err = startExecutor(len(execs)); err != nil {
				return fail(err)
			}
			res.Missed++
			next++
			continue
		}
		res.KillAt = append(res.KillAt, killed.Sub(start).Seconds())
		if live[victim], err = startExecutor(len(execs)); err != nil {
			return fail(err)
		}
		if err := waitForCond(ctx, func() bool { _, ok := w.at(batch); return ok }, exited, 5*time.Minute); err != nil {
			driverDone = true
			return fail(fmt.Errorf("kill %d: waiting for batch %d's commit: %w", k+1, batch, err))
		}
		committed, _ := w.at(batch)
		ms := float64(committed.Sub(killed).Microseconds()) / 1000
		res.KillToCommit = append(res.KillToCommit, ms)
		res.Kills++
		k++
		fmt.Fprintf(out, "executor kill %d (batch %d): kill → commit %.0f ms\n", k, batch, ms)
		next += 2 // one undisturbed batch between kills
	}
	select {
	case err := <-exited:
		driverDone = true
		if err != nil {
			return fail(fmt.Errorf("driver serve: %v", err))
		}
	case <-time.After(30 * time.Minute):
		return fail(fmt.Errorf("driver serve did not exit within 30 minutes"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	res.CommitAt = w.close()
	if got, _, err := progressTotals(progress); err != nil || got != int64(rows) {
		return res, fmt.Errorf("after %d executor kills the driver read %d rows (%v), want %d: rows lost or read twice", res.Kills, got, err, rows)
	}
	return res, nil
}

// waitDriverAddr waits for `driver serve` to log its address.
func waitDriverAddr(dlog *syncbuf.Buffer, exited <-chan error) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		if m := driverAddrInLog.FindStringSubmatch(dlog.String()); m != nil {
			return m[1], nil
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("driver serve exited before listening: %v\n%s", err, tail(dlog.String(), 1500))
		case <-time.After(recoveryPoll):
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("driver serve did not log its address within a minute:\n%s", tail(dlog.String(), 1500))
		}
	}
}
