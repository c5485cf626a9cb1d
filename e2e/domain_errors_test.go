package e2e

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
	"github.com/sluicehq/sluice/wire"
)

// domainRun is how one run of a query ended.
type domainRun struct {
	err     error
	retries int64         // batches the scheduler retried (OnRetry)
	took    time.Duration // from the start of the run to its end
	logs    string        // the driver side's log
	// executor is the id the executor process registered as ("" in one
	// process).
	executor ids.ExecutorID
}

// beforeTasks calls fn with each batch's plan, once the driver has planned
// and split it, before its tasks run.
type beforeTasks struct {
	next task.Runner
	fn   func(task.BatchPlan)
}

func (b beforeTasks) RunBatch(ctx context.Context, plan task.BatchPlan) (*task.BatchResult, error) {
	if b.fn != nil {
		b.fn(plan)
	}
	return b.next.RunBatch(ctx, plan)
}

// runDomain builds the query in this process and runs it to its end:
// in this process (distributed false), or with this process as the driver
// and one real executor process (cmd/executor) running every task. before
// is called with each batch's plan before its tasks run.
func runDomain(t *testing.T, spec query.Spec, opts microbatch.Options, distributed bool, before func(task.BatchPlan)) domainRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var retries atomic.Int64
	opts.Logger = log
	opts.Observer = progress.Funcs{OnRetrying: func(batch ids.BatchID, attempt int, err error) { retries.Add(1) }}
	job, err := microbatch.Build(ctx, spec, opts)
	if err != nil {
		t.Fatalf("build the query: %v", err)
	}
	defer job.Close()
	run := domainRun{}
	start := time.Now()
	if !distributed {
		run.err = job.RunWith(ctx, beforeTasks{next: &task.Local{Env: job.Env}, fn: before}, nil)
	} else {
		drv, err := dispatch.NewDriver(dispatch.DriverOptions{Listen: "127.0.0.1:0", Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- drv.Serve(sctx) }()
		defer func() { stop(); <-served }()
		exec := NewProc(t, "executor", bins.executor, "--driver", drv.Addr(), "--data-dir", "data", "--listen", "127.0.0.1:0")
		exec.Start()
		defer exec.Kill()
		live, err := drv.Members.WaitForLive(ctx, 1)
		if err != nil {
			t.Fatalf("the executor did not register: %v\n%s", err, exec.Logs())
		}
		run.executor = live[0].ID
		runner, err := drv.NewRunner(dispatch.RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, Logger: log, MinExecutors: 1})
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		run.err = job.RunWith(ctx, beforeTasks{next: runner, fn: before}, nil)
	}
	run.took, run.retries, run.logs = time.Since(start), retries.Load(), logs.String()
	return run
}

