package microbatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// captured is a foreachBatch writer that keeps each batch's rows (a
// re-run replaces them, as an idempotent writer would).
type captured struct {
	mu      sync.Mutex
	batches map[ids.BatchID][]row.Row
}

func (c *captured) WriteBatch(_ context.Context, id ids.BatchID, rows []row.Row) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.batches == nil {
		c.batches = map[ids.BatchID][]row.Row{}
	}
	c.batches[id] = append([]row.Row(nil), rows...)
	return nil
}

// lines renders every captured row as "col=value ..." over cols, sorted.
func (c *captured) lines(cols []query.Column) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, rows := range c.batches {
		for _, r := range rows {
			out = append(out, render(cols, r))
		}
	}
	sort.Strings(out)
	return out
}

func render(cols []query.Column, r row.Row) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + "=" + r[i].String()
	}
	return strings.Join(parts, " ")
}

// joinEvent is one input event of the join tests.
type joinEvent struct{ id, course, lesson, at string }

func (e joinEvent) json() string {
	lesson := "null"
	if e.lesson != "" {
		lesson = fmt.Sprintf("%q", e.lesson)
	}
	return fmt.Sprintf(`{"event_id":%q,"course_id":%q,"lesson_id":%s,"event_time":%q}`, e.id, e.course, lesson, e.at)
}

// manifest is a lesson manifest version: lesson -> module, and its id.
type manifest struct {
	id      string
	modules map[string]string
}

func writeManifestJSON(t *testing.T, dir string, m manifest) {
	t.Helper()
	os.RemoveAll(dir)
	var lines []string
	for lesson, module := range m.modules {
		lines = append(lines, fmt.Sprintf(`{"lesson_id":%q,"module":%q,"manifest_id":%q,"ignored":1}`, lesson, module, m.id))
	}
	sort.Strings(lines)
	half := len(lines) / 2
	writeLines(t, filepath.Join(dir, "part-0.jsonl"), lines[:half]...)
	writeLines(t, filepath.Join(dir, "part-1.json"), lines[half:]...)
	writeLines(t, filepath.Join(dir, "_SUCCESS.json"), `{"not":"read"}`)
}

// joinOracle is the expected output of the pass-through join, computed
// from the input and the manifest alone: one line per event (left) or per
// known event (inner), in render's format.
func joinOracle(events []joinEvent, m manifest, typ string) []string {
	var out []string
	for _, e := range events {
		module, ok := m.modules[e.lesson]
		if e.lesson == "" {
			ok = false
		}
		if !ok && typ == query.JoinInner {
			continue
		}
		mod, lesson := "null", e.lesson
		if ok {
			mod = module
		}
		if lesson == "" {
			lesson = "null"
		}
		ts, _ := row.ParseTimestamp([]byte(e.at))
		out = append(out, fmt.Sprintf("event_id=%s course_id=%s lesson_id=%s event_time=%s module=%s manifest_id=%s",
			e.id, e.course, lesson, row.FormatTimestamp(ts), mod, m.id))
	}
	sort.Strings(out)
	return out
}

func joinSpec(in, manifestDir, cp, typ string) query.Spec {
	spec := tiletest.Spec(in, "", cp)
	spec.Aggregate, spec.Watermark = nil, nil
	spec.Sink = query.Sink{Console: &query.ConsoleSink{}}
	spec.Join = &query.Join{
		Path: manifestDir, Format: query.JoinJSON, Keys: []string{"lesson_id"}, Type: typ,
		Columns:          []query.JoinColumn{{Name: "module", Type: "string"}},
		ManifestIDColumn: "manifest_id", WithManifestID: true,
	}
	return spec
}

var joinEvents = []joinEvent{
	{"e1", "c1", "l1", "2026-03-02T09:01:00Z"},
	{"e2", "c1", "l2", "2026-03-02T09:02:00Z"},
	{"e3", "c2", "unknown", "2026-03-02T09:03:00Z"},
	{"e4", "c2", "", "2026-03-02T09:04:00Z"}, // null lesson: matches nothing
	{"e5", "c3", "l3", "2026-03-02T09:05:00Z"},
}

var manifestV1 = manifest{id: "m-2026-03-01", modules: map[string]string{"l1": "intro", "l2": "joins", "l3": "windows", "l9": "unused"}}
var manifestV2 = manifest{id: "m-2026-03-02", modules: map[string]string{"l1": "basics", "l2": "joins", "l3": "watermarks", "unknown": "found"}}

