package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

type fixture struct {
	t     *testing.T
	dir   string
	opts  query.FileSource
	src   *Source
	logs  *syncbuf.Buffer
	clock time.Time // the modification time of the next file written
}

func newFixture(t *testing.T, maxFiles int) *fixture {
	return newFixtureOpts(t, query.FileSource{MaxFilesPerTrigger: maxFiles})
}

func newFixtureOpts(t *testing.T, opts query.FileSource) *fixture {
	t.Helper()
	dir := t.TempDir()
	opts.Path = dir
	f := &fixture{t: t, dir: dir, opts: opts, logs: &syncbuf.Buffer{}, clock: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	f.restart()
	return f
}

// restart replaces the source with a new one (a restarted driver): all it
// knows comes from the offsets it is given.
func (f *fixture) restart() {
	store, err := objstore.NewFS(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.src = New(store, f.opts, slog.New(slog.NewTextHandler(f.logs, nil)))
}

// write writes a file whose modification time is one second after the
// previous file's.
func (f *fixture) write(name, content string) {
	f.t.Helper()
	f.clock = f.clock.Add(time.Second)
	f.writeAt(name, content, f.clock)
}

func (f *fixture) writeAt(name, content string, mtime time.Time) {
	f.t.Helper()
	p := filepath.Join(f.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) initial() source.Offset {
	f.t.Helper()
	o, err := f.src.Initial(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

func (f *fixture) latest(start source.Offset) source.Offset {
	f.t.Helper()
	o, err := f.src.Latest(context.Background(), start, time.Unix(0, 0))
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

func (f *fixture) next(start, limit source.Offset) source.Offset {
	f.t.Helper()
	o, err := f.src.Next(context.Background(), start, limit)
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

func (f *fixture) files(o source.Offset) []string {
	f.t.Helper()
	p, err := ParseOffset(o)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Files
}

// drain runs Next from start to limit until it returns its start, and
// returns the batches' file lists and the final offset.
func (f *fixture) drain(start, limit source.Offset) ([][]string, source.Offset) {
	f.t.Helper()
	var batches [][]string
	for range 100 {
		end := f.next(start, limit)
		if bytes.Equal(end, start) {
			return batches, end
		}
		batches = append(batches, f.files(end))
		start = end
	}
	f.t.Fatal("Next never reached its limit")
	return nil, nil
}

// trigger plans one batch as the scheduler does (Latest, then Next).
func (f *fixture) trigger(start source.Offset) source.Offset {
	f.t.Helper()
	return f.next(start, f.latest(start))
}

func TestInitialOffsetIsCanonical(t *testing.T) {
	f := newFixture(t, 0)
	if got := string(f.initial()); got != `{"version":3,"files":[]}` {
		t.Errorf("Initial = %s", got)
	}
}

func TestFilesAreTakenOldestFirstCappedByMaxFilesPerTrigger(t *testing.T) {
	f := newFixture(t, 2)
	for _, n := range []string{"c.jsonl", "a.jsonl", "e.jsonl", "b.jsonl", "d.jsonl"} {
		f.write(n, "{}\n") // modification times in this order
	}
	start := f.initial()
	limit := f.latest(start)
	batches, end := f.drain(start, limit)
	want := [][]string{{"c.jsonl", "a.jsonl"}, {"e.jsonl", "b.jsonl"}, {"d.jsonl"}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", batches, want)
	}
	o, _ := ParseOffset(end)
	if len(o.Seen) != 5 || !slices.Equal(o.Files, []string{"d.jsonl"}) {
		t.Errorf("final offset = %s, want all five seen and d.jsonl as the batch", end)
	}
}

func TestSameModificationTimeIsTakenInNameOrder(t *testing.T) {
	f := newFixture(t, 0)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []string{"b.jsonl", "c.jsonl", "a.jsonl"} {
		f.writeAt(n, "{}\n", at)
	}
	if got := f.files(f.trigger(f.initial())); !slices.Equal(got, []string{"a.jsonl", "b.jsonl", "c.jsonl"}) {
		t.Errorf("batch = %v", got)
	}
}

func TestLatestFirstTakesTheNewestFirst(t *testing.T) {
	f := newFixtureOpts(t, query.FileSource{MaxFilesPerTrigger: 2, LatestFirst: true})
	for _, n := range []string{"a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl", "e.jsonl"} {
		f.write(n, "{}\n")
	}
	start := f.initial()
	batches, _ := f.drain(start, f.latest(start))
	want := [][]string{{"e.jsonl", "d.jsonl"}, {"c.jsonl", "b.jsonl"}, {"a.jsonl"}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", batches, want)
	}
}

func TestNextDoesNotPassTheLimit(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "{}\n")
	f.write("b.jsonl", "{}\n")
	start := f.initial()
	limit := f.latest(start)
	f.write("c.jsonl", "{}\n") // arrives after availableNow took its limit
	batches, _ := f.drain(start, limit)
	want := [][]string{{"a.jsonl", "b.jsonl"}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", batches, want)
	}
}

func TestLatestCoversEverythingNotTakenAndIsStartWhenNothingIsNew(t *testing.T) {
	f := newFixture(t, 1)
	f.write("a.jsonl", "{}\n")
	f.write("b.jsonl", "{}\n")
	start := f.initial()
	if got := string(f.latest(start)); got != `{"version":3,"files":["a.jsonl","b.jsonl"]}` {
		t.Errorf("Latest = %s", got)
	}
	end := f.trigger(start)
	end = f.trigger(end)
	if got := f.latest(end); !bytes.Equal(got, end) {
		t.Errorf("Latest with nothing new = %s, want start %s", got, end)
	}
}

func TestEachFileIsTakenOnceAcrossTriggers(t *testing.T) {
	f := newFixture(t, 3)
	start := f.initial()
	var taken []string
	var all []string
	for round := range 5 {
		for i := range round + 2 {
			n := "f-" + string(rune('a'+round)) + "-" + string(rune('0'+i)) + ".jsonl"
			f.write(n, "{}\n")
			all = append(all, n)
		}
		end := f.trigger(start)
		taken = append(taken, f.files(end)...)
		start = end
	}
	batches, _ := f.drain(start, f.latest(start))
	for _, b := range batches {
		taken = append(taken, b...)
	}
	if !slices.Equal(taken, all) {
		t.Errorf("taken = %v, want each of %v once, in order", taken, all)
	}
}

// The file source never skips a file: one whose name sorts before every
// file taken, written later (while the query runs, or while the driver is
// down), is read exactly once, also across a restart.
func TestAFileThatSortsFirstIsReadOnceWhenEverItArrives(t *testing.T) {
	f := newFixture(t, 0)
	f.write("b.jsonl", "{}\n")
	f.write("c.jsonl", "{}\n")
	end := f.trigger(f.initial())
	if got := f.files(end); !slices.Equal(got, []string{"b.jsonl", "c.jsonl"}) {
		t.Fatalf("first batch = %v", got)
	}
	f.write("a.jsonl", "{}\n") // sorts first, arrives later
	f.write("d.jsonl", "{}\n")
	next := f.trigger(end)
	if got := f.files(next); !slices.Equal(got, []string{"a.jsonl", "d.jsonl"}) {
		t.Errorf("second batch = %v, want [a.jsonl d.jsonl]", got)
	}
	// The driver is down; a file sorting first arrives with an old
	// modification time (copied with its times kept); the driver restarts
	// from the logged offset.
	f.writeAt("0.jsonl", "{}\n", f.clock.Add(-time.Hour))
	f.restart()
	after := f.trigger(next)
	if got := f.files(after); !slices.Equal(got, []string{"0.jsonl"}) {
		t.Errorf("after the restart = %v, want [0.jsonl]", got)
	}
	f.restart()
	if again := f.trigger(after); !bytes.Equal(again, after) {
		t.Errorf("nothing new, but Next = %s", again)
	}
}

// maxFileAge (relative to the newest file taken): older files are ignored
// after the first batch, and the names kept in the offset are bounded.
func TestMaxFileAgeIgnoresOldFilesAndBoundsTheNamesKept(t *testing.T) {
	f := newFixtureOpts(t, query.FileSource{MaxFileAge: query.Duration(time.Hour)})
	base := f.clock
	f.writeAt("old.jsonl", "{}\n", base)
	f.writeAt("new.jsonl", "{}\n", base.Add(3*time.Hour))
	end := f.trigger(f.initial())
	// The first batch takes every file, as in Spark.
	if got := f.files(end); !slices.Equal(got, []string{"old.jsonl", "new.jsonl"}) {
		t.Fatalf("first batch = %v", got)
	}
	o, _ := ParseOffset(end)
	if _, kept := o.Seen["old.jsonl"]; kept || len(o.Seen) != 1 {
		t.Errorf("seen = %v, want only new.jsonl (old.jsonl is past maxFileAge)", o.Seen)
	}
	f.writeAt("late-but-old.jsonl", "{}\n", base.Add(90*time.Minute)) // 90 min older than the newest
	f.writeAt("recent.jsonl", "{}\n", base.Add(150*time.Minute))      // 30 min older: within the hour
	next := f.trigger(end)
	if got := f.files(next); !slices.Equal(got, []string{"recent.jsonl"}) {
		t.Errorf("second batch = %v, want [recent.jsonl]", got)
	}
	// old.jsonl, though no longer in the offset, is not taken again.
	if again := f.trigger(next); !bytes.Equal(again, next) {
		t.Errorf("Next = %s, want nothing new", again)
	}
	// 200 files over 200 hours: the offset keeps about an hour's worth.
	start := next
	for i := range 200 {
		f.writeAt(fmt.Sprintf("h%03d.jsonl", i), "{}\n", base.Add(time.Duration(4+i)*time.Hour))
		start = f.trigger(start)
	}
	o, _ = ParseOffset(start)
	if len(o.Seen) > 2 {
		t.Errorf("after 200 hourly files the offset keeps %d names, want at most 2", len(o.Seen))
	}
}

// A version-1 offset ({"lastFile"}) from an older build: the files at or
// before lastFile count as taken, the rest are read, and a file sorting
// first arriving afterwards is read too.
func TestVersionOneOffsetIsConverted(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "{}\n")
	f.write("b.jsonl", "{}\n")
	f.write("c.jsonl", "{}\n")
	resumed := []byte(`{"lastFile":"b.jsonl","files":["b.jsonl"]}`)
	end := f.trigger(resumed)
	if got := f.files(end); !slices.Equal(got, []string{"c.jsonl"}) {
		t.Errorf("batch = %v, want [c.jsonl]", got)
	}
	f.write("0.jsonl", "{}\n")
	if got := f.files(f.trigger(end)); !slices.Equal(got, []string{"0.jsonl"}) {
		t.Errorf("batch = %v, want [0.jsonl]", got)
	}
}

func TestCleanSourceDeletesOrArchivesACommittedBatchsFiles(t *testing.T) {
	ctx := context.Background()
	f := newFixtureOpts(t, query.FileSource{CleanSource: query.CleanSourceDelete})
	f.write("a.jsonl", "{}\n")
	f.write("sub/b.jsonl", "{}\n")
	end := f.trigger(f.initial())
	if err := f.src.Commit(ctx, end); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(f.dir, "*.jsonl")); len(left) != 0 {
		t.Errorf("after delete: %v", left)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "sub", "b.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sub/b.jsonl not deleted: %v", err)
	}

	archiveDir := t.TempDir()
	g := newFixtureOpts(t, query.FileSource{CleanSource: query.CleanSourceArchive, SourceArchiveDir: archiveDir})
	arch, err := objstore.NewFS(archiveDir)
	if err != nil {
		t.Fatal(err)
	}
	g.src.SetArchive(arch)
	g.write("a.jsonl", `{"x":1}`+"\n")
	g.write("sub/b.jsonl", `{"x":2}`+"\n")
	end = g.trigger(g.initial())
	g.write("c.jsonl", "{}\n") // not in the batch: stays
	if err := g.src.Commit(ctx, end); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.jsonl": `{"x":1}`, "sub/b.jsonl": `{"x":2}`} {
		got, err := os.ReadFile(filepath.Join(archiveDir, filepath.FromSlash(name)))
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("archived %s = %q, %v", name, got, err)
		}
		if _, err := os.Stat(filepath.Join(g.dir, filepath.FromSlash(name))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still in the source directory", name)
		}
	}
	if _, err := os.Stat(filepath.Join(g.dir, "c.jsonl")); err != nil {
		t.Errorf("c.jsonl, not in the batch, was moved: %v", err)
	}
	// A repeated commit (a restart) finds the files gone and succeeds.
	if err := g.src.Commit(ctx, end); err != nil {
		t.Errorf("repeated Commit: %v", err)
	}
}

func TestHiddenAndUnderscoreNamesAreNotDataButSubdirectoriesAre(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "{}\n")
	f.write(".a.jsonl.swp", "{}\n")
	f.write("_SUCCESS", "")
	f.write("_sink_log/0", "{}\n")
	f.write(".hidden/x.jsonl", "{}\n")
	f.write("2026/01/b.jsonl", "{}\n")
	start := f.initial()
	end := f.next(start, f.latest(start))
	if got := f.files(end); !slices.Equal(got, []string{"a.jsonl", "2026/01/b.jsonl"}) {
		t.Errorf("files = %v", got)
	}
}

