package microbatch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/task"
)

// signalRun runs a tile query on files (one file per batch, processingTime
// 10ms) whose batch 1 holds in its read until release is closed, and sends
// sig once it holds there. It returns Run's error, the committed
// batches, and the checkpoint's store.
func signalRun(t *testing.T, sig microbatch.Signal, stopTimeout time.Duration, release chan struct{}) (error, []ids.BatchID, objstore.Store, query.Spec) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	events := tiletest.Events(7, 600, time.Second, time.Minute, 3)
	if err := tiletest.WriteFiles(in, events, 100); err != nil {
		t.Fatal(err)
	}
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 1
	// A trigger interval: no map tasks run ahead, so batch 1 reads its
	// file only once its offsets are logged.
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(10 * time.Millisecond)}
	held := make(chan struct{})
	var committed []ids.BatchID
	opts := microbatch.Options{
		StopTimeout: stopTimeout,
		// Batch 1's read of its file waits for release, or for its
		// context to end (as a slow store's read would).
		WrapStore: func(role string, st objstore.Store) objstore.Store {
			if role != task.RoleSource {
				return st
			}
			return &heldStore{Store: st, key: "part-00001", held: held, release: release}
		},
		Observer: progress.Committed(func(p *progress.Report) { committed = append(committed, p.BatchID) }),
	}
	job, err := microbatch.Build(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	signals := make(chan microbatch.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background(), signals) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the run ended before batch 1: %v", err)
	}
	signals <- sig
	select {
	case err := <-done:
		cp, cerr := objstore.Open(context.Background(), spec.CheckpointLocation, objstore.Options{})
		if cerr != nil {
			t.Fatal(cerr)
		}
		return err, committed, cp, spec
	case <-time.After(time.Minute):
		t.Fatalf("%s: the run did not stop", sig.Kind)
	}
	return nil, nil, nil, spec
}

func hasCommit(t *testing.T, cp objstore.Store, b ids.BatchID) bool {
	t.Helper()
	_, err := cp.Get(context.Background(), "commits/"+b.String())
	if errors.Is(err, objstore.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// A graceful stop lets the batch in flight commit, then the run ends
// without planning another; stop-now and a lost lease end it at once,
// writing nothing more of the batch, whose logged offsets the next run
// re-runs.
func TestSignalsEndARunAsTheStepDecides(t *testing.T) {
	t.Run("stop commits the batch in flight", func(t *testing.T) {
		release := make(chan struct{})
		go func() { time.Sleep(50 * time.Millisecond); close(release) }()
		err, committed, cp, _ := signalRun(t, microbatch.Signal{Kind: microbatch.Stop}, 0, release)
		if err != nil {
			t.Fatalf("a graceful stop returned %v", err)
		}
		if len(committed) != 2 || committed[1] != 1 || !hasCommit(t, cp, 1) || hasCommit(t, cp, 2) {
			t.Fatalf("committed %v: want batches 0 and 1, and nothing planned after", committed)
		}
		if _, err := cp.Get(context.Background(), "offsets/2"); !errors.Is(err, objstore.ErrNotExist) {
			t.Fatalf("offsets/2 after a graceful stop: %v", err)
		}
	})
	for _, tc := range []struct {
		sig     microbatch.Signal
		timeout time.Duration
		want    error
	}{
		{microbatch.Signal{Kind: microbatch.StopNow}, 0, nil},
		{microbatch.Signal{Kind: microbatch.LeaseLost}, 0, microbatch.ErrLeaseLost},
		// A graceful stop whose time is up abandons the batch as stop-now
		// does.
		{microbatch.Signal{Kind: microbatch.Shutdown, Timeout: 100 * time.Millisecond}, time.Hour, nil},
	} {
		t.Run(tc.sig.Kind.String()+" abandons the batch in flight", func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			err, committed, cp, spec := signalRun(t, tc.sig, tc.timeout, release)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run returned %v, want %v", err, tc.want)
			}
			if len(committed) != 1 || hasCommit(t, cp, 1) {
				t.Fatalf("committed %v (commits/1 %v): want only batch 0", committed, hasCommit(t, cp, 1))
			}
			if _, err := cp.Get(context.Background(), "offsets/1"); err != nil {
				t.Fatalf("batch 1's offsets are not logged: %v", err)
			}
			// The next run re-runs batch 1 as logged and goes on.
			next := spec
			next.Trigger = query.Trigger{AvailableNow: true}
			reports := run(t, next, microbatch.Options{})
			if len(reports) == 0 || reports[0].BatchID != 1 || !reports[0].Rerun {
				t.Fatalf("the next run started with %v, want a re-run of batch 1", progressSummary(reports))
			}
			if _, err := os.Stat(filepath.Join(spec.CheckpointLocation, "commits", "1")); err != nil {
				t.Fatalf("batch 1 not committed by the next run: %v", err)
			}
		})
	}
}

// heldStore holds a read of a key containing key until release is
// closed or the read's context ends, closing held when the first one
// arrives.
type heldStore struct {
	objstore.Store
	key           string
	held, release chan struct{}
	once          sync.Once
}

func (s *heldStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.Contains(key, s.key) {
		s.once.Do(func() { close(s.held) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key)
}
