package file

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

const mib = 1 << 20

// The split size is Spark's maxSplitBytes rule with minPartitions for the
// core count: the batch's bytes / minPartitions, at least 4 MiB, at most
// 128 MiB; a file is cut into ceil(size / split) equal ranges.
func TestSplitSizeAndRangesFollowTheBatchBytes(t *testing.T) {
	for _, c := range []struct {
		total         int64
		minPartitions int
		want          int64
	}{
		{0, 0, 4 * mib},                                 // empty batch: the floor
		{10 * mib, 0, 4 * mib},                          // 10/16 MiB is under the floor
		{5 * 10_500_000, 0, 4 * mib},                    // the bench's 5 files of 10.5 MB: 3.3 MB, the floor
		{64 * mib, 0, 4 * mib},                          // exactly 16 x 4 MiB
		{64*mib + 16, 0, 4*mib + 1},                     // rounded up
		{1 << 30, 0, 64 * mib},                          // 1 GiB / 16
		{4 << 30, 0, 128 * mib},                         // 256 MiB per task is over the cap
		{1 << 30, 4, 128 * mib},                         // fewer partitions, bigger splits, capped
		{1 << 30, 64, 16 * mib},                         // more partitions, smaller splits
		{100 * mib, 1000, 4 * mib},                      // never below the floor
		{5 * 10_500_000, 2, 26_250_000},                 // Spark's rule on 2 cores
		{3 * 100 * mib, 3, 100 * mib},                   // 100 MiB each
		{3*100*mib + 2, 3, 100*mib + 1},                 // rounded up
		{1<<40 + 1, 1, 128 * mib},                       // large batches stay at the cap
		{DefaultMinPartitions * (5 * mib), -1, 5 * mib}, // a negative count is the default
	} {
		if got := splitBytes(c.total, c.minPartitions); got != c.want {
			t.Errorf("splitBytes(%d, %d) = %d, want %d", c.total, c.minPartitions, got, c.want)
		}
	}
	for _, c := range []struct {
		size, split int64
		want        []int64
	}{
		{0, 4 * mib, nil},
		{4 * mib, 4 * mib, nil},                     // at most one split: whole
		{4*mib + 1, 4 * mib, []int64{0, 2*mib + 0}}, // two equal halves
		{10_500_000, 4 * mib, []int64{0, 3_500_000, 7_000_000}},
		{10, 3, []int64{0, 2, 5, 7}}, // ceil(10/3) = 4 ranges: 2, 3, 2, 3 bytes
		{7, 0, nil},                  // no split size: whole (an offset without sizes)
		{7, 1, []int64{0, 1, 2, 3, 4, 5, 6}},
	} {
		if got := fileSplits(c.size, c.split); !slices.Equal(got, c.want) {
			t.Errorf("fileSplits(%d, %d) = %v, want %v", c.size, c.split, got, c.want)
		}
	}
}

// contents are files of every shape a range must cut right: lines of every
// length from 0 (blank) up, CRLF endings, a line longer than the read
// buffer (and than any range), no final newline, a lone newline, none.
func contents() map[string]string {
	var every strings.Builder
	for n := range 40 {
		every.WriteString(strings.Repeat(string(rune('a'+n%26)), n))
		if n%7 == 3 {
			every.WriteString("\r")
		}
		every.WriteString("\n")
	}
	long := strings.Repeat("L", 3*ReadBufferBytes+5)
	return map[string]string{
		"every length":                   every.String(),
		"every length, no final newline": strings.TrimSuffix(every.String(), "\n") + "tail",
		"long line":                      "a\nbb\n" + long + "\nccc\n" + long + "\r\nd",
		"long first line":                long + "\nx\ny\n",
		"one line":                       "only",
		"one line and newline":           "only\n",
		"newlines":                       "\n\n\n\n",
		"empty":                          "",
		"blank lines around":             "\n\n{}\n\n{}\n\n",
	}
}

