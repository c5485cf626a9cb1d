package microbatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
)

// stopDeletes cancels a run after its checkpoint store has deleted n state
// files: a driver stopped half-way through a cleaner's state pass.
type stopDeletes struct {
	objstore.Store
	left   atomic.Int64
	cancel context.CancelFunc
}

func (s *stopDeletes) Delete(ctx context.Context, key string) error {
	err := s.Store.Delete(ctx, key)
	if strings.HasPrefix(key, "state/") && s.left.Add(-1) == 0 {
		s.cancel()
	}
	return err
}

// After 150 batches with minBatchesToRetain 20 on the S3-compatible server,
// stopped twice in the middle of the background cleanup (once between the
// state pass and the log pass, once part-way through the state pass), the
// old offsets, commits and state versions are gone, no batch wrote a
// snapshot (the background maintenance did, and a fresh executor loads
// from one), and the output equals the oracle.
func TestRetentionOnS3KeepsCheckpointBoundedThroughStopsMidCleanup(t *testing.T) {
	srv := s3test.Start(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	events := tiletest.Events(13, 3000, time.Second, 30*time.Second, 6)
	if err := tiletest.WriteFiles(in, events, 20); err != nil { // 150 files
		t.Fatal(err)
	}
	const retain, interval = 20, 5
	spec := tiletest.Spec(in, srv.URI("retain", "out/"), srv.URI("retain", "cp/"))
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.MinBatchesToRetain = retain
	spec.SnapshotInterval = interval
	opts := microbatch.Options{Store: objstore.Options{S3: srv.Options("retain")}, StateMaintenanceInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}

	var mu sync.Mutex
	var reports []*progress.Report
	runOnce := func(o microbatch.Options, ctx context.Context) {
		t.Helper()
		o.Observer = progress.Committed(func(p *progress.Report) {
			mu.Lock()
			reports = append(reports, p)
			mu.Unlock()
		})
		job, err := microbatch.Build(ctx, spec, o)
		if err != nil {
			t.Fatal(err)
		}
		defer job.Close()
		if err := job.Run(ctx, nil); err != nil {
			t.Fatalf("run: %v", err)
		}
	}

	// 1: stopped after a state pass, before its log pass.
	ctx, cancel := context.WithCancel(context.Background())
	o := opts
	var stopped atomic.Bool
	o.Hook = func(point string, batch ids.BatchID) {
		if point == "cleanup-log" && batch >= 60 && !stopped.Swap(true) {
			cancel()
		}
	}
	runOnce(o, ctx)
	cancel()
	if !stopped.Load() {
		t.Fatal("the first run never reached a cleanup's log pass")
	}
	// 2: stopped part-way through a state pass.
	ctx, cancel = context.WithCancel(context.Background())
	o = opts
	o.WrapStore = func(role string, s objstore.Store) objstore.Store {
		if role != task.RoleCheckpoint {
			return s
		}
		sd := &stopDeletes{Store: s, cancel: cancel}
		sd.left.Store(3)
		return sd
	}
	runOnce(o, ctx)
	cancel()
	// 3: to the end.
	o = opts
	runOnce(o, context.Background())

	last := reports[len(reports)-1].BatchID
	for _, p := range reports {
		for _, op := range p.StateOperators {
			if op.NumStateStoreWrites > spec.ShufflePartitions {
				t.Fatalf("batch %d wrote %d state files for %d partitions: a snapshot on the batch path", p.BatchID, op.NumStateStoreWrites, spec.ShufflePartitions)
			}
		}
	}
	if last < 149 {
		t.Fatalf("last batch %d, want at least 149", last)
	}
	cp := srv.Store(t, "retain", "cp/")
	ctx = context.Background()
	log := checkpoint.New(cp)
	oldest := checkpoint.RetainFrom(last, retain) - microbatch.CleanupEvery
	for _, logged := range [][]ids.BatchID{must(log.OffsetIDs(ctx)), must(log.CommitIDs(ctx))} {
		if len(logged) == 0 || logged[0] < oldest || len(logged) > retain+microbatch.CleanupEvery {
			t.Fatalf("log ids %v after batch %d: want at most %d, none before %d", logged, last, retain+microbatch.CleanupEvery, oldest)
		}
	}
	keys := must(cp.List(ctx, "state/"))
	snapshots := 0
	for _, k := range keys {
		name := k[strings.LastIndexByte(k, '/')+1:]
		v, _ := strconv.ParseInt(name[:strings.IndexAny(name, "-.")], 10, 64)
		// Below the newest snapshot at or before the cut everything goes;
		// snapshots come every interval versions, plus the maintenance's lag.
		if ids.BatchID(v) < oldest-3*interval { // version v is batch v-1's state
			t.Fatalf("state file %s survived retention after batch %d", k, last)
		}
		if strings.HasSuffix(name, ".snapshot") {
			snapshots++
		}
	}
	if snapshots == 0 {
		t.Fatalf("no snapshot under state/ after %d batches: %v", last, keys)
	}

	// A fresh executor loads the newest version from a background snapshot
	// (the deltas before it are gone).
	counting := objstore.NewCounting(cp)
	counting.StartTrace()
	fresh := statestore.NewMemory(counting, statestore.MemoryOptions{SnapshotInterval: interval})
	defer fresh.Close()
	fromSnapshot := 0
	for p := range ids.PartitionID(spec.ShufflePartitions) {
		st, err := fresh.Open(ctx, p, statestore.Version(last+1))
		if err != nil {
			t.Fatalf("fresh load of partition %d: %v", p, err)
		}
		st.Abort()
	}
	for _, e := range counting.Trace() {
		if e.Op == objstore.OpGet && strings.HasSuffix(e.Key, ".snapshot") {
			fromSnapshot++
		}
	}
	if fromSnapshot == 0 {
		t.Fatal("a fresh executor's load read no snapshot")
	}

	cols, rows, err := parquet.ReadCommitted(ctx, srv.Store(t, "retain", "out/"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tiletest.FromRows(cols, rows)
	if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), got); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	t.Logf("%d batches, %d log entries, %d state files (%d snapshots) kept", last+1, len(must(log.OffsetIDs(ctx)))+len(must(log.CommitIDs(ctx))), len(keys), snapshots)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}