func TestEmptyDirectoryHasNoData(t *testing.T) {
	f := newFixture(t, 0)
	start := f.initial()
	if got := f.latest(start); !bytes.Equal(got, start) {
		t.Errorf("Latest = %s, want start", got)
	}
	if got := f.next(start, start); !bytes.Equal(got, start) {
		t.Errorf("Next = %s, want start", got)
	}
	splits, err := f.src.Splits(context.Background(), start, start)
	if err != nil || len(splits) != 0 {
		t.Errorf("Splits = %v, %v; want none", splits, err)
	}
}

func readAll(t *testing.T, src *Source, split source.Split) []source.Record {
	t.Helper()
	var recs []source.Record
	err := src.Read(context.Background(), split, func(r *source.Record) error {
		c := *r
		c.Value = append([]byte(nil), r.Value...)
		recs = append(recs, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestReadGivesEachLineWithFileAndLineNumber(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "{\"n\":1}\r\n\n  \r\n{\"n\":2}\n{\"n\":3}") // CRLF, blank lines, no final newline
	f.write("b.jsonl", "{\"n\":4}\n")
	start := f.initial()
	end := f.next(start, f.latest(start))
	splits, err := f.src.Splits(context.Background(), start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 2 || splits[0].ID != "a.jsonl" || string(splits[0].Desc) != `{"file":"a.jsonl"}` || splits[1].ID != "b.jsonl" {
		t.Fatalf("splits = %+v", splits)
	}
	type rec struct {
		value, part string
		offset      int64
	}
	var got []rec
	for _, sp := range splits {
		for _, r := range readAll(t, f.src, sp) {
			got = append(got, rec{string(r.Value), r.Part, r.Offset})
		}
	}
	want := []rec{
		{`{"n":1}`, "a.jsonl", 1},
		{`{"n":2}`, "a.jsonl", 4},
		{`{"n":3}`, "a.jsonl", 5},
		{`{"n":4}`, "b.jsonl", 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("records = %v, want %v", got, want)
	}
}

func TestReadInAnotherProcessUsesOnlyTheSplit(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "{}\n{}\n")
	start := f.initial()
	end := f.next(start, f.latest(start))
	splits, err := f.src.Splits(context.Background(), start, end)
	if err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewFS(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	other := New(store, query.FileSource{Path: f.dir}, nil)
	if got := len(readAll(t, other, splits[0])); got != 2 {
		t.Errorf("records = %d, want 2", got)
	}
}

func TestReadOfMissingFileNamesIt(t *testing.T) {
	f := newFixture(t, 0)
	split := source.Split{ID: "gone.jsonl", Desc: []byte(`{"file":"gone.jsonl"}`)}
	err := f.src.Read(context.Background(), split, func(*source.Record) error { return nil })
	if !errors.Is(err, objstore.ErrNotExist) || !strings.Contains(err.Error(), "gone.jsonl") {
		t.Errorf("Read error = %v, want not-exist naming gone.jsonl", err)
	}
}

func TestReadStopsAtCallbackError(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "1\n2\n3\n")
	stop := errors.New("stop")
	n := 0
	err := f.src.Read(context.Background(), source.Split{ID: "a.jsonl", Desc: []byte(`{"file":"a.jsonl"}`)},
		func(*source.Record) error {
			n++
			if n == 2 {
				return stop
			}
			return nil
		})
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("Read = %v after %d records, want stop after 2", err, n)
	}
}

func TestRerunSplitsComeFromTheLoggedOffsetNotTheDirectory(t *testing.T) {
	f := newFixture(t, 1)
	f.write("a.jsonl", "{}\n")
	f.write("b.jsonl", "{}\n")
	start := f.initial()
	end := f.next(start, f.latest(start))
	f.write("0.jsonl", "{}\n") // changes the listing, not the batch
	splits, err := f.src.Splits(context.Background(), start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 1 || splits[0].ID != "a.jsonl" {
		t.Errorf("splits = %+v, want [a.jsonl]", splits)
	}
}

func TestSplitsRefuseAnEndThatDoesNotFollowStart(t *testing.T) {
	f := newFixture(t, 0)
	start := Offset{Version: 2, Files: []string{"c"}, Seen: map[string]int64{"b": 1, "c": 2}}.Marshal()
	end := Offset{Version: 2, Files: []string{"b", "d"}, Seen: map[string]int64{"b": 1, "c": 2, "d": 3}}.Marshal()
	if _, err := f.src.Splits(context.Background(), start, end); err == nil {
		t.Error("want an error for a file already taken at the start")
	}
}

func TestMalformedOffsetIsAnError(t *testing.T) {
	f := newFixture(t, 0)
	if _, err := f.src.Next(context.Background(), []byte(`{"row":3}`), f.initial()); err == nil {
		t.Error("want an error for a foreign offset")
	}
}
