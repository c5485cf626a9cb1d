package file

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// syncBuffer is a log sink safe for the logger's use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	t    *testing.T
	dir  string
	src  *Source
	logs *syncBuffer
}

func newFixture(t *testing.T, maxFiles int) *fixture {
	t.Helper()
	dir := t.TempDir()
	store, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	return &fixture{t: t, dir: dir, logs: logs,
		src: New(store, query.FileSource{Path: dir, MaxFilesPerTrigger: maxFiles}, logger)}
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	p := filepath.Join(f.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
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

func TestInitialOffsetIsCanonical(t *testing.T) {
	f := newFixture(t, 0)
	if got := string(f.initial()); got != `{"lastFile":"","files":[]}` {
		t.Errorf("Initial = %s", got)
	}
}

func TestFilesAreTakenInNameOrderCappedByMaxFilesPerTrigger(t *testing.T) {
	f := newFixture(t, 2)
	for _, n := range []string{"c.jsonl", "a.jsonl", "e.jsonl", "b.jsonl", "d.jsonl"} {
		f.write(n, "{}\n")
	}
	start := f.initial()
	limit := f.latest(start)
	batches, end := f.drain(start, limit)
	want := [][]string{{"a.jsonl", "b.jsonl"}, {"c.jsonl", "d.jsonl"}, {"e.jsonl"}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", batches, want)
	}
	if got := string(end); got != `{"lastFile":"e.jsonl","files":["e.jsonl"]}` {
		t.Errorf("final offset = %s", got)
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

func TestLatestCoversEverythingAfterStartAndIsStartWhenNothingIsNew(t *testing.T) {
	f := newFixture(t, 1)
	f.write("a.jsonl", "{}\n")
	f.write("b.jsonl", "{}\n")
	start := f.initial()
	if got := string(f.latest(start)); got != `{"lastFile":"b.jsonl","files":["a.jsonl","b.jsonl"]}` {
		t.Errorf("Latest = %s", got)
	}
	end := f.next(start, f.latest(start))
	end = f.next(end, f.latest(end))
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
		// Files keep arriving, each round sorting after the last.
		for i := range round + 2 {
			n := "f-" + string(rune('a'+round)) + "-" + string(rune('0'+i)) + ".jsonl"
			f.write(n, "{}\n")
			all = append(all, n)
		}
		end := f.next(start, f.latest(start))
		taken = append(taken, f.files(end)...)
		start = end
	}
	batches, _ := f.drain(start, f.latest(start))
	for _, b := range batches {
		taken = append(taken, b...)
	}
	slices.Sort(all)
	if !slices.Equal(taken, all) {
		t.Errorf("taken = %v, want each of %v once, in order", taken, all)
	}
	if got := f.src.IgnoredFiles(); len(got) != 0 {
		t.Errorf("IgnoredFiles = %v, want none", got)
	}
}

func TestLateNamedFileIsIgnoredAndWarnedOnEveryNext(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "{}\n")
	f.write("c.jsonl", "{}\n")
	start := f.initial()
	end := f.next(start, f.latest(start))
	if got := f.files(end); !slices.Equal(got, []string{"a.jsonl", "c.jsonl"}) {
		t.Fatalf("first batch = %v", got)
	}
	if strings.Contains(f.logs.String(), "ignores") {
		t.Fatalf("warning before any late file: %s", f.logs)
	}

	f.write("b.jsonl", "{}\n") // sorts before c.jsonl, already taken
	f.write("d.jsonl", "{}\n")
	next := f.next(end, f.latest(end))
	if got := f.files(next); !slices.Equal(got, []string{"d.jsonl"}) {
		t.Errorf("second batch = %v, want [d.jsonl]", got)
	}
	if got := f.src.IgnoredFiles(); !slices.Equal(got, []string{"b.jsonl"}) {
		t.Errorf("IgnoredFiles = %v, want [b.jsonl]", got)
	}
	logs := f.logs.String()
	if strings.Count(logs, "level=WARN") != 1 || !strings.Contains(logs, "b.jsonl") {
		t.Errorf("want one warning naming b.jsonl, logs:\n%s", logs)
	}
	// Still ignored, and still said, on the next trigger.
	if again := f.next(next, f.latest(next)); !bytes.Equal(again, next) {
		t.Errorf("Next = %s, want no new data", again)
	}
	if got := strings.Count(f.logs.String(), "level=WARN"); got != 2 {
		t.Errorf("warnings after two Next calls = %d, want 2", got)
	}
}

func TestFilesPresentWhenAProcessResumesAreNotReportedAsIgnored(t *testing.T) {
	f := newFixture(t, 0)
	f.write("a.jsonl", "{}\n")
	f.write("b.jsonl", "{}\n")
	f.write("c.jsonl", "{}\n")
	resumed := Offset{LastFile: "b.jsonl", Files: []string{"b.jsonl"}}.Marshal()
	end := f.next(resumed, f.latest(resumed))
	if got := f.files(end); !slices.Equal(got, []string{"c.jsonl"}) {
		t.Errorf("batch = %v, want [c.jsonl]", got)
	}
	if got := f.src.IgnoredFiles(); len(got) != 0 {
		t.Errorf("IgnoredFiles = %v, want none", got)
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
	if got := f.files(end); !slices.Equal(got, []string{"2026/01/b.jsonl", "a.jsonl"}) {
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
	start := Offset{LastFile: "c", Files: []string{"c"}}.Marshal()
	end := Offset{LastFile: "d", Files: []string{"b", "d"}}.Marshal()
	if _, err := f.src.Splits(context.Background(), start, end); err == nil {
		t.Error("want an error for a file at or before start's lastFile")
	}
}

func TestMalformedOffsetIsAnError(t *testing.T) {
	f := newFixture(t, 0)
	if _, err := f.src.Next(context.Background(), []byte(`{"row":3}`), f.initial()); err == nil {
		t.Error("want an error for a foreign offset")
	}
}
