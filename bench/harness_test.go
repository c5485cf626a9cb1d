package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

// checkAgainstRawLoop checks an engine run of the lines against the raw
// loop: every window the engine emitted has the raw loop's count, every
// window that closed by the final watermark was emitted, and emitted plus
// still-open windows are exactly the raw loop's windows.
func checkAgainstRawLoop(t *testing.T, er *EngineRun, raw *RawResult, n int) {
	t.Helper()
	if er.InputRows != int64(n) {
		t.Fatalf("engine read %d rows, want %d", er.InputRows, n)
	}
	st, err := objstore.NewFS(er.SinkDir)
	if err != nil {
		t.Fatal(err)
	}
	cols, rows, err := parquet.ReadCommitted(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, c := range cols {
		idx[c.Name] = i
	}
	emitted := map[WindowKey]bool{}
	for _, r := range rows {
		k := WindowKey{Start: r[idx[query.WindowStart]].I, Course: r[idx[query.GeneratorCourseID]].S}
		if emitted[k] {
			t.Fatalf("window %v emitted twice", k)
		}
		emitted[k] = true
		if got, want := r[idx["event_count"]].I, raw.Counts[k]; got != want {
			t.Errorf("window %v: engine counted %d, raw loop %d", k, got, want)
		}
		if end := r[idx[query.WindowEnd]].I; end != k.Start+windowSize.Microseconds() {
			t.Errorf("window %v ends at %d", k, end)
		}
	}
	if int64(len(rows)) != er.OutputRows {
		t.Errorf("sink holds %d rows, progress reported %d", len(rows), er.OutputRows)
	}
	// The final watermark is max event time minus the delay (no row is
	// late, so it is the raw loop's maximum).
	wm := (raw.MaxTime/1000)*1000 - watermarkDelay.Microseconds()
	if er.Watermark != wm {
		t.Errorf("final watermark %d, want %d", er.Watermark, wm)
	}
	for k := range raw.Counts {
		closed := k.Start+windowSize.Microseconds() <= wm
		if closed != emitted[k] {
			t.Errorf("window %v: closed by the watermark %v, emitted %v", k, closed, emitted[k])
		}
	}
	if got := int64(len(rows)) + er.StateRows; got != int64(len(raw.Counts)) {
		t.Errorf("emitted %d + open %d windows = %d, raw loop has %d", len(rows), er.StateRows, got, len(raw.Counts))
	}
	if len(rows) == 0 || er.StateRows == 0 {
		t.Errorf("emitted %d, open %d: the test wants both closed and open windows", len(rows), er.StateRows)
	}
}

func TestEngineOutputMatchesBothReferencesOnBothSources(t *testing.T) {
	const n, perBatch, perFile = 30_000, 8_000, 2_000
	ctx := context.Background()
	dir := t.TempDir()
	gopts := generatorOptions(n, perBatch)
	// 100 ms of event time per row: 50 minutes, ten windows, of which
	// the final watermark closes eight.
	gopts.RowsPerSecond, gopts.EventTimePerRow = 10, query.Duration(100*time.Millisecond)
	lines := generateLines(gopts, n)
	raw, err := rawLoop(lines)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, c := range raw.Counts {
		total += c
	}
	if total != n {
		t.Fatalf("raw loop counted %d events, want %d", total, n)
	}

	// The references count what the single-goroutine loop counts,
	// window by window, whatever their goroutine count.
	refGen, err := refGenerator(fairRef, gopts, n, 3)
	if err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "generator reference", refGen, raw)

	// The bare loop (fastjson and time.Parse) counts the same.
	bareGen, err := refGenerator(bareRef, gopts, n, 3)
	if err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "generator bare loop", bareGen, raw)

	gen, err := runEngine(ctx, tileSpec(query.Source{Generator: &gopts}, filepath.Join(dir, "gen"), query.Trigger{AvailableNow: true}), 0)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstRawLoop(t, gen, refGen, n)
	checkAgainstRawLoop(t, gen, bareGen, n)

	src := filepath.Join(dir, "lines")
	if _, err := writeFiles(src, lines, perFile); err != nil {
		t.Fatal(err)
	}
	fileSpec := tileSpec(query.Source{File: &query.FileSource{Path: src, MaxFilesPerTrigger: perBatch / perFile}, Schema: query.GeneratorSchema()},
		filepath.Join(dir, "file"), query.Trigger{AvailableNow: true})
	refFile, read, err := refFiles(fairRef, src, 3)
	if err != nil {
		t.Fatal(err)
	}
	if read != n {
		t.Fatalf("file reference read %d lines, want %d", read, n)
	}
	sameCounts(t, "file reference", refFile, raw)
	bareFile, read, err := refFiles(bareRef, src, 3)
	if err != nil {
		t.Fatal(err)
	}
	if read != n {
		t.Fatalf("file bare loop read %d lines, want %d", read, n)
	}
	sameCounts(t, "file bare loop", bareFile, raw)
	file, err := runEngine(ctx, fileSpec, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstRawLoop(t, file, refFile, n)
	checkAgainstRawLoop(t, file, bareFile, n)

	for name, er := range map[string]*EngineRun{"generator": gen, "file": file} {
		data := collect(er.Batches, false)
		if data.count != 4 {
			t.Errorf("%s: %d data batches, want 4 of at most %d rows", name, data.count, perBatch)
		}
		for _, b := range er.Batches {
			if b.Requests.Writes() == 0 {
				t.Errorf("%s: batch %d: no checkpoint writes counted", name, b.Progress.BatchID)
			}
			if b.SinkWrites < 1 {
				t.Errorf("%s: batch %d: sink objects %d, want its log entry at least", name, b.Progress.BatchID, b.SinkWrites)
			}
		}
	}
}

