package microbatch_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/optest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

const (
	opDelay = 3 * time.Minute
	opGap   = 2 * time.Minute
)

// opRun is one way to run a query of the operator tests: clean, or
// crashed at a point of batch 3 then run again on the same checkpoint
// (before-sink-commit and after-sink-commit re-run the logged batch 3 on
// the state batch 2 committed, the second without rewriting its sink
// output; after-commit restarts in the middle, at batch 4).
var opRuns = []string{"", "after-offsets", "before-sink-commit", "after-sink-commit", "after-commit"}

// runOps runs spec in every state store and every opRuns way, and checks
// each output with check (and the progress of the clean runs with
// checkProgress).
func runOps(t *testing.T, spec func(in, out, cp string) query.Spec, in string, check func(t *testing.T, out string), checkProgress func(t *testing.T, ps []*progress.Report)) {
	for _, store := range []string{"memory", "pebble"} {
		for _, crash := range opRuns {
			name := store + "/clean"
			if crash != "" {
				name = store + "/" + crash
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "out")
				s := spec(in, out, filepath.Join(dir, "cp"))
				s.StateStore = store
				if crash != "" {
					runUntilCrash(t, s, crash, 3)
				}
				ps := run(t, s, microbatch.Options{})
				if crash == "" {
					checkProgress(t, ps)
				} else if crash != "after-commit" && (len(ps) == 0 || ps[0].BatchID != 3 || !ps[0].Rerun) {
					t.Fatalf("the restart should re-run batch 3 as logged first, got %v", batches(ps))
				}
				check(t, out)
			})
		}
	}
}

func batches(ps []*progress.Report) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%d(rerun=%v nodata=%v)", p.BatchID, p.Rerun, p.NoData))
	}
	return strings.Join(s, " ")
}

func sinkRows(t *testing.T, out string, names ...string) []string {
	t.Helper()
	_, cols, rows := committedParquet(t, out)
	got, err := optest.Rows(cols, rows, names...)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// dupsDropped is the numDroppedDuplicateRows the reports' dedup operator
// reports, in sum.
func dupsDropped(t *testing.T, ps []*progress.Report) int64 {
	t.Helper()
	var n int64
	for _, p := range ps {
		if len(p.StateOperators) != 1 || p.StateOperators[0].OperatorName != "dedupeWithinWatermark" {
			t.Fatalf("batch %d: state operators %+v, want one dedupeWithinWatermark", p.BatchID, p.StateOperators)
		}
		m, ok := p.StateOperators[0].CustomMetrics["numDroppedDuplicateRows"]
		if !ok {
			t.Fatalf("batch %d: no numDroppedDuplicateRows", p.BatchID)
		}
		n += m
	}
	return n
}

// Deduplication within the watermark (YAML dedup:, and SQL
// drop_duplicates_within_watermark with a filter and a projection after
// it), in one process, on memory and pebble state, clean, across a
// re-run of a logged batch and across a restart in the middle: the rows
// written equal the oracle (optest.Dedup, rule 24 by brute force), and
// a clean run reports the oracle's count of dropped duplicates.
func TestDedupEqualsTheOracleAcrossRestartsAndStores(t *testing.T) {
	events := optest.Events(5, 8, 150, 4*time.Minute)
	in := filepath.Join(t.TempDir(), "in")
	if err := optest.WriteFiles(in, events); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec func(in, out, cp string) query.Spec
		keep func(optest.Event) bool
	}{
		{"yaml", func(in, out, cp string) query.Spec {
			s := optest.Spec(in, out, cp, opDelay)
			s.Dedup = &query.Dedup{Keys: []string{"event_id"}}
			return s
		}, func(optest.Event) bool { return true }},
		{"sql", func(in, out, cp string) query.Spec {
			s := optest.Spec(in, out, cp, opDelay)
			s.SQL = "SELECT event_id, course_id, event_time, seq FROM drop_duplicates_within_watermark(TABLE(events), event_id) WHERE course_id != 'c-3'"
			return s
		}, func(e optest.Event) bool { return e.Course != "c-3" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, dups := optest.Dedup(events, opDelay, tc.keep)
			want := optest.EventRows(kept)
			total := 0
			for _, b := range events {
				total += len(b)
			}
			all, _ := optest.Dedup(events, opDelay, func(optest.Event) bool { return true })
			if late := total - int(dups) - len(all); dups < 100 || late < 5 {
				t.Fatalf("the oracle drops %d duplicates and %d late rows of %d: the input tests too little", dups, late, total)
			}
			runOps(t, tc.spec, in, func(t *testing.T, out string) {
				if d := optest.Diff(want, sinkRows(t, out, "event_id", "course_id", "event_time", "seq")); d != "" {
					t.Fatalf("output differs from the oracle:\n%s", d)
				}
			}, func(t *testing.T, ps []*progress.Report) {
				if got := dupsDropped(t, ps); got != dups {
					t.Errorf("numDroppedDuplicateRows %d in all, the oracle drops %d", got, dups)
				}
				if last := ps[len(ps)-1]; !last.NoData {
					t.Errorf("the last batch (%d) has data: a dedup runs a no-data batch to evict after the watermark rose", last.BatchID)
				}
			})
		})
	}
}

