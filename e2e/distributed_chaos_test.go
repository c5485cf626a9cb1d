package e2e

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// waitForOracle polls the sink until it equals the oracle.
func waitForOracle(t *testing.T, c *cluster, l locations, want []tiletest.Window, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d := sinkDiff(t, l, want)
		if d == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("output still differs from the oracle after %v:\n%s\n%s", timeout, d, c.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// SIGTERM on an executor while the query runs drains it: it finishes the
// batch using it, hands its partitions back and exits 0; the query goes on
// on the others and the output is exact.
func TestDistributedSIGTERMDrainsAnExecutor(t *testing.T) {
	in, want := tileFiles(t, 34, 8000, 400)
	l := localLocations(t, "dist")
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(250 * time.Millisecond)}
	c := startCluster(t, l, 3, nil, writeSpec(t, spec))
	c.driver.WaitForLog("batch 2", 60*time.Second)
	leaving := c.executors[0]
	id := logMatch(t, leaving, execIDInLog)
	if err := leaving.Stop(60 * time.Second); err != nil {
		t.Fatalf("drained executor exited with %v:\n%s", err, leaving.Logs())
	}
	if !strings.Contains(leaving.Logs(), `msg="executor drained"`) {
		t.Fatalf("executor did not drain:\n%s", leaving.Logs())
	}
	c.driver.WaitForLog(`msg="executor drained and left" executor=`+id, 10*time.Second)
	waitForOracle(t, c, l, want, 90*time.Second)
	if err := c.driver.Stop(30 * time.Second); err != nil {
		t.Fatalf("driver: %v\n%s", err, c.logs())
	}
	checkLog(t, l.Checkpoint)
}

// An executor that stops answering (SIGSTOP: its connections stay open,
// its calls hang) is removed after the heartbeat timeout; the batch that
// waited on it is retried without it and the output is exact.
func TestDistributedHungExecutorIsDroppedAfterMissedHeartbeats(t *testing.T) {
	in, want := tileFiles(t, 35, 8000, 400)
	l := localLocations(t, "dist")
	spec := tileSpec(in, l, 1)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(250 * time.Millisecond)}
	c := startCluster(t, l, 3, nil, writeSpec(t, spec))
	c.driver.WaitForLog("batch 2", 60*time.Second)
	hung := c.executors[2]
	id := logMatch(t, hung, execIDInLog)
	if err := hung.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer hung.cmd.Process.Signal(syscall.SIGCONT)
	c.driver.WaitForLog(`msg="executor lost: no heartbeat" executor=`+id, 30*time.Second)
	waitForOracle(t, c, l, want, 90*time.Second)
	if err := c.driver.Stop(30 * time.Second); err != nil {
		t.Fatalf("driver: %v\n%s", err, c.logs())
	}
	checkLog(t, l.Checkpoint)
}

func freePort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// The driver SIGKILLed after batch 2's map tasks, restarted in a fresh
// working directory at the same address: the executors that kept running
// register again, batch 2 runs again as logged, and the output is exact.
func TestDistributedDriverKilledMidBatchResumesWithRunningExecutors(t *testing.T) {
	in, want := tileFiles(t, 36, 8000, 250)
	l := localLocations(t, "dist")
	specPath := writeSpec(t, tileSpec(in, l, 4))
	addr := freePort(t)
	c := startClusterWith(t, l, 3, []string{"--listen", addr}, []string{"SLUICE_FAULT=maps-done:2"}, specPath)
	if err := c.driver.Wait(120 * time.Second); !killedBySignal(err) {
		t.Fatalf("driver was not killed at maps-done of batch 2 (exit %v):\n%s", err, c.logs())
	}
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	second := NewProc(t, "driver", bins.driver, append(c.driver.args, "--exit-when-done", "--progress-json", progress)...)
	second.Start()
	if err := second.Wait(120 * time.Second); err != nil {
		t.Fatalf("restarted driver failed: %v\n%s\n%s", err, second.Logs(), c.logs())
	}
	if d := sinkDiff(t, l, want); d != "" {
		t.Fatalf("output differs from the oracle:\n%s\n%s", d, second.Logs())
	}
	ps := readProgress(t, progress)
	if len(ps) == 0 || ps[0].BatchID != 2 || !ps[0].Rerun {
		t.Fatalf("the restarted driver should re-run batch 2 first, got %+v", ps)
	}
	for _, e := range c.executors {
		if !strings.Contains(e.Logs(), "registering again") {
			t.Errorf("%s did not register with the new driver:\n%s", e.name, e.Logs())
		}
	}
	checkLog(t, l.Checkpoint)
}
