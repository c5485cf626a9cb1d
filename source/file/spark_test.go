package file

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Planning cases whose batches are computed by Spark 3.5's
// FileStreamSource.fetchMaxOffset, written out per case: new files sorted
// by modification time (newest first with latestFirst), at most
// maxFilesPerTrigger a batch; with a cap (not latestFirst, not
// availableNow) the unselected files of a listing are cached when they are
// at least 0.2 × the cap (discardCachedInputRatio), and while the cache is
// not empty a batch takes only from it.
func TestFilePlanningIsSparks(t *testing.T) {
	type step struct {
		write []string // files written before the trigger, one second apart
		want  []string // the batch
	}
	cases := []struct {
		name         string
		opts         query.FileSource
		availableNow bool
		steps        []step
	}{
		{"oldest first, capped", query.FileSource{MaxFilesPerTrigger: 2}, false, []step{
			{write: []string{"c", "a", "b"}, want: []string{"c", "a"}},
			{want: []string{"b"}},
		}},
		// 8 new files, cap 5: batch f1-f5; 3 unselected >= 5*0.2 are cached.
		// g1-g4 arrive: the next batch is the 3 cached files only (Spark
		// does not list while its cache holds files), then g1-g4.
		{"cache of unread files", query.FileSource{MaxFilesPerTrigger: 5}, false, []step{
			{write: []string{"f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8"}, want: []string{"f1", "f2", "f3", "f4", "f5"}},
			{write: []string{"g1", "g2", "g3", "g4"}, want: []string{"f6", "f7", "f8"}},
			{want: []string{"g1", "g2", "g3", "g4"}},
		}},
		// 11 files, cap 10: 1 unselected < 10*0.2 = 2: discarded, so the
		// next batch lists again and takes f11 with the new files.
		{"too few unread files are not cached", query.FileSource{MaxFilesPerTrigger: 10}, false, []step{
			{write: []string{"f01", "f02", "f03", "f04", "f05", "f06", "f07", "f08", "f09", "f10", "f11"},
				want: []string{"f01", "f02", "f03", "f04", "f05", "f06", "f07", "f08", "f09", "f10"}},
			{write: []string{"g1", "g2"}, want: []string{"f11", "g1", "g2"}},
		}},
		// 12 files, cap 10: 2 unselected = 10*0.2: cached.
		{"just enough unread files are cached", query.FileSource{MaxFilesPerTrigger: 10}, false, []step{
			{write: []string{"f01", "f02", "f03", "f04", "f05", "f06", "f07", "f08", "f09", "f10", "f11", "f12"},
				want: []string{"f01", "f02", "f03", "f04", "f05", "f06", "f07", "f08", "f09", "f10"}},
			{write: []string{"g1", "g2"}, want: []string{"f11", "f12"}},
			{want: []string{"g1", "g2"}},
		}},
		// A cache is used up over several batches, each of the cap.
		{"a cache over several batches", query.FileSource{MaxFilesPerTrigger: 2}, false, []step{
			{write: []string{"f1", "f2", "f3", "f4", "f5"}, want: []string{"f1", "f2"}},
			{write: []string{"g1"}, want: []string{"f3", "f4"}},
			{want: []string{"f5"}},
			{want: []string{"g1"}},
		}},
		// latestFirst: newest first, no cache.
		{"latestFirst keeps no cache", query.FileSource{MaxFilesPerTrigger: 2, LatestFirst: true}, false, []step{
			{write: []string{"f1", "f2", "f3"}, want: []string{"f3", "f2"}},
			{write: []string{"g1"}, want: []string{"g1", "f1"}},
		}},
		// No cap: every new file.
		{"no cap", query.FileSource{}, false, []step{
			{write: []string{"f1", "f2", "f3"}, want: []string{"f1", "f2", "f3"}},
			{write: []string{"g1"}, want: []string{"g1"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixtureOpts(t, c.opts)
			at := f.initial()
			for i, s := range c.steps {
				for _, n := range s.write {
					f.write(n, "{}\n")
				}
				end := f.trigger(at)
				var got []string
				if !bytes.Equal(end, at) {
					got = f.files(end)
				}
				if !slices.Equal(got, s.want) {
					t.Fatalf("trigger %d: batch %v, want %v", i, got, s.want)
				}
				at = end
			}
		})
	}
}

// availableNow drains the snapshot it took at start in batches of the cap,
// with no cache: Spark reads its prefetched listing.
func TestAvailableNowTakesTheSnapshotInCapsWithoutCache(t *testing.T) {
	f := newFixtureOpts(t, query.FileSource{MaxFilesPerTrigger: 2})
	f.src.SetAvailableNow()
	for i := range 5 {
		f.write(fmt.Sprintf("f%d", i), "{}\n")
	}
	start := f.initial()
	limit := f.latest(start)
	var batches [][]string
	for range 10 {
		f.write(fmt.Sprintf("late%d", len(batches)), "{}\n") // not in the snapshot
		end := f.next(start, limit)
		if bytes.Equal(end, start) {
			break
		}
		o, _ := ParseOffset(end)
		if o.Unread != nil {
			t.Fatalf("availableNow batch %s keeps a cache", end)
		}
		batches = append(batches, o.Files)
		start = end
	}
	want := [][]string{{"f0", "f1"}, {"f2", "f3"}, {"f4"}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", batches, want)
	}
}

// The cache is in the offset: a restarted source goes on with it (Spark's
// is in memory only; docs/spark-differences.md#file-unread-cache).
func TestUnreadCacheSurvivesARestart(t *testing.T) {
	f := newFixture(t, 2)
	for _, n := range []string{"f1", "f2", "f3"} {
		f.write(n, "{}\n")
	}
	var at source.Offset = f.trigger(f.initial())
	f.restart()
	f.write("g0", "{}\n")
	if got := f.files(f.trigger(at)); !slices.Equal(got, []string{"f3"}) {
		t.Fatalf("after a restart: batch %v, want the cached f3", got)
	}
}