// sameCounts checks that got counted exactly what want did, window by
// window.
func sameCounts(t *testing.T, name string, got, want *RawResult) {
	t.Helper()
	if len(got.Counts) != len(want.Counts) || got.MaxTime != want.MaxTime {
		t.Errorf("%s: %d windows, max time %d; want %d, %d", name, len(got.Counts), got.MaxTime, len(want.Counts), want.MaxTime)
	}
	for k, c := range want.Counts {
		if got.Counts[k] != c {
			t.Errorf("%s: window %v counted %d, want %d", name, k, got.Counts[k], c)
		}
	}
}

func TestReferenceDecodesWithTheEnginesFieldsAndUnusedColumns(t *testing.T) {
	unused := map[string]bool{}
	for _, f := range decoderFields() {
		if f.Unused {
			unused[f.Name] = true
		}
	}
	// The tile reads course_id and event_time only.
	want := map[string]bool{query.GeneratorEventID: true, query.GeneratorLessonID: true}
	if len(unused) != len(want) {
		t.Errorf("unused columns %v, want %v", unused, want)
	}
	for k := range want {
		if !unused[k] {
			t.Errorf("column %s is decoded, but the engine leaves it unused", k)
		}
	}
}

func TestGeneratedLinesAreTheGeneratorsLines(t *testing.T) {
	lines := generateLines(generatorOptions(1000, 0), 1000)
	if lines.Len() != 1000 {
		t.Fatalf("%d lines", lines.Len())
	}
	for _, i := range []int{0, 1, 999} {
		l := lines.Line(i)
		if !bytes.HasPrefix(l, []byte(`{"event_id":"e-42-`)) || !bytes.HasSuffix(l, []byte(`Z"}`)) || bytes.ContainsRune(l, '\n') {
			t.Errorf("line %d = %s", i, l)
		}
	}
}

func TestNoDataMeasurementSeesNoDataBatchesThatCloseWindows(t *testing.T) {
	const want = 5
	nd, err := runNoData(context.Background(), t.TempDir(), want, 10, 5*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	noData := collect(nd.Batches, true)
	if noData.count != want {
		t.Errorf("%d no-data batches, want %d", noData.count, want)
	}
	var closed int64
	for i, b := range nd.Batches {
		p := b.Progress
		if p.NoData {
			if p.NumInputRows != 0 {
				t.Errorf("no-data batch %d read %d rows", p.BatchID, p.NumInputRows)
			}
			if i == 0 || nd.Batches[i-1].Progress.NoData {
				t.Errorf("no-data batch %d does not follow a data batch", p.BatchID)
			}
			closed += p.Sink.NumOutputRows
		}
	}
	// File k holds window k's events; each raises the watermark to
	// (k-2) windows past the first, so the no-data batch after file k
	// closes window k-3: files 3 and 4 each close one window of 10 courses.
	if closed != 20 {
		t.Errorf("no-data batches emitted %d rows, want 20", closed)
	}
}

func TestMedianAndRange(t *testing.T) {
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Errorf("median of 5 1 3 = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 4 1 3 2 = %v", m)
	}
	if got := rangeOf([]float64{2, 9, 4}, "%.0f"); !strings.HasPrefix(got, "4 [2") || !strings.HasSuffix(got, "9]") {
		t.Errorf("rangeOf = %q", got)
	}
}

// The bare loop reads only RFC 3339 and needs both of its fields: what it
// cannot read stops it with an error, never a silent miscount.
func TestBareLoopRefusesWhatItCannotRead(t *testing.T) {
	c := newBareCounter()
	for _, bad := range []string{
		`{"course_id":"c","event_time":"2026-01-01 00:00:00"}`,
		`{"course_id":"c","event_time":1767225600}`,
		`{"event_time":"2026-01-01T00:00:00Z"}`,
		`{"course_id":"c",`,
	} {
		if err := c.add([]byte(bad)); err == nil {
			t.Errorf("bare loop counted %s", bad)
		}
	}
	if err := c.add([]byte(`{"course_id":"c","event_time":"1969-12-31T23:59:59.5Z"}`)); err != nil {
		t.Fatal(err)
	}
	// Before the epoch the window still starts at or before the event.
	res := c.result()
	if want := (WindowKey{Start: -windowSize.Microseconds(), Course: "c"}); res.Counts[want] != 1 || len(res.Counts) != 1 {
		t.Errorf("counts %v, want 1 in %v", res.Counts, want)
	}
}
