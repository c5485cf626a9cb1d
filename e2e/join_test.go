package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

type manifestRow struct {
	LessonID   string `parquet:"lesson_id"`
	Module     string `parquet:"module"`
	ManifestID string `parquet:"manifest_id"`
}

// putManifest replaces the lesson manifest on the S3-compatible server
// with one Parquet file per two lessons.
func putManifest(t *testing.T, store objstore.Store, id string, modules map[string]string) {
	t.Helper()
	ctx := context.Background()
	old, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range old {
		store.Delete(ctx, k)
	}
	var lessons []string
	for l := range modules {
		lessons = append(lessons, l)
	}
	sort.Strings(lessons)
	for i := 0; i < len(lessons); i += 2 {
		var rows []manifestRow
		for _, l := range lessons[i:min(i+2, len(lessons))] {
			rows = append(rows, manifestRow{l, modules[l], id})
		}
		var b bytes.Buffer
		if err := pq.Write(&b, rows); err != nil {
			t.Fatal(err)
		}
		if err := store.Put(ctx, fmt.Sprintf("part-%d.parquet", i/2), b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
}

// batchFiles returns which input files each logged batch took, from the
// file source's offsets in offsets/N (end minus start).
func batchFiles(t *testing.T, cp objstore.Store) (map[string]ids.BatchID, map[ids.BatchID]*checkpoint.ManifestRef) {
	t.Helper()
	ctx := context.Background()
	log := checkpoint.New(cp)
	logged, err := log.OffsetIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files, manifests := map[string]ids.BatchID{}, map[ids.BatchID]*checkpoint.ManifestRef{}
	for _, id := range logged {
		e, err := log.Offsets(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		manifests[id] = e.Manifest
		var start, end struct{ Files []string }
		json.Unmarshal(e.Sources[0].Start, &start)
		json.Unmarshal(e.Sources[0].End, &end)
		taken := map[string]bool{}
		for _, f := range start.Files {
			taken[f] = true
		}
		for _, f := range end.Files {
			if !taken[f] {
				files[f] = id
			}
		}
	}
	return files, manifests
}

// The join on a driver and three executor processes, with the checkpoint,
// the Parquet output and the Parquet lesson manifest on the S3-compatible
// server: the driver is SIGKILLed after logging batch 2, the manifest is
// replaced, and the restarted driver re-runs batch 2 against the snapshot
// offsets/2 names, then joins the new batches against the new manifest.
// The committed rows equal an oracle built from the input files, the batch
// each file went to, and the manifest version each batch logged; events of
// unknown lessons are dropped (inner join).
func TestDistributedJoinReRunsAgainstLoggedManifestOnS3(t *testing.T) {
	srv := s3test.Start(t)
	l := s3Locations(srv, "join")
	events := tiletest.Events(41, 2400, 150*time.Millisecond, time.Minute, 5)
	lessons := []string{"l1", "l2", "l3", "l4", "l5"}
	for i := range events {
		events[i].Lesson = lessons[i%len(lessons)]
	}
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, 200); err != nil {
		t.Fatal(err)
	}
	byFile := map[string][]tiletest.Event{}
	for i, e := range events { // WriteFiles' naming: 200 events a file, in order
		name := fmt.Sprintf("part-%05d.jsonl", i/200)
		byFile[name] = append(byFile[name], e)
	}
	v1 := map[string]string{"l1": "intro", "l2": "joins", "l3": "windows"}
	v2 := map[string]string{"l1": "basics", "l2": "joins", "l4": "state"}
	dim := srv.Store(t, "join", "manifest/")
	putManifest(t, dim, "m-v1", v1)

	spec := tiletest.Spec(in, l.Sink, l.Checkpoint)
	spec.Aggregate, spec.Watermark = nil, nil
	spec.Sink.Parquet.PartitionBy = ""
	spec.Source.File.MaxFilesPerTrigger = 2
	spec.Join = &query.Join{Path: srv.URI("join", "manifest/"), Keys: []string{"lesson_id"}, Type: query.JoinInner,
		Columns: []query.JoinColumn{{Name: "module", Type: "string"}}, ManifestIDColumn: "manifest_id", WithManifestID: true}
	specPath := writeSpec(t, spec)
	addr := freePort(t)
	c := startClusterWith(t, l, 3, []string{"--listen", addr}, []string{"SLUICE_FAULT=after-offsets:2"}, specPath)
	if err := c.driver.Wait(120 * time.Second); !killedBySignal(err) {
		t.Fatalf("driver was not killed after logging batch 2 (exit %v):\n%s", err, c.logs())
	}
	putManifest(t, dim, "m-v2", v2)

	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	second := NewProc(t, "driver", bins.driver, append(c.driver.args, "--exit-when-done", "--progress-json", progress)...).Env(l.Env...)
	second.Start()
	if err := second.Wait(180 * time.Second); err != nil {
		t.Fatalf("restarted driver failed: %v\n%s\n%s", err, second.Logs(), c.logs())
	}
	ps := readProgress(t, progress)
	if len(ps) < 2 || ps[0].BatchID != 2 || !ps[0].Rerun {
		t.Fatalf("the restarted driver should re-run batch 2 first, got %d batches", len(ps))
	}

	fileBatch, manifests := batchFiles(t, l.store(t, l.Checkpoint))
	if len(fileBatch) != len(byFile) {
		t.Fatalf("the log took %d files, the input has %d", len(fileBatch), len(byFile))
	}
	versions := map[string]map[string]string{"m-v1": v1, "m-v2": v2}
	var want []string
	for name, evs := range byFile {
		b := fileBatch[name]
		m := manifests[b]
		wantID := "m-v1"
		if b > 2 {
			wantID = "m-v2"
		}
		if m == nil || m.ID != wantID {
			t.Fatalf("offsets/%d records manifest %+v, want %s (batches up to 2 were logged before the change)", b, m, wantID)
		}
		for _, e := range evs {
			if module, ok := versions[m.ID][e.Lesson]; ok {
				want = append(want, fmt.Sprintf("%s %s %s %s", e.ID, e.Lesson, module, m.ID))
			}
		}
	}
	sort.Strings(want)

	cols, rows, err := parquet.ReadCommitted(context.Background(), l.store(t, l.Sink))
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, c := range cols {
		idx[c.Name] = i
	}
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join([]string{r[idx["event_id"]].String(), r[idx["lesson_id"]].String(), r[idx["module"]].String(), r[idx["manifest_id"]].String()}, " "))
	}
	sort.Strings(got)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("committed rows (%d) differ from the oracle (%d)\n%s", len(got), len(want), second.Logs())
	}
	var unmatched int64
	for _, p := range ps {
		if p.Join != nil {
			unmatched += p.Join.NumRowsUnmatched
		}
	}
	if unmatched == 0 {
		t.Fatal("no batch reported unmatched rows, though l5 is in no manifest")
	}
}
