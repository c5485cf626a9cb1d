package dispatch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/proto/sluicepb"
)

// With availableNow the next batch's map tasks run on the executors while
// a batch reduces and commits. Such a task writes nothing before its
// batch is logged: the map-done hook fires only once offsets/N exists, the
// malformed records of every batch are set aside as one process sets them
// aside (the same files, the same bytes), and the output is exact.
func TestMapTasksRunAheadOnExecutorsWriteNothingBeforeTheirBatchIsLogged(t *testing.T) {
	events := tiletest.Events(17, 6000, 150*time.Millisecond, 4*time.Minute, 9)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := tiletest.WriteFiles(in, events, 250); err != nil {
		t.Fatal(err)
	}
	// One malformed line in every file: every batch sets one aside.
	files, _ := os.ReadDir(in)
	for _, f := range files {
		p := filepath.Join(in, f.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append([]byte(`{"event_id":"bad-`+f.Name()+`","course_id":`+"\n"), b...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp := filepath.Join(dir, "cp")
	var mu sync.Mutex
	var early []ids.BatchID
	finished := map[ids.BatchID]int{}
	hook := func(point string, batch ids.BatchID) {
		if point != "map-done" {
			return
		}
		_, err := os.Stat(filepath.Join(cp, "offsets", batch.String()))
		mu.Lock()
		defer mu.Unlock()
		finished[batch]++
		if err != nil {
			early = append(early, batch)
		}
	}
	c := newTestCluster(t, 0, "")
	for range 2 {
		c.addNode(func(o *executor.NodeOptions) { o.Task.Hook = hook })
	}
	c.waitLive(2)
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), cp)
	spec.Source.File.MaxFilesPerTrigger = 2
	var reports []*progress.Report
	c.runOn(spec, func(p *progress.Report) { reports = append(reports, p) })
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("map-done ran before the batch was logged for batches %v", early)
	}
	var malformed int64
	for _, p := range reports {
		malformed += p.NumRowsMalformed
		if p.NumInputRows > 0 && finished[p.BatchID] != 2 {
			t.Errorf("batch %d: %d map tasks finished on executors, want 2 (one per file)", p.BatchID, finished[p.BatchID])
		}
	}
	if malformed != int64(len(files)) {
		t.Fatalf("%d malformed rows counted, want %d (one per file)", malformed, len(files))
	}
	local := tiletest.Spec(in, filepath.Join(dir, "local-out"), filepath.Join(dir, "local-cp"))
	local.Source.File.MaxFilesPerTrigger = 2
	runLocal(t, local)
	read := func(root string) map[string]string {
		out := map[string]string{}
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(root, p)
				out[rel] = string(b)
			}
			return nil
		})
		return out
	}
	got, wantBad := read(filepath.Join(cp, "bad_records")), read(filepath.Join(dir, "local-cp", "bad_records"))
	if len(wantBad) != len(files) {
		t.Fatalf("one process set aside %d files, want one per map task (%d)", len(wantBad), len(files))
	}
	names := func(m map[string]string) []string {
		var s []string
		for k := range m {
			s = append(s, k)
		}
		slices.Sort(s)
		return s
	}
	if !slices.Equal(names(got), names(wantBad)) {
		t.Fatalf("bad-record files on the cluster %v, in one process %v", names(got), names(wantBad))
	}
	for k, v := range wantBad {
		if got[k] != v {
			t.Errorf("%s differs:\ncluster %q\none process %q", k, got[k], v)
		}
	}
}

// FinishMapTasks refuses an attempt the executor did not run ahead.
func TestFinishMapTasksRefusesAnUnknownAttempt(t *testing.T) {
	in, _ := tileInput(t, 6000)
	c := newTestCluster(t, 1, "")
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	r := c.runOn(spec, nil)
	n := c.nodes[0]
	client, err := c.driver.executorClient(c.driver.Members.Live()[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.FinishMapTasks(context.Background(), &sluicepb.FinishMapTasksRequest{QueryId: r.opts.QueryID, RunId: r.runID, Batch: 1, Attempts: []uint64{1 << 40}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown attempt on %s: %v, want NOT_FOUND", n.ID(), err)
	}
}
