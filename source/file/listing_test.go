package file

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// lister drives a source over a counting store with its own clock, as the
// scheduler does (Latest, then Next), and records the batches.
type lister struct {
	t     *testing.T
	store *objstore.Counting
	src   *Source
	now   time.Time
	at    source.Offset
}

func newLister(t *testing.T, st objstore.Store, opts query.FileSource) *lister {
	c := objstore.NewCounting(st)
	l := &lister{t: t, store: c, src: New(c, opts, slog.New(slog.DiscardHandler)), now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	l.at, _ = l.src.Initial(context.Background())
	return l
}

// trigger plans one batch at l.now and returns its files and the objects
// the listings of the trigger returned.
func (l *lister) trigger() (files []string, listed int64) {
	l.t.Helper()
	ctx := context.Background()
	l.store.Reset()
	limit, err := l.src.Latest(ctx, l.at, l.now)
	if err != nil {
		l.t.Fatal(err)
	}
	end, err := l.src.Next(ctx, l.at, limit)
	if err != nil {
		l.t.Fatal(err)
	}
	listed = l.store.Stats()[objstore.OpList].Objects
	if bytes.Equal(end, l.at) {
		return nil, listed
	}
	o, err := ParseOffset(end)
	if err != nil {
		l.t.Fatal(err)
	}
	l.at = end
	return o.Files, listed
}

// put writes name with a modification time (Mem store) t.
func put(t *testing.T, st objstore.Store, name string, at time.Time) {
	t.Helper()
	if err := st.Put(context.Background(), name, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if m, ok := st.(*objstore.Mem); ok {
		m.SetModTime(name, at)
	}
}

func hourDir(h int) string { return fmt.Sprintf("date=2026-12-%02d/hour=%02d/", 1+h/24, h%24) }

// With fullListingInterval, a trigger between full listings lists only
// the newest directory taken and those after it: the objects listed do not
// grow with the files already taken (3,000 here), and the batches are
// those of a full listing at every trigger.
func TestPartialListingDoesNotGrowWithFilesTaken(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	full := objstore.NewMem()
	part := objstore.NewMem()
	lf := newLister(t, full, query.FileSource{})
	lp := newLister(t, part, query.FileSource{FullListingInterval: query.Duration(time.Hour)})
	write := func(name string, at time.Time) { put(t, full, name, at); put(t, part, name, at) }
	// 100 hours of 30 files each, taken in one first batch.
	for h := range 100 {
		for i := range 30 {
			write(fmt.Sprintf("%spart-%03d.jsonl", hourDir(h), i), base.Add(time.Duration(h)*time.Hour+time.Duration(i)*time.Second))
		}
	}
	if a, b := mustTrigger(t, lf), mustTrigger(t, lp); len(a) != 3000 || !slices.Equal(a, b) {
		t.Fatalf("first batches: %d and %d files", len(a), len(b))
	}
	for h := 100; h < 130; h++ {
		// Two files in the current hour, then the next hour starts.
		for i := range 2 {
			write(fmt.Sprintf("%slate-%d.jsonl", hourDir(h-1), i), base.Add(time.Duration(h)*time.Hour+time.Duration(i)*time.Second))
		}
		write(hourDir(h)+"part-000.jsonl", base.Add(time.Duration(h)*time.Hour+time.Minute))
		lf.now = lf.now.Add(time.Minute)
		lp.now = lp.now.Add(time.Minute)
		a, fullListed := lf.trigger()
		b, partListed := lp.trigger()
		if !slices.Equal(a, b) || len(a) != 3 {
			t.Fatalf("hour %d: full listing took %v, partial %v", h, a, b)
		}
		if fullListed < 3000 {
			t.Fatalf("hour %d: the full listing returned %d objects", h, fullListed)
		}
		// The newest directory taken (the previous hour: one file, plus
		// the two late ones; at first its 30 files) and the new hour's.
		if h == 100 && partListed > 33 || h > 100 && partListed > 4 {
			t.Errorf("hour %d: the partial listing returned %d objects, want at most 4 (the newest directory and after)", h, partListed)
		}
	}
}

func mustTrigger(t *testing.T, l *lister) []string {
	t.Helper()
	files, _ := l.trigger()
	return files
}

// A file that lands late in an older directory, within maxFileAge, is
// read at the latest at the first trigger after the next full listing is
// due, and once; a new process lists in full at its first trigger.
func TestLateFileInAnOlderDirectoryIsReadAtTheNextFullListing(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st := objstore.NewMem()
	opts := query.FileSource{FullListingInterval: query.Duration(10 * time.Minute), MaxFileAge: query.Duration(24 * time.Hour)}
	l := newLister(t, st, opts)
	for h := range 5 {
		put(t, st, hourDir(h)+"a.jsonl", base.Add(time.Duration(h)*time.Hour))
	}
	if got := mustTrigger(t, l); len(got) != 5 {
		t.Fatalf("first batch = %v", got)
	}
	// Late, in hour 1, with a recent modification time.
	put(t, st, hourDir(1)+"late.jsonl", base.Add(5*time.Hour))
	var got []string
	found := -1
	for i := 1; i <= 20 && len(got) == 0; i++ {
		l.now = l.now.Add(time.Minute)
		got = mustTrigger(t, l)
		found = i
	}
	if !slices.Equal(got, []string{hourDir(1) + "late.jsonl"}) {
		t.Fatalf("the late file was not read within two full-listing intervals: %v", got)
	}
	// Triggers every minute: the partial listings (from hour 4) do not
	// see it; the full listing due 10 minutes after the last one does.
	if found != 10 {
		t.Errorf("the late file was read at trigger %d, want 10 (the first full listing)", found)
	}
	l.now = l.now.Add(time.Hour)
	if again := mustTrigger(t, l); len(again) != 0 {
		t.Errorf("read again: %v", again)
	}
	// A restarted driver: the first trigger lists in full and finds a
	// late file at once.
	put(t, st, hourDir(0)+"late2.jsonl", base.Add(5*time.Hour))
	restarted := newLister(t, st, opts)
	restarted.at = l.at
	restarted.now = l.now.Add(time.Second)
	if got := mustTrigger(t, restarted); !slices.Equal(got, []string{hourDir(0) + "late2.jsonl"}) {
		t.Errorf("after a restart: %v", got)
	}
}

// A backlog capped by maxFilesPerTrigger is taken oldest first across
// partial listings, including files that sort before the newest directory
// taken (kept from the last listing).
func TestBacklogBeforeTheListingStartIsTakenFromTheLastListing(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	full := objstore.NewMem()
	part := objstore.NewMem()
	lf := newLister(t, full, query.FileSource{MaxFilesPerTrigger: 3})
	lp := newLister(t, part, query.FileSource{MaxFilesPerTrigger: 3, FullListingInterval: query.Duration(time.Hour)})
	// Names out of modification-time order: z-dir files are older.
	n := 0
	for _, d := range []string{"z/", "a/", "m/"} {
		for i := range 4 {
			at := base.Add(time.Duration(n) * time.Second)
			put(t, full, fmt.Sprintf("%s%d.jsonl", d, i), at)
			put(t, part, fmt.Sprintf("%s%d.jsonl", d, i), at)
			n++
		}
	}
	var a, b [][]string
	for range 6 {
		lf.now = lf.now.Add(time.Minute)
		lp.now = lp.now.Add(time.Minute)
		a = append(a, mustTrigger(t, lf))
		b = append(b, mustTrigger(t, lp))
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("batches with partial listings %v, want those of full listings %v", b, a)
	}
	if got := strings.Join(slices.Concat(b...), " "); strings.Count(got, ".jsonl") != 12 {
		t.Errorf("took %s, want all 12 files", got)
	}
}

// The same on the S3-compatible server: ListObjectsV2 with StartAfter
// returns only the newest directory and after.
func TestPartialListingOnS3(t *testing.T) {
	srv := s3test.Start(t)
	st := srv.Store(t, "listing", "in/")
	ctx := context.Background()
	l := newLister(t, st, query.FileSource{FullListingInterval: query.Duration(time.Hour)})
	for h := range 40 {
		for i := range 50 {
			if err := st.Put(ctx, fmt.Sprintf("%s%03d.jsonl", hourDir(h), i), []byte("{}\n")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := mustTrigger(t, l); len(got) != 2000 {
		t.Fatalf("first batch took %d files", len(got))
	}
	for h := 40; h < 43; h++ {
		if err := st.Put(ctx, hourDir(h)+"000.jsonl", []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		// S3 times have second resolution: the new file must be newer.
		l.now = l.now.Add(time.Minute)
		var got []string
		var listed int64
		for deadline := time.Now().Add(30 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
			got, listed = l.trigger()
		}
		if !slices.Equal(got, []string{hourDir(h) + "000.jsonl"}) {
			t.Fatalf("hour %d: took %v", h, got)
		}
		if h > 40 && listed > 2 {
			t.Errorf("hour %d: the listing returned %d objects, want at most 2", h, listed)
		}
	}
}

// lineStream is a streamed object of n lines of width bytes, generated as
// it is read; it fails a Read that would put it more than ahead bytes
// beyond what the consumer has seen (consumed, set by the test).
type lineStream struct {
	n, width, ahead int
	produced        int
	consumed        *int
	maxAhead        int
}

func (s *lineStream) Read(b []byte) (int, error) {
	total := s.n * s.width
	if s.produced >= total {
		return 0, io.EOF
	}
	k := min(len(b), total-s.produced)
	if s.produced+k-*s.consumed > s.ahead {
		return 0, fmt.Errorf("asked for %d bytes at %d with %d consumed: more than %d ahead", k, s.produced, *s.consumed, s.ahead)
	}
	for i := range k {
		p := s.produced + i
		if p%s.width == s.width-1 {
			b[i] = '\n'
		} else {
			b[i] = 'a' + byte(p/s.width%26)
		}
	}
	s.produced += k
	s.maxAhead = max(s.maxAhead, s.produced-*s.consumed)
	return k, nil
}

func (s *lineStream) Close() error { return nil }

// streamStore serves one generated object by streaming only (Get fails).
type streamStore struct {
	objstore.Store
	open func() io.ReadCloser
}

func (s streamStore) Get(ctx context.Context, key string) ([]byte, error) {
	return nil, fmt.Errorf("get %s: a source file must be streamed, not read whole", key)
}

func (s streamStore) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.open(), nil
}

func (s streamStore) PutStream(ctx context.Context, key string, r io.Reader) error {
	return objstore.PutReader(ctx, s.Store, key, r)
}

// A 64 MiB file is decoded as it arrives: the source never reads more
// than its buffer ahead of the line it hands out, and every line comes
// out whole and in order.
func TestReadStreamsAFileWithABoundedBuffer(t *testing.T) {
	const width, n = 1000, 64 << 10 // 64 MiB
	consumed := 0
	ls := &lineStream{n: n, width: width, ahead: ReadBufferBytes + width, consumed: &consumed}
	src := New(streamStore{Store: objstore.NewMem(), open: func() io.ReadCloser { return ls }}, query.FileSource{Path: "gen"}, nil)
	desc, _ := json.Marshal(splitDesc{File: "big.jsonl"})
	var lines int64
	err := src.Read(context.Background(), source.Split{ID: "big.jsonl", Desc: desc}, func(r *source.Record) error {
		lines++
		if r.Offset != lines || len(r.Value) != width-1 || r.Value[0] != 'a'+byte((lines-1)%26) {
			return fmt.Errorf("line %d: offset %d, %d bytes starting %q", lines, r.Offset, len(r.Value), r.Value[:1])
		}
		consumed += width
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lines != n {
		t.Fatalf("read %d lines, want %d", lines, n)
	}
	t.Logf("read %d MiB holding at most %d KiB ahead", n*width>>20, ls.maxAhead>>10)
}

// A line longer than the read buffer is gathered whole; one longer than
// MaxLineBytes is an error naming the file and line.
func TestReadGathersLongLinesAndRefusesEndlessOnes(t *testing.T) {
	long := strings.Repeat("x", 3*ReadBufferBytes+7)
	var got []string
	err := readLines(context.Background(), strings.NewReader("a\n"+long+"\r\nb"), "f.jsonl", nil, func(r *source.Record) error {
		got = append(got, string(r.Value))
		return nil
	})
	if err != nil || len(got) != 3 || got[0] != "a" || got[1] != long || got[2] != "b" {
		t.Fatalf("lines = %d (%v)", len(got), err)
	}
	endless := io.LimitReader(repeatReader('y'), MaxLineBytes+1)
	err = readLines(context.Background(), io.MultiReader(strings.NewReader("{}\n"), endless), "f.jsonl", nil, func(*source.Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "f.jsonl: line 2 is longer than") {
		t.Fatalf("err = %v, want the line named", err)
	}
}

type repeatReader byte

func (r repeatReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(r)
	}
	return len(b), nil
}

// Progress shows an offset of bounded size, however many names it keeps.
func TestProgressOffsetIsBounded(t *testing.T) {
	o := Offset{Version: offsetVersion, Seen: map[string]int64{}, NewestMs: 7}
	for i := range 5000 { // about 260 KiB
		n := fmt.Sprintf("date=2026-12-01/part-%05d.jsonl", i)
		o.Files = append(o.Files, n)
		o.Seen[n] = int64(i)
	}
	full := o.Marshal()
	src := New(objstore.NewMem(), query.FileSource{}, nil)
	got := src.ProgressOffset(full)
	var p progressOffset
	if err := json.Unmarshal(got, &p); err != nil {
		t.Fatal(err)
	}
	if len(got) > 8<<10 || p.NumFiles != 5000 || p.NumSeen != 5000 || len(p.Files) != progressFiles || p.Files[0] != o.Files[0] || p.NewestMs != 7 {
		t.Errorf("progress offset of %d bytes (the offset has %d): %+v", len(got), len(full), p)
	}
	// A small offset shows as it is.
	small := Offset{Version: offsetVersion, Files: o.Files[:3], Seen: map[string]int64{o.Files[0]: 0}}.Marshal()
	if got := src.ProgressOffset(small); !bytes.Equal(got, small) {
		t.Errorf("a small offset shows as %s", got)
	}
}