// Session windows (YAML aggregate.sessionWindow, and SQL session_window
// with a filter below the watermark, a computed key and HAVING), in one
// process, on memory and pebble state, clean, across a re-run of a logged
// batch and across a restart in the middle: the rows written equal the
// oracle (optest.Sessions, rules 7, 8 and 23 by brute force).
func TestSessionWindowsEqualTheOracleAcrossRestartsAndStores(t *testing.T) {
	events := optest.Events(9, 8, 150, 4*time.Minute)
	in := filepath.Join(t.TempDir(), "in")
	if err := optest.WriteFiles(in, events); err != nil {
		t.Fatal(err)
	}
	all := func(optest.Event) bool { return true }
	for _, tc := range []struct {
		name        string
		spec        func(in, out, cp string) query.Spec
		cols        []string
		key         func(optest.Event) string
		counts      func(optest.Event) bool
		having      func(optest.Session) bool
		start, end  string
		keyCol, sum string
	}{
		{"yaml", func(in, out, cp string) query.Spec {
			s := optest.Spec(in, out, cp, opDelay)
			s.Aggregate = &query.Aggregate{SessionWindow: &query.SessionWindow{Column: "event_time", Gap: query.Duration(opGap)}, GroupBy: []string{"course_id"},
				Measures: []query.Measure{{Name: "n", Fn: query.FnCount}, {Name: "total", Fn: query.FnSum, Column: "seq"}}}
			return s
		}, nil, func(e optest.Event) string { return e.Course }, all, func(optest.Session) bool { return true },
			"session_window_start", "session_window_end", "course_id", "total"},
		{"sql", func(in, out, cp string) query.Spec {
			s := optest.Spec(in, out, cp, opDelay)
			s.SQL = `SELECT session_window.start AS s_start, session_window.end AS s_end, upper(course_id) AS course, count(*) AS n, sum(seq) AS total
FROM events WHERE lesson_id != 'l-0'
GROUP BY session_window(event_time, '2 minutes'), upper(course_id) HAVING count(*) > 1`
			return s
		}, nil, func(e optest.Event) string { return strings.ToUpper(e.Course) }, func(e optest.Event) bool { return e.Lesson != "l-0" },
			func(s optest.Session) bool { return s.Count > 1 }, "s_start", "s_end", "course", "total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := optest.Sessions(events, opGap, opDelay, tc.key, tc.counts, tc.counts, tc.having)
			want := optest.SessionRows(ss, tc.start, tc.end, tc.keyCol, "n", tc.sum)
			merged := 0
			for _, s := range ss {
				if s.Count > 2 {
					merged++
				}
			}
			if len(ss) < 20 || merged < 10 {
				t.Fatalf("the oracle writes %d sessions, %d of more than two rows: the input tests too little", len(ss), merged)
			}
			runOps(t, tc.spec, in, func(t *testing.T, out string) {
				if d := optest.Diff(want, sinkRows(t, out, tc.start, tc.end, tc.keyCol, "n", tc.sum)); d != "" {
					t.Fatalf("output differs from the oracle:\n%s", d)
				}
			}, func(t *testing.T, ps []*progress.Report) {
				if len(ps) < len(events) {
					t.Errorf("%d batches for %d files", len(ps), len(events))
				}
			})
		})
	}
}

var _ = ids.BatchID(0)
