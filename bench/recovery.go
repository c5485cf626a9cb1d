package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/query"
)

// Recovery (-only recovery, in -report): `driver run` over files, one file
// per batch; when batch 1's offsets entry exists and its commit does not
// (mid-batch), the driver is SIGKILLed and a new `driver run` is started
// at once from a fresh working directory on the same checkpoint. Timed:
// new driver start → batch 1's commit, and kill → that commit. Each kill
// uses a fresh checkpoint, so every kill is the same situation. The
// checkpoint is polled every recoveryPoll, which bounds the error.

const recoveryPoll = 5 * time.Millisecond

// RecoveryResult are the kills' timings, ms.
type RecoveryResult struct {
	StartToCommit, KillToCommit []float64
	Kills                       int
	// SlowestLog is the new driver's output in the slowest restart, from
	// its start to the kill after its first commit.
	SlowestLog string `json:",omitempty"`
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// waitFor polls cond until it holds, the process exits or the deadline passes.
func waitForCond(ctx context.Context, cond func() bool, exited <-chan error, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !cond() {
		select {
		case err := <-exited:
			return fmt.Errorf("driver exited first: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(recoveryPoll):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
	}
	return nil
}

func startDriver(ctx context.Context, driver, workDir, specFile string, log io.Writer) (*exec.Cmd, <-chan error, error) {
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, driver, "run", "-f", specFile)
	cmd.Dir = workDir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start driver: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done, nil
}

func runRecovery(ctx context.Context, c config, driver, dir string, kills int, out io.Writer) (*RecoveryResult, error) {
	rows := max(c.rowsPerFile*4, 4)
	opts := generatorOptions(int64(rows), 0)
	opts.Courses = processCourses
	src := filepath.Join(dir, "recovery-lines")
	if _, err := writeFiles(src, generateLines(opts, rows), c.rowsPerFile); err != nil {
		return nil, err
	}
	defer os.RemoveAll(src)
	res := &RecoveryResult{}
	for k := range kills {
		runDir := filepath.Join(dir, fmt.Sprintf("recovery-%d", k))
		spec := tileSpec(query.Source{File: &query.FileSource{Path: src, MaxFilesPerTrigger: 1}, Schema: query.GeneratorSchema()}, runDir, query.Trigger{AvailableNow: true})
		b, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return nil, err
		}
		specFile := filepath.Join(runDir, "query.json")
		if err := os.WriteFile(specFile, b, 0o644); err != nil {
			return nil, err
		}
		var log strings.Builder
		offsets1 := filepath.Join(spec.CheckpointLocation, "offsets", "1")
		commit1 := filepath.Join(spec.CheckpointLocation, "commits", "1")
		first, exited, err := startDriver(ctx, driver, filepath.Join(runDir, "work-1"), specFile, &log)
		if err != nil {
			return nil, err
		}
		err = waitForCond(ctx, func() bool { return exists(offsets1) }, exited, 2*time.Minute)
		if err == nil && exists(commit1) {
			err = errors.New("batch 1 committed before the kill: use larger -rows-per-file")
		}
		first.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		<-exited
		if err != nil {
			return nil, fmt.Errorf("kill %d: waiting for batch 1 to start: %w; driver output:\n%s", k+1, err, tail(log.String(), 1500))
		}
		if exists(commit1) {
			// Committed between the check and the kill: not mid-batch.
			return nil, fmt.Errorf("kill %d: batch 1 committed before the kill landed: use larger -rows-per-file", k+1)
		}
		started := time.Now()
		var log2 strings.Builder
		second, exited2, err := startDriver(ctx, driver, filepath.Join(runDir, "work-2"), specFile, &log2)
		if err != nil {
			return nil, err
		}
		err = waitForCond(ctx, func() bool { return exists(commit1) }, exited2, 2*time.Minute)
		committed := time.Now()
		second.Process.Signal(syscall.SIGKILL)
		<-exited2
		os.RemoveAll(runDir)
		if err != nil {
			return nil, fmt.Errorf("kill %d: waiting for the new driver's first commit: %w; driver output:\n%s", k+1, err, tail(log.String()+log2.String(), 1500))
		}
		ms := float64(committed.Sub(started).Microseconds()) / 1000
		if len(res.StartToCommit) == 0 || ms > slices.Max(res.StartToCommit) {
			res.SlowestLog = tail(log2.String(), 3000)
		}
		res.StartToCommit = append(res.StartToCommit, ms)
		res.KillToCommit = append(res.KillToCommit, float64(committed.Sub(killed).Microseconds())/1000)
		res.Kills++
		fmt.Fprintf(out, "kill %d: new driver → first commit %.0f ms, kill → first commit %.0f ms\n", k+1, res.StartToCommit[k], res.KillToCommit[k])
	}
	return res, nil
}
