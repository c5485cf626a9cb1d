package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

func writeSpec(t *testing.T, spec query.Spec) string {
	t.Helper()
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "query.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readProgress(t *testing.T, path string) []progress.Report {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []progress.Report
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var p progress.Report
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("progress line %q: %v", sc.Text(), err)
		}
		out = append(out, p)
	}
	return out
}

// checkSink compares the sink, read by listing the directory (ignoring the
// log) and by following the log, with the oracle, and checks the directory
// holds no file the log does not list.
func checkSink(t *testing.T, out string, want []tiletest.Window) {
	t.Helper()
	ctx := context.Background()
	store, err := objstore.NewFS(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, follow := range []bool{false, true} {
		read := parquet.ReadAllFiles
		if follow {
			read = parquet.ReadCommitted
		}
		cols, rows, err := read(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tiletest.FromRows(cols, rows)
		if err != nil {
			t.Fatal(err)
		}
		if d := tiletest.Diff(want, got); d != "" {
			t.Fatalf("sink (follow log=%v) differs from the oracle:\n%s", follow, d)
		}
	}
	entries, err := parquet.LogEntries(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for _, e := range entries {
		for _, f := range e.Files {
			logged[f] = true
		}
	}
	files, err := parquet.ListDirectory(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !logged[f] {
			t.Errorf("orphan file in the sink directory: %s", f)
		}
	}
	if len(files) != len(logged) {
		t.Errorf("directory holds %d files, the log lists %d", len(files), len(logged))
	}
}

func checkLog(t *testing.T, cp string) int64 {
	t.Helper()
	ctx := context.Background()
	store, _ := objstore.NewFS(cp)
	log := checkpoint.New(store)
	cids, err := log.CommitIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range cids {
		if id != ids.BatchID(i) {
			t.Fatalf("commits/ is not gap-free: %v", cids)
		}
		if i == 0 {
			continue
		}
		prev, _ := log.Offsets(ctx, id-1)
		cur, _ := log.Offsets(ctx, id)
		if prev == nil || cur == nil || !bytes.Equal(prev.Sources[0].End, cur.Sources[0].Start) {
			t.Fatalf("offsets/%d does not start where offsets/%d ended", id, id-1)
		}
	}
	return int64(len(cids))
}

// The driver is SIGKILLed at each named point of batch 2 (before-sink-gather:
// of the first batch that gathers small outputs, the first that emits
// rows) and restarted in a fresh working directory: the output equals the
// oracle exactly once, the log is gap-free, and the new driver re-ran the
// batch as logged.
func TestDriverKilledAtEachPointResumesExactlyOnce(t *testing.T) {
	points := []string{"after-offsets", "map-done", "maps-done", "state-commit", "before-sink-gather", "before-sink-commit", "after-sink-commit", "after-commit"}
	events := tiletest.Events(21, 8000, 150*time.Millisecond, 4*time.Minute, 9)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
			if err := tiletest.WriteFiles(in, events, 400); err != nil {
				t.Fatal(err)
			}
			spec := tiletest.Spec(in, out, cp)
			spec.Source.File.MaxFilesPerTrigger = 4
			specPath := writeSpec(t, spec)

			fault := point + ":2"
			if point == "before-sink-gather" {
				fault = point
			}
			first := NewProc(t, "driver", bins.driver, "run", "-f", specPath).Env("SLUICE_FAULT=" + fault)
			first.Start()
			if err := first.Wait(60 * time.Second); !killedBySignal(err) {
				t.Fatalf("driver was not killed at %s (exit %v); logs:\n%s", point, err, first.Logs())
			}
			batch := ids.BatchID(2)
			if pending := pendingBatch(t, mustFS(t, cp)); point == "before-sink-gather" && pending != nil {
				batch = pending.BatchID
			}

			progressPath := filepath.Join(dir, "progress.jsonl")
			second := NewProc(t, "driver", bins.driver, "run", "-f", specPath, "--progress-json", progressPath)
			second.Start()
			if err := second.Wait(60 * time.Second); err != nil {
				t.Fatalf("restarted driver failed: %v; logs:\n%s", err, second.Logs())
			}
			checkSink(t, out, want)
			checkLog(t, cp)
			progress := readProgress(t, progressPath)
			if len(progress) == 0 {
				t.Fatal("restarted driver ran no batch")
			}
			if point == "after-commit" {
				if progress[0].Rerun || progress[0].BatchID != 3 {
					t.Fatalf("after commits/2 the restart should plan batch 3, got batch %d rerun=%v", progress[0].BatchID, progress[0].Rerun)
				}
				return
			}
			if !progress[0].Rerun || progress[0].BatchID != batch {
				t.Fatalf("restart should re-run batch %d as logged, got batch %d rerun=%v", batch, progress[0].BatchID, progress[0].Rerun)
			}
			logged, err := checkpoint.New(mustFS(t, cp)).Offsets(context.Background(), batch)
			if err != nil {
				t.Fatal(err)
			}
			if progress[0].BatchWatermarkMs != logged.BatchWatermark.Millis() || !bytes.Equal(progress[0].Sources[0].EndOffset, logged.Sources[0].End) {
				t.Fatalf("re-run of batch %d used watermark %d and end %s, logged %d and %s",
					batch, progress[0].BatchWatermarkMs, progress[0].Sources[0].EndOffset, logged.BatchWatermark.Millis(), logged.Sources[0].End)
			}
			if point == "before-sink-gather" && progress[0].Sink.NumOutputRows == 0 {
				t.Fatalf("the re-run of batch %d emitted nothing: the kill point tested nothing", batch)
			}
		})
	}
}