func writeEvents(t *testing.T, path string, evs []joinEvent) {
	t.Helper()
	lines := make([]string, len(evs))
	for i, e := range evs {
		lines[i] = e.json()
	}
	writeLines(t, path, lines...)
}

// Left keeps events for unknown lessons (and a null lesson) with a null
// module; inner drops them. Both carry the manifest's id; both equal the
// oracle computed from the input and the manifest.
func TestJoinLeftKeepsUnknownLessonsInnerDropsThem(t *testing.T) {
	for _, typ := range []string{query.JoinLeft, query.JoinInner} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			in, mdir := filepath.Join(dir, "in"), filepath.Join(dir, "manifest")
			writeEvents(t, filepath.Join(in, "1.jsonl"), joinEvents[:3])
			writeEvents(t, filepath.Join(in, "2.jsonl"), joinEvents[3:])
			writeManifestJSON(t, mdir, manifestV1)
			spec := joinSpec(in, mdir, filepath.Join(dir, "cp"), typ)
			spec.Source.File.MaxFilesPerTrigger = 1
			w := &captured{}
			progress := run(t, spec, microbatch.Options{Writer: w})
			got := w.lines(spec.OutputSchema())
			if d := diffLines(joinOracle(joinEvents, manifestV1, typ), got); d != "" {
				t.Fatalf("%s join output differs from the oracle:\n%s", typ, d)
			}
			var unmatched int64
			for _, p := range progress {
				if p.Join == nil || (p.NumInputRows > 0 && p.Join.ManifestID != manifestV1.id) {
					t.Fatalf("batch %d progress reports join %+v, want manifest %s", p.BatchID, p.Join, manifestV1.id)
				}
				unmatched += p.Join.NumRowsUnmatched
			}
			if unmatched != 2 {
				t.Fatalf("numRowsUnmatched adds up to %d, want 2 (unknown and null lesson)", unmatched)
			}
		})
	}
}