// Kafka records deleted between the planning of a batch and its read:
// the task reading them finds the data loss. On an executor process as in
// one process, the query stops at once, with an error matching
// source.ErrDataLoss and the same details; the distributed run does not
// retry the batch (nor relaunch the map task on the executor) within
// --source-retry-for.
func TestDataLossFoundByAnExecutorStopsTheQueryAsInOneProcess(t *testing.T) {
	const retryFor = 45 * time.Second // the budget a transient failure would be retried for
	events := tiletest.Events(181, 1000, 3*time.Second, chaosDisorder, 4)
	dataLoss := func(t *testing.T, distributed bool) domainRun {
		c := kafkatest.Start(t)
		c.CreateTopic(chaosTopic, 2)
		produceEvents(t, c.Addr, events, 2) // offsets 0..499 in each partition
		spec := kafkaChaosSpec(c.Addr, localPlace(t), query.Trigger{AvailableNow: true}, 0)
		// The driver planned and split batch 0 (offsets 0..500), the
		// records go, then the tasks read.
		return runDomain(t, spec, microbatch.Options{SourceRetryFor: retryFor}, distributed, func(plan task.BatchPlan) {
			if plan.Batch == 0 {
				c.DeleteRecords(chaosTopic, 1, 300)
			}
		})
	}
	local := dataLoss(t, false)
	remote := dataLoss(t, true)

	var dl *kafka.DataLossError
	if !errors.As(local.err, &dl) {
		t.Fatalf("in one process the query ended with %v, want a *kafka.DataLossError", local.err)
	}
	t.Logf("one process: %v (%v)", local.err, local.took)
	t.Logf("executor %s: %v (%v)", remote.executor, remote.err, remote.took)
	var re *wire.RemoteError
	if !errors.Is(remote.err, source.ErrDataLoss) || !errors.As(remote.err, &re) {
		t.Fatalf("with an executor the query ended with %T %v, want an error matching source.ErrDataLoss from the executor\n%s", remote.err, remote.err, remote.logs)
	}
	if re.Kind != wire.KindDataLoss || re.Executor != remote.executor {
		t.Errorf("remote error kind %q from %q, want %s from %s", re.Kind, re.Executor, wire.KindDataLoss, remote.executor)
	}
	// The executor found the same loss: topic, partition, wanted and
	// earliest offsets, in the same words.
	if !strings.Contains(re.Message, dl.Error()) || !strings.Contains(remote.err.Error(), dl.Error()) {
		t.Errorf("the executor's error does not carry the loss as one process reports it:\nexecutor: %s\none process: %s", remote.err, dl)
	}
	if !strings.Contains(remote.err.Error(), "executor "+string(remote.executor)) {
		t.Errorf("the error does not name the executor %s: %v", remote.executor, remote.err)
	}
	for name, r := range map[string]domainRun{"one process": local, "executor": remote} {
		if r.retries != 0 || strings.Contains(r.logs, "batch failed; retrying") || strings.Contains(r.logs, "map task failed; retrying") {
			t.Errorf("%s: the batch was retried %d times on data loss:\n%s", name, r.retries, r.logs)
		}
		if r.took >= retryFor {
			t.Errorf("%s: the query took %v to stop, the whole retry budget %v", name, r.took, retryFor)
		}
	}
}

// A state checkpoint corrupt under the query: the reduce task loading it
// on an executor fails with an error matching statestore.ErrCorrupt, the
// same as in one process, after the same number of attempts.
func TestCorruptStateFoundByAnExecutorFailsAsInOneProcess(t *testing.T) {
	events := tiletest.Events(191, 1000, 3*time.Second, chaosDisorder, 4)
	corrupt := func(t *testing.T, distributed bool) domainRun {
		c := kafkatest.Start(t)
		c.CreateTopic(chaosTopic, 2)
		produceEvents(t, c.Addr, events[:500], 2)
		p := localPlace(t)
		spec := kafkaChaosSpec(c.Addr, p, query.Trigger{AvailableNow: true}, 0)
		// Batch 0 commits state in one process.
		if r := runDomain(t, spec, microbatch.Options{}, false, nil); r.err != nil {
			t.Fatalf("first run: %v\n%s", r.err, r.logs)
		}
		n := 0
		err := filepath.WalkDir(filepath.Join(p.Checkpoint, "state"), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			n++
			return os.WriteFile(path, []byte("not a state file"), 0o644)
		})
		if err != nil || n == 0 {
			t.Fatalf("corrupt the state files: %d overwritten, %v", n, err)
		}
		produceEvents(t, c.Addr, events[500:], 2)
		return runDomain(t, spec, microbatch.Options{}, distributed, nil)
	}
	local := corrupt(t, false)
	remote := corrupt(t, true)
	t.Logf("one process: %v (%d retries)", local.err, local.retries)
	t.Logf("executor %s: %v (%d retries)", remote.executor, remote.err, remote.retries)
	if !errors.Is(local.err, statestore.ErrCorrupt) {
		t.Fatalf("in one process the query ended with %v, want statestore.ErrCorrupt", local.err)
	}
	var re *wire.RemoteError
	if !errors.Is(remote.err, statestore.ErrCorrupt) || !errors.As(remote.err, &re) || re.Kind != wire.KindStateCorrupt {
		t.Fatalf("with an executor the query ended with %T %v, want statestore.ErrCorrupt from the executor\n%s", remote.err, remote.err, remote.logs)
	}
	if !strings.Contains(remote.err.Error(), "not a state file") {
		t.Errorf("the executor's message is lost: %v", remote.err)
	}
	if remote.retries != local.retries {
		t.Errorf("the executor's run retried %d times, one process %d", remote.retries, local.retries)
	}
}