func mustFS(t *testing.T, dir string) objstore.Store {
	s, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunRefusesABadSpecNamingFieldAndRule(t *testing.T) {
	dir := t.TempDir()
	spec := tiletest.Spec(filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.OutputMode = query.Update
	spec.Watermark.Delay = query.Duration(-time.Minute)
	os.MkdirAll(filepath.Join(dir, "in"), 0o755)
	p := NewProc(t, "driver", bins.driver, "run", "-f", writeSpec(t, spec))
	p.Start()
	err := p.Wait(30 * time.Second)
	if err == nil {
		t.Fatal("driver accepted a bad spec")
	}
	logs := p.Logs()
	for _, want := range []string{"sink.parquet", "append", "watermark.delay"} {
		if !strings.Contains(logs, want) {
			t.Errorf("error output lacks %q:\n%s", want, logs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cp", "metadata")); err == nil {
		t.Error("a refused query wrote a checkpoint")
	}
}

func TestRunReportsMissingInputDirectory(t *testing.T) {
	dir := t.TempDir()
	spec := tiletest.Spec(filepath.Join(dir, "nope"), filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	p := NewProc(t, "driver", bins.driver, "run", "-f", writeSpec(t, spec))
	p.Start()
	if err := p.Wait(30 * time.Second); err == nil || !strings.Contains(p.Logs(), "nope") {
		t.Fatalf("want a non-zero exit naming the missing directory, got %v:\n%s", err, p.Logs())
	}
}

func TestCheckpointInspectJSONHasStableFields(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	events := tiletest.Events(5, 2000, time.Second, time.Minute, 3)
	if err := tiletest.WriteFiles(in, events, 1000); err != nil {
		t.Fatal(err)
	}
	p := NewProc(t, "driver", bins.driver, "run", "-f", writeSpec(t, tiletest.Spec(in, out, cp)))
	p.Start()
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("run: %v\n%s", err, p.Logs())
	}
	b, err := exec.Command(bins.driver, "checkpoint", "inspect", "--json", cp).Output()
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	for _, k := range []string{"queryId", "name", "lastBatchId", "lastCommittedBatchId", "nextBatchWatermark", "stateRows", "offsets"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("inspect --json lacks %s: %s", k, b)
		}
	}
	// The oracle's final watermark: max event time - 10m.
	var maxT time.Time
	for _, e := range events {
		if e.Time.After(maxT) {
			maxT = e.Time
		}
	}
	if got, want := rep["nextBatchWatermark"], maxT.Add(-10*time.Minute).UTC().Format(time.RFC3339Nano); got != want {
		t.Errorf("nextBatchWatermark = %v, want %v", got, want)
	}
	if rep["lastBatchId"] != rep["lastCommittedBatchId"] {
		t.Errorf("a finished run left batch %v uncommitted", rep["lastBatchId"])
	}
	// Open windows (end after the watermark) are still in state.
	open := map[string]bool{}
	for _, e := range events {
		start := e.Time.Truncate(5 * time.Minute)
		if start.Add(5 * time.Minute).After(maxT.Add(-10 * time.Minute)) {
			open[start.String()+e.Course] = true
		}
	}
	if got := rep["stateRows"].(float64); int(got) != len(open) {
		t.Errorf("stateRows = %v, want %d open windows", got, len(open))
	}
	cat, err := exec.Command(bins.driver, "sink", "cat", out).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(cat)), "\n")
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	if len(lines) != len(want) {
		t.Errorf("sink cat printed %d rows, oracle has %d", len(lines), len(want))
	}
}

// processingTime runs until SIGTERM, exits 0, and a restart continues from
// the next batch.
func TestProcessingTimeQueryStopsOnSIGTERMAndResumes(t *testing.T) {
	dir := t.TempDir()
	spec := query.Spec{
		Name:               "gen",
		Source:             query.Source{Generator: &query.GeneratorSource{RowsPerSecond: 5000, Courses: 5, Seed: 1, EventTimePerRow: query.Duration(10 * time.Millisecond)}},
		Watermark:          &query.Watermark{Column: "event_time", Delay: query.Duration(time.Minute)},
		Aggregate:          &query.Aggregate{Window: &query.Window{Column: "event_time", Size: query.Duration(time.Minute)}, GroupBy: []string{"course_id"}, Measures: []query.Measure{{Name: "n", Fn: "count"}}},
		OutputMode:         query.Append,
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: filepath.Join(dir, "out")}},
		CheckpointLocation: filepath.Join(dir, "cp"),
		Trigger:            query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)},
	}
	specPath := writeSpec(t, spec)
	p := NewProc(t, "driver", bins.driver, "run", "-f", specPath)
	p.Start()
	p.WaitForLog("batch 3", 30*time.Second)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM should stop the query cleanly, got %v:\n%s", err, p.Logs())
	}
	committed := checkLog(t, filepath.Join(dir, "cp"))
	q := NewProc(t, "driver", bins.driver, "run", "-f", specPath)
	q.Start()
	q.WaitForLog("batch "+strconv.FormatInt(committed+1, 10), 30*time.Second)
	if err := q.Stop(30 * time.Second); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	checkLog(t, filepath.Join(dir, "cp"))
	// Windows are emitted once across both runs.
	store := mustFS(t, filepath.Join(dir, "out"))
	_, rows, err := parquet.ReadAllFiles(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r[0].String()+"|"+r[2].String()]++
	}
	var dups []string
	for k, n := range seen {
		if n > 1 {
			dups = append(dups, k)
		}
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		t.Fatalf("windows emitted twice across a stop and restart: %v", dups)
	}
}