// The driver dies after logging batch 0; the manifest in storage is then
// replaced. The restart re-runs batch 0 against the snapshot offsets/0
// names (the old modules and id), and plans the new batch against a new
// snapshot of the changed manifest.
func TestJoinReRunUsesLoggedSnapshotAndRestartTakesNewOne(t *testing.T) {
	dir := t.TempDir()
	in, mdir, cp := filepath.Join(dir, "in"), filepath.Join(dir, "manifest"), filepath.Join(dir, "cp")
	first, second := joinEvents[:3], joinEvents[3:]
	writeEvents(t, filepath.Join(in, "1.jsonl"), first)
	writeManifestJSON(t, mdir, manifestV1)
	spec := joinSpec(in, mdir, cp, query.JoinLeft)
	runUntilCrash(t, spec, "after-offsets", 0)

	writeManifestJSON(t, mdir, manifestV2)
	writeEvents(t, filepath.Join(in, "2.jsonl"), second)
	w := &captured{}
	progress := run(t, spec, microbatch.Options{Writer: w})
	if !progress[0].Rerun || progress[0].BatchID != 0 {
		t.Fatalf("the restart should re-run batch 0 first: %s", progress[0].Line())
	}
	cols := spec.OutputSchema()
	w0 := &captured{batches: map[ids.BatchID][]row.Row{0: w.batches[0]}}
	if d := diffLines(joinOracle(first, manifestV1, query.JoinLeft), w0.lines(cols)); d != "" {
		t.Fatalf("the re-run of batch 0 did not join against its logged snapshot:\n%s", d)
	}
	var later []string
	for id, rows := range w.batches {
		if id == 0 {
			continue
		}
		for _, r := range rows {
			later = append(later, render(cols, r))
		}
	}
	sort.Strings(later)
	if d := diffLines(joinOracle(second, manifestV2, query.JoinLeft), later); d != "" {
		t.Fatalf("batches planned after the restart did not join against the new manifest:\n%s", d)
	}
	// offsets/N records which snapshot each batch used; both are in the
	// checkpoint, the first unchanged.
	store, err := objstore.NewFS(cp)
	if err != nil {
		t.Fatal(err)
	}
	log := checkpoint.New(store)
	manifestIDs := map[ids.BatchID]string{}
	for _, p := range progress {
		e, err := log.Offsets(context.Background(), p.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Manifest == nil {
			t.Fatalf("offsets/%d records no manifest", p.BatchID)
		}
		manifestIDs[p.BatchID] = e.Manifest.ID
		if _, err := store.Get(context.Background(), "manifests/"+e.Manifest.Hash+".json"); err != nil {
			t.Fatalf("snapshot of offsets/%d: %v", p.BatchID, err)
		}
	}
	if manifestIDs[0] != manifestV1.id || manifestIDs[1] != manifestV2.id {
		t.Fatalf("offsets record manifests %v, want batch 0 %s and batch 1 %s", manifestIDs, manifestV1.id, manifestV2.id)
	}
}

func diffLines(want, got []string) string {
	if strings.Join(want, "\n") == strings.Join(got, "\n") {
		return ""
	}
	b, _ := json.MarshalIndent(map[string][]string{"want": want, "got": got}, "", "  ")
	return string(b)
}

// Within one run, batches keep the run's snapshot however the manifest
// changes; with refreshInterval the next batch boundary after the interval
// takes a new one. The manifest is replaced after batch 0 commits (a hook
// on the driver's goroutine, so the order is fixed, not timed).
func TestJoinSnapshotIsPerRunUnlessRefreshed(t *testing.T) {
	for _, refresh := range []time.Duration{0, time.Nanosecond} {
		t.Run(fmt.Sprintf("refreshInterval=%v", refresh), func(t *testing.T) {
			dir := t.TempDir()
			in, mdir := filepath.Join(dir, "in"), filepath.Join(dir, "manifest")
			writeEvents(t, filepath.Join(in, "1.jsonl"), joinEvents[:3])
			writeEvents(t, filepath.Join(in, "2.jsonl"), joinEvents[3:])
			writeManifestJSON(t, mdir, manifestV1)
			spec := joinSpec(in, mdir, filepath.Join(dir, "cp"), query.JoinLeft)
			spec.Source.File.MaxFilesPerTrigger = 1
			spec.Join.RefreshInterval = query.Duration(refresh)
			w := &captured{}
			progress := run(t, spec, microbatch.Options{Writer: w, Hook: func(point string, batch ids.BatchID) {
				if point == "after-commit" && batch == 0 {
					writeManifestJSON(t, mdir, manifestV2)
				}
			}})
			want := manifestV1
			if refresh > 0 {
				want = manifestV2
			}
			if len(progress) < 2 || progress[1].Join.ManifestID != want.id {
				t.Fatalf("batch 1 joined against %+v, want manifest %s", progress[1].Join, want.id)
			}
			cols := spec.OutputSchema()
			b1 := &captured{batches: map[ids.BatchID][]row.Row{1: w.batches[1]}}
			if d := diffLines(joinOracle(joinEvents[3:], want, query.JoinLeft), b1.lines(cols)); d != "" {
				t.Fatalf("batch 1 differs from the oracle of manifest %s:\n%s", want.id, d)
			}
		})
	}
}

// A batch logged before the query had a join (offsets/0 names no
// manifest) is re-run against the snapshot the run takes, and the batches
// after it record theirs: offsets written by older versions still load.
func TestJoinAddedToAQueryReRunsAnOldEntryAgainstTheRunsSnapshot(t *testing.T) {
	dir := t.TempDir()
	in, mdir, cp := filepath.Join(dir, "in"), filepath.Join(dir, "manifest"), filepath.Join(dir, "cp")
	writeEvents(t, filepath.Join(in, "1.jsonl"), joinEvents[:3])
	writeManifestJSON(t, mdir, manifestV1)
	plain := joinSpec(in, mdir, cp, query.JoinLeft)
	plain.Join = nil
	runUntilCrash(t, plain, "after-offsets", 0)

	spec := joinSpec(in, mdir, cp, query.JoinLeft)
	w := &captured{}
	progress := run(t, spec, microbatch.Options{Writer: w})
	if !progress[0].Rerun || progress[0].Join == nil || progress[0].Join.ManifestID != manifestV1.id {
		t.Fatalf("the re-run of the old entry: %s, join %+v", progress[0].Line(), progress[0].Join)
	}
	if d := diffLines(joinOracle(joinEvents[:3], manifestV1, query.JoinLeft), w.lines(spec.OutputSchema())); d != "" {
		t.Fatalf("output differs:\n%s", d)
	}
}

// The cleaner deletes the stored join snapshots that no retained batch
// records: with a new manifest for every batch and minBatchesToRetain 3,
// the checkpoint ends with the snapshots of the retained entries only, and
// each of those is still there.
func TestJoinSnapshotsNoRetainedBatchRecordsAreDeleted(t *testing.T) {
	dir := t.TempDir()
	in, mdir, cp := filepath.Join(dir, "in"), filepath.Join(dir, "manifest"), filepath.Join(dir, "cp")
	const batches = 30
	for i := range batches {
		writeEvents(t, filepath.Join(in, fmt.Sprintf("%02d.jsonl", i)), joinEvents[i%len(joinEvents):i%len(joinEvents)+1])
	}
	version := func(i int) manifest {
		return manifest{id: fmt.Sprintf("m-%02d", i), modules: map[string]string{"l1": fmt.Sprintf("mod-%d", i)}}
	}
	writeManifestJSON(t, mdir, version(0))
	spec := joinSpec(in, mdir, cp, query.JoinLeft)
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.Join.RefreshInterval = query.Duration(time.Nanosecond)
	spec.MinBatchesToRetain = 3
	progress := run(t, spec, microbatch.Options{Writer: &captured{}, Hook: func(point string, batch ids.BatchID) {
		if point == "after-commit" {
			writeManifestJSON(t, mdir, version(int(batch)+1))
		}
	}})
	if len(progress) != batches {
		t.Fatalf("%d batches, want %d", len(progress), batches)
	}
	st, err := objstore.NewFS(cp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	log := checkpoint.New(st)
	ids, err := log.OffsetIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		e, err := log.Offsets(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Manifest == nil {
			t.Fatalf("offsets/%d records no manifest", id)
		}
		want["manifests/"+e.Manifest.Hash+".json"] = true
	}
	keys, err := st.List(ctx, "manifests/")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, k := range keys {
		got[k] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("%s, recorded by a retained batch, was deleted", k)
		}
	}
	// The last pass ran at a multiple of the cleanup cadence: snapshots of
	// the entries the log kept, at most, stay.
	if len(got) > len(want) || len(got) >= batches/2 {
		t.Errorf("%d snapshots stored for %d retained entries (%d batches): %v", len(got), len(ids), batches, keys)
	}
}

// A join after a deduplication runs in the reduce task, on the rows the
// deduplication keeps, against the snapshot the batch logged: the driver
// dies after logging batch 0, the manifest is replaced, and the re-run of
// batch 0 joins the kept rows against the old snapshot, the next batch
// against the new one; unmatched rows are counted.
func TestJoinAfterDedupUsesTheLoggedSnapshotInTheReduceTask(t *testing.T) {
	dir := t.TempDir()
	in, mdir, cp := filepath.Join(dir, "in"), filepath.Join(dir, "manifest"), filepath.Join(dir, "cp")
	first := []joinEvent{
		{"e1", "c1", "l1", "2026-03-02T09:01:00Z"},
		{"e1", "c9", "l2", "2026-03-02T09:01:30Z"}, // a duplicate of e1: dropped
		{"e2", "c1", "unknown", "2026-03-02T09:02:00Z"},
	}
	second := []joinEvent{
		{"e2", "c2", "l3", "2026-03-02T09:03:00Z"}, // e2 is still in state: dropped
		{"e3", "c3", "unknown", "2026-03-02T09:04:00Z"},
	}
	writeEvents(t, filepath.Join(in, "1.jsonl"), first)
	writeManifestJSON(t, mdir, manifestV1)
	spec := joinSpec(in, mdir, cp, query.JoinLeft)
	spec.Watermark = &query.Watermark{Column: "event_time", Delay: query.Duration(time.Hour)}
	spec.Join.View = "lessons"
	spec.SQL = "SELECT e.event_id, e.course_id, module, manifest_id FROM drop_duplicates_within_watermark(TABLE(events), event_id) e LEFT JOIN lessons USING (lesson_id)"
	spec.Source.File.MaxFilesPerTrigger = 1
	runUntilCrash(t, spec, "after-offsets", 0)

	writeManifestJSON(t, mdir, manifestV2)
	writeEvents(t, filepath.Join(in, "2.jsonl"), second)
	w := &captured{}
	progress := run(t, spec, microbatch.Options{Writer: w})
	got := w.lines(spec.OutputSchema())
	want := []string{
		"event_id=e1 course_id=c1 module=intro manifest_id=m-2026-03-01",
		"event_id=e2 course_id=c1 module=null manifest_id=m-2026-03-01",
		"event_id=e3 course_id=c3 module=found manifest_id=m-2026-03-02",
	}
	if d := diffLines(want, got); d != "" {
		t.Fatalf("output differs:\n%s", d)
	}
	var unmatched, dups int64
	for _, p := range progress {
		if p.Join != nil {
			unmatched += p.Join.NumRowsUnmatched
		}
		for _, op := range p.StateOperators {
			dups += op.CustomMetrics["numDroppedDuplicateRows"]
		}
	}
	if unmatched != 1 || dups != 2 {
		t.Fatalf("numRowsUnmatched %d (want 1: e2's unknown lesson in v1), numDroppedDuplicateRows %d (want 2)", unmatched, dups)
	}
}