type readLine struct {
	value string
	line  int64
}

// readResolved reads split through src, resolving offsets as a map task does.
func readResolved(t *testing.T, src *Source, split source.Split) []readLine {
	t.Helper()
	var got []readLine
	var offs []int64
	err := src.Read(context.Background(), split, func(r *source.Record) error {
		got = append(got, readLine{value: string(r.Value)})
		offs = append(offs, r.Offset)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", split.ID, err)
	}
	if err := src.ResolveOffsets(context.Background(), split, offs); err != nil {
		t.Fatalf("resolve offsets of %s: %v", split.ID, err)
	}
	for i := range got {
		got[i].line = offs[i]
	}
	return got
}

func rangeSplit(file string, from, to int64) source.Split {
	b, _ := json.Marshal(splitDesc{Range: &byteRange{File: file, From: from, To: to}})
	return source.Split{ID: fmt.Sprintf("%s@%d", file, from), Desc: b}
}

// A file read through byte-range splits gives the lines the file read
// whole gives, each once, in order, with the same line numbers (after
// ResolveOffsets): for every cut of small files into two ranges, and for
// the cuts fileSplits makes at many split sizes.
func TestRangesReadEveryLineOnceWithItsLineNumber(t *testing.T) {
	store := objstore.NewMem()
	src := New(store, query.FileSource{}, nil)
	ctx := context.Background()
	for name, content := range contents() {
		t.Run(name, func(t *testing.T) {
			if err := store.Put(ctx, "f.jsonl", []byte(content)); err != nil {
				t.Fatal(err)
			}
			whole := readResolved(t, src, source.Split{ID: "f.jsonl", Desc: json.RawMessage(`{"file":"f.jsonl"}`)})
			size := int64(len(content))
			var cuts [][]int64
			if size < 2000 {
				for p := int64(1); p < size; p++ {
					cuts = append(cuts, []int64{0, p})
				}
			}
			for _, sp := range []int64{1, 2, 3, 5, 8, 13, 100, 1000, ReadBufferBytes - 1, ReadBufferBytes, 2*ReadBufferBytes + 3} {
				if s := fileSplits(size, sp); s != nil && len(s) <= 2000 {
					cuts = append(cuts, s)
				}
			}
			for _, starts := range cuts {
				var got []readLine
				for j, from := range starts {
					var to int64
					if j+1 < len(starts) {
						to = starts[j+1]
					}
					got = append(got, readResolved(t, src, rangeSplit("f.jsonl", from, to))...)
				}
				if !slices.Equal(got, whole) {
					i := 0
					for i < min(len(got), len(whole)) && got[i] == whole[i] {
						i++
					}
					t.Fatalf("cut at %v: read %d lines, the whole file %d; they differ from line %d on", starts[:min(len(starts), 10)], len(got), len(whole), i+1)
				}
			}
		})
	}
}

// A range that does not name its file or whose end is not after its start
// is refused; so is a description that is both a file and a range.
func TestBadSplitDescriptionsAreRefused(t *testing.T) {
	src := New(objstore.NewMem(), query.FileSource{}, nil)
	for _, d := range []string{`{}`, `{"range":{"from":0,"to":5}}`, `{"range":{"file":"f","from":5,"to":5}}`,
		`{"range":{"file":"f","from":-1}}`, `{"file":"f","range":{"file":"f","from":0,"to":5}}`, `not json`} {
		err := src.Read(context.Background(), source.Split{ID: "s", Desc: json.RawMessage(d)}, func(*source.Record) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "bad description") {
			t.Errorf("Read of %s: %v, want a bad description", d, err)
		}
	}
}

// Next records the batch's sizes and split size in the end offset, and
// Splits cuts the batch from them alone: a source opened with another
// minPartitions (a restarted driver whose spec changed, an executor
// elsewhere) cuts a logged batch the same way, and a version-2 offset
// (no sizes) gives one split per file, as the build that wrote it did.
func TestSplitsComeFromTheLoggedOffsetAlone(t *testing.T) {
	f := newFixtureOpts(t, query.FileSource{MinPartitions: 4})
	big := strings.Repeat(`{"course_id":"c-1","event_time":"2026-03-01T00:00:00Z"}`+"\n", 200_000) // 11.2 MB
	f.write("a.jsonl", big)
	f.write("b.jsonl", `{"x":1}`+"\n")
	start := f.initial()
	end := f.next(start, f.latest(start))
	o, err := ParseOffset(end)
	if err != nil {
		t.Fatal(err)
	}
	wantSplit := splitBytes(int64(len(big))+8, 4)
	if o.Version != 3 || !slices.Equal(o.Files, []string{"a.jsonl", "b.jsonl"}) || !slices.Equal(o.Sizes, []int64{int64(len(big)), 8}) || o.SplitBytes != wantSplit {
		t.Fatalf("end offset %s: want version 3, both files with sizes, splitBytes %d", end, wantSplit)
	}
	splits, err := f.src.Splits(context.Background(), start, end)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range splits {
		ids = append(ids, s.ID)
	}
	// 11.2 MB at 4 MiB: 3 ranges; the small file whole.
	third := int64(len(big)) / 3
	want := []string{"a.jsonl@0", fmt.Sprintf("a.jsonl@%d", third), fmt.Sprintf("a.jsonl@%d", 2*third), "b.jsonl"}
	if !slices.Equal(ids, want) {
		t.Fatalf("splits %v, want %v", ids, want)
	}
	n := 0
	for _, s := range splits {
		n += len(readResolved(t, f.src, s))
	}
	if n != 200_001 {
		t.Fatalf("the splits read %d lines, want 200001", n)
	}

	f.opts.MinPartitions = 1000
	f.restart()
	again, err := f.src.Splits(context.Background(), start, end)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(again, splits, func(a, b source.Split) bool { return a.ID == b.ID && string(a.Desc) == string(b.Desc) }) {
		t.Fatalf("a source with other options split the logged batch as %v, want %v", again, splits)
	}

	v2 := Offset{Version: 2, Files: o.Files, Seen: o.Seen, NewestMs: o.NewestMs}.Marshal()
	old, err := f.src.Splits(context.Background(), start, v2)
	if err != nil {
		t.Fatal(err)
	}
	if len(old) != 2 || old[0].ID != "a.jsonl" || string(old[0].Desc) != `{"file":"a.jsonl"}` {
		t.Fatalf("a version-2 batch split as %v, want one split per file", old)
	}
}

// A store that lists no sizes gives one split per file.
func TestStoreWithoutSizesGivesOneSplitPerFile(t *testing.T) {
	mem := objstore.NewMem()
	ctx := context.Background()
	if err := mem.Put(ctx, "a.jsonl", []byte(strings.Repeat("{}\n", 3*mib))); err != nil {
		t.Fatal(err)
	}
	src := New(listOnly{mem}, query.FileSource{MinPartitions: 8}, nil)
	start, _ := src.Initial(ctx)
	latest, err := src.Latest(ctx, start, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	end, err := src.Next(ctx, start, latest)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ParseOffset(end)
	splits, err := src.Splits(ctx, start, end)
	if err != nil || len(splits) != 1 || o.Sizes != nil || o.SplitBytes != 0 {
		t.Fatalf("offset %s split as %v (%v), want one whole-file split", end, splits, err)
	}
}

// listOnly hides every optional capability but Get.
type listOnly struct{ objstore.Store }

// A newer format is refused rather than misread.
func TestNewerOffsetVersionIsRefused(t *testing.T) {
	if _, err := ParseOffset([]byte(`{"version":4,"files":[]}`)); err == nil || !strings.Contains(err.Error(), "format version 4 is newer") {
		t.Fatalf("err = %v", err)
	}
}
