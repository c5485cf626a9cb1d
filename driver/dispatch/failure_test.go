package dispatch

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// An executor that dies in the middle of batch 2 (after its map task ran,
// before it pushed) fails that batch attempt; the retry assigns its
// partitions to the others and the output is exact.
func TestExecutorDyingMidBatchLeavesOutputExact(t *testing.T) {
	in, want := tileInput(t, 6000)
	c := newTestCluster(t, 2, "")
	var victim *executor.Node
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	victim = c.addNode(func(o *executor.NodeOptions) {
		o.Task.Hook = func(point string, batch ids.BatchID) {
			if point == "map-done" && batch == 2 {
				victim.Kill()
				<-hang
			}
		}
	})
	c.waitLive(3)
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 5
	var mu sync.Mutex
	attempts := map[ids.BatchID]int{}
	r := c.runOn(spec, func(p *progress.Report) {
		mu.Lock()
		attempts[p.BatchID] = p.Attempts
		mu.Unlock()
	})
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	if attempts[2] < 2 {
		t.Fatalf("batch 2 ran in %d attempt(s): the executor's death went unnoticed", attempts[2])
	}
	if slices.Contains(r.Owners(), victim.ID()) || len(c.driver.Members.Live()) != 2 {
		t.Fatalf("dead executor %s still owns partitions %v or is a member", victim.ID(), r.Owners())
	}
}

// A map task that fails on one executor (its source store errors) is
// retried on another, within the batch.
func TestFailedMapTaskIsRetriedOnAnotherExecutor(t *testing.T) {
	in, want := tileInput(t, 6000)
	c := newTestCluster(t, 1, "")
	c.addNode(func(o *executor.NodeOptions) {
		o.Task.WrapStore = func(role string, s objstore.Store) objstore.Store {
			if role == "source" {
				return failingGets{s}
			}
			return s
		}
	})
	c.waitLive(2)
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 4
	var attempts []int
	r := c.runOn(spec, func(p *progress.Report) { attempts = append(attempts, p.Attempts) })
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	if r.Stats().MapRetries == 0 {
		t.Fatal("no map task was retried: the failing executor ran none")
	}
	for i, a := range attempts {
		if a != 1 {
			t.Fatalf("batch %d took %d attempts: a failed map task should be retried within the batch", i, a)
		}
	}
}

type failingGets struct{ objstore.Store }

func (f failingGets) Get(ctx context.Context, key string) ([]byte, error) {
	return nil, errors.New("injected read failure")
}

// An executor added while a query runs gets partitions at the next batch
// (loading their state from the checkpoint), and the output stays exact.
func TestExecutorJoiningMidRunTakesPartitionsAtNextBatch(t *testing.T) {
	in, want := tileInput(t, 6000)
	c := newTestCluster(t, 3, "")
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 3
	var joined *executor.Node
	r := c.runOn(spec, func(p *progress.Report) {
		if p.BatchID == 2 {
			joined = c.addNode()
			c.waitLive(4)
		}
	})
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	if !slices.Contains(r.Owners(), joined.ID()) {
		t.Fatalf("the executor that joined (%s) owns no partition: %v", joined.ID(), r.Owners())
	}
}

// SIGTERM on an executor drains it: the batch using it finishes, it leaves,
// and the query goes on on the others.
func TestDrainingExecutorFinishesItsBatchAndLeaves(t *testing.T) {
	in, want := tileInput(t, 6000)
	c := newTestCluster(t, 3, "")
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 3
	drained := make(chan error, 1)
	r := c.runOn(spec, func(p *progress.Report) {
		if p.BatchID == 2 {
			go func() { drained <- c.stop(0) }()
		}
	})
	if err := <-drained; err != nil {
		t.Fatalf("drained executor's Run returned %v", err)
	}
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	if slices.Contains(r.Owners(), c.nodes[0].ID()) {
		t.Fatalf("drained executor still owns partitions: %v", r.Owners())
	}
}

func TestPeersWithoutTheTokenAreRefusedOnEveryService(t *testing.T) {
	c := newTestCluster(t, 1, "right-token")
	// Registering.
	n, err := executor.NewNode(executor.NodeOptions{Driver: c.driver.Addr(), DataDir: t.TempDir(), Token: "wrong-token"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Run(ctx); err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), rpcauth.TokenEnv) {
		t.Fatalf("an executor with a wrong token got %v, want a refusal naming %s", err, rpcauth.TokenEnv)
	}
	if len(c.driver.Members.Live()) != 1 {
		t.Fatal("the refused executor joined")
	}
	dial := func(addr, token string) *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, rpcauth.DialOptions(token, nil)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// Pushing shuffle data to an executor.
	stream, err := sluicepb.NewShuffleServiceClient(dial(c.nodes[0].Addr(), "")).PushPartials(ctx)
	if err == nil {
		stream.Send(&sluicepb.PushPartialsRequest{QueryId: "q", Last: true})
		_, err = stream.CloseAndRecv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("shuffle push without a token: got %v, want UNAUTHENTICATED", err)
	}
	// Driver-to-executor calls from a process without the token.
	if _, err := sluicepb.NewExecutorServiceClient(dial(c.nodes[0].Addr(), "nope")).ReleaseBatch(ctx, &sluicepb.ReleaseBatchRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("executor call with a wrong token: got %v", err)
	}
	// Submitting to the driver.
	if _, err := sluicepb.NewControlServiceClient(dial(c.driver.Addr(), "")).SubmitQuery(ctx, &sluicepb.SubmitQueryRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("submit without a token: got %v, want UNAUTHENTICATED", err)
	}
	if _, err := sluicepb.NewControlServiceClient(dial(c.driver.Addr(), "right-token")).SubmitQuery(ctx, &sluicepb.SubmitQueryRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("submit with the token to a driver without a Control: got %v, want UNIMPLEMENTED", err)
	}
}

// With the pebble provider, partitions that move to a new executor and
// back (a join, then that executor draining) reopen the version each batch
// needs, from the checkpoint when the local database is stale.
func TestPartitionsMovingAwayAndBackKeepStateExactWithPebble(t *testing.T) {
	for _, store := range []string{"pebble", "memory"} {
		t.Run(store, func(t *testing.T) {
			in, want := tileInput(t, 8000)
			c := newTestCluster(t, 2, "")
			dir := t.TempDir()
			spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
			spec.Source.File.MaxFilesPerTrigger = 2
			spec.StateStore = store
			var joined int
			var drained <-chan error
			r := c.runOn(spec, func(p *progress.Report) {
				switch p.BatchID {
				case 2:
					c.addNode()
					joined = len(c.nodes) - 1
					c.waitLive(3)
				case 5:
					drained = c.drainAsync(joined)
				}
			})
			if drained == nil {
				t.Fatal("no batch 5")
			}
			if err := <-drained; err != nil {
				t.Errorf("drain: %v", err)
			}
			if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
				t.Fatalf("output differs from the oracle:\n%s", d)
			}
			if slices.Contains(r.Owners(), c.nodes[joined].ID()) {
				t.Fatalf("drained executor still owns partitions")
			}
		})
	}
}
