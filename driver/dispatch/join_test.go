package dispatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

type joinCapture struct {
	mu      sync.Mutex
	batches map[ids.BatchID][]row.Row
}

func (c *joinCapture) WriteBatch(_ context.Context, id ids.BatchID, rows []row.Row) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches[id] = append([]row.Row(nil), rows...)
	return nil
}

func writeJoinFile(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeManifest writes lesson -> module as JSON lines with the manifest id.
func writeManifest(t *testing.T, dir, id string, modules map[string]string) {
	t.Helper()
	os.RemoveAll(dir)
	var lines []string
	for l, m := range modules {
		lines = append(lines, fmt.Sprintf(`{"lesson_id":%q,"module":%q,"manifest_id":%q}`, l, m, id))
	}
	writeJoinFile(t, filepath.Join(dir, "lessons.jsonl"), lines)
}

// The join on three executors over real gRPC: the driver dies after
// logging batch 0 (run in one process), the manifest in storage changes,
// and the cluster re-runs batch 0 against the snapshot offsets/0 names
// (each executor loads it from the checkpoint by hash) and the new batch
// against a new snapshot. Every row equals the oracle of its manifest.
func TestJoinOnExecutorsReRunsAgainstLoggedSnapshot(t *testing.T) {
	dir := t.TempDir()
	in, mdir := filepath.Join(dir, "in"), filepath.Join(dir, "manifest")
	events := tiletest.Events(11, 900, 300e6, 0, 4)
	lessons := []string{"l1", "l2", "l3"} // l3 is in neither manifest
	for i := range events {
		events[i].Lesson = lessons[i%len(lessons)]
	}
	first, second := events[:600], events[600:]
	var lines []string
	for i, e := range first { // three files: three map tasks, spread over the executors
		lines = append(lines, e.JSON())
		if (i+1)%200 == 0 {
			writeJoinFile(t, filepath.Join(in, fmt.Sprintf("1-%d.jsonl", i/200)), lines)
			lines = nil
		}
	}
	v1 := map[string]string{"l1": "intro", "l2": "joins"}
	v2 := map[string]string{"l1": "basics", "l2": "streams"}
	writeManifest(t, mdir, "v1", v1)

	spec := tiletest.Spec(in, "", filepath.Join(dir, "cp"))
	spec.Aggregate, spec.Watermark = nil, nil
	spec.Sink = query.Sink{Console: &query.ConsoleSink{}}
	spec.Join = &query.Join{Path: mdir, Format: query.JoinJSON, Keys: []string{"lesson_id"}, Type: query.JoinInner,
		Columns: []query.JoinColumn{{Name: "module", Type: "string"}}, ManifestIDColumn: "manifest_id", WithManifestID: true}

	// The driver logs batch 0 and dies.
	crashed := func() (crashed bool) {
		job, err := microbatch.Build(context.Background(), spec, microbatch.Options{Hook: func(p string, b ids.BatchID) {
			if p == "after-offsets" && b == 0 {
				panic("crash")
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer job.Close()
		defer func() { crashed = recover() == "crash" }()
		_ = job.Run(context.Background(), nil)
		return false
	}()
	if !crashed {
		t.Fatal("the first run did not reach offsets/0")
	}
	writeManifest(t, mdir, "v2", v2)
	for _, e := range second {
		lines = append(lines, e.JSON())
	}
	writeJoinFile(t, filepath.Join(in, "2.jsonl"), lines)

	c := newTestCluster(t, 3, "")
	w := &joinCapture{batches: map[ids.BatchID][]row.Row{}}
	var reports []*progress.Report
	var mu sync.Mutex
	job, err := microbatch.Build(context.Background(), spec, microbatch.Options{Writer: w, Logger: testLogger(t), Observer: progress.Committed(func(p *progress.Report) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	r, err := c.driver.NewRunner(RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.RunWith(context.Background(), r, nil); err != nil {
		t.Fatalf("run on cluster: %v", err)
	}
	if len(reports) < 2 || !reports[0].Rerun || reports[0].BatchID != 0 {
		t.Fatalf("want the re-run of batch 0 then batch 1, got %d batches", len(reports))
	}
	if st := r.Stats(); st.InputRows != int64(len(events)) {
		t.Fatalf("executors read %d rows, want %d", st.InputRows, len(events))
	}
	oracle := func(evs []tiletest.Event, id string, modules map[string]string) []string {
		var out []string
		for _, e := range evs {
			if m, ok := modules[e.Lesson]; ok { // inner: unknown lessons dropped
				out = append(out, fmt.Sprintf("%s %s %s %s", e.ID, e.Lesson, m, id))
			}
		}
		sort.Strings(out)
		return out
	}
	got := func(batch ids.BatchID) []string {
		var out []string
		for _, r := range w.batches[batch] {
			out = append(out, fmt.Sprintf("%s %s %s %s", r[0].String(), r[2].String(), r[4].String(), r[5].String()))
		}
		sort.Strings(out)
		return out
	}
	if want, g := oracle(first, "v1", v1), got(0); strings.Join(want, "\n") != strings.Join(g, "\n") {
		t.Fatalf("the cluster's re-run of batch 0 (%d rows) differs from the oracle of the logged manifest v1 (%d rows)", len(g), len(want))
	}
	if want, g := oracle(second, "v2", v2), got(1); strings.Join(want, "\n") != strings.Join(g, "\n") || len(want) == 0 {
		t.Fatalf("batch 1 (%d rows) differs from the oracle of the new manifest v2 (%d rows)", len(g), len(want))
	}
	if reports[0].Join == nil || reports[0].Join.NumRowsUnmatched != int64(len(first)/3) {
		t.Fatalf("batch 0 join reports %+v, want %d unmatched (l3) counted on the executors", reports[0].Join, len(first)/3)
	}
}
