package e2e

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/optest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

// The tile in SQL and in YAML, run side by side by one driver serve on
// two executor processes over the same input, write the same Parquet
// files byte for byte (the same rows, columns and types), and both
// equal the oracle.
func TestDistributedTileInSQLWritesTheYAMLTilesFiles(t *testing.T) {
	in, want := tileFiles(t, 51, 6000, 250)
	y, s := localLocations(t, "yaml"), localLocations(t, "sql")
	ys := tileSpec(in, y, 4)
	ss := tiletest.SQLSpec(in, s.Sink, s.Checkpoint)
	ss.Name = "course-activity-tile-sql"
	ss.Source.File.MaxFilesPerTrigger = 4
	c := startCluster(t, y, 2, []string{"--exit-when-done"}, writeSpec(t, ys), writeSpec(t, ss))
	if err := c.driver.Wait(180 * time.Second); err != nil {
		t.Fatalf("driver serve failed: %v\n%s", err, c.logs())
	}
	for _, l := range []locations{y, s} {
		if d := sinkDiff(t, l, want); d != "" {
			t.Fatalf("%s: output differs from the oracle:\n%s\n%s", l.Sink, d, c.logs())
		}
	}
	yf, sf := committedFiles(t, y), committedFiles(t, s)
	if len(yf) == 0 || len(yf) != len(sf) {
		t.Fatalf("YAML committed %d files, SQL %d", len(yf), len(sf))
	}
	var names []string
	for n := range yf {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if string(yf[n]) != string(sf[n]) {
			t.Errorf("%s differs between the tile in YAML and in SQL (or is missing)", n)
		}
	}
	if !strings.Contains(c.driver.Logs(), `executors=2`) {
		t.Fatalf("the batches did not run on 2 executors:\n%s", c.driver.Logs())
	}
}

// opQuery is one deduplication or session-window query of the operator
// test, with the oracle's rows and how to read the sink's.
type opQuery struct {
	spec  query.Spec
	cols  []string
	want  []string
	where locations
}

// Deduplication and session windows, in YAML and in SQL, on memory and
// pebble state, run by a driver serve on two executor processes: the
// driver is SIGKILLed after logging batch 3 of the first query to get
// there (the others are wherever they are), restarted at the same
// address; the executors register again, the logged batch re-runs as
// logged, and every query's committed rows equal its brute-force oracle
// (internal/testutil/optest).
func TestDistributedDedupAndSessionsSurviveADriverKill(t *testing.T) {
	const delay, gap = 3 * time.Minute, 2 * time.Minute
	events := optest.Events(23, 8, 150, 4*time.Minute)
	in := filepath.Join(t.TempDir(), "in")
	if err := optest.WriteFiles(in, events); err != nil {
		t.Fatal(err)
	}
	all := func(optest.Event) bool { return true }
	var qs []opQuery
	add := func(name, store string, set func(s *query.Spec), cols, want []string) {
		l := localLocations(t, name)
		s := optest.Spec(in, l.Sink, l.Checkpoint, delay)
		s.Name, s.StateStore = name, store
		set(&s)
		qs = append(qs, opQuery{spec: s, cols: cols, want: want, where: l})
	}
	kept, _ := optest.Dedup(events, delay, all)
	add("dedup-yaml", "memory", func(s *query.Spec) { s.Dedup = &query.Dedup{Keys: []string{"event_id"}} },
		[]string{"event_id", "course_id", "event_time", "seq"}, optest.EventRows(kept))
	keptSQL, _ := optest.Dedup(events, delay, func(e optest.Event) bool { return e.Course != "c-3" })
	add("dedup-sql", "pebble", func(s *query.Spec) {
		s.SQL = "SELECT event_id, course_id, event_time, seq FROM drop_duplicates_within_watermark(TABLE(events), event_id) WHERE course_id != 'c-3'"
	}, []string{"event_id", "course_id", "event_time", "seq"}, optest.EventRows(keptSQL))
	ss := optest.Sessions(events, gap, delay, func(e optest.Event) string { return e.Course }, all, all, func(optest.Session) bool { return true })
	add("sessions-yaml", "pebble", func(s *query.Spec) {
		s.Aggregate = &query.Aggregate{SessionWindow: &query.SessionWindow{Column: "event_time", Gap: query.Duration(gap)}, GroupBy: []string{"course_id"},
			Measures: []query.Measure{{Name: "n", Fn: query.FnCount}, {Name: "total", Fn: query.FnSum, Column: "seq"}}}
	}, []string{"session_window_start", "session_window_end", "course_id", "n", "total"},
		optest.SessionRows(ss, "session_window_start", "session_window_end", "course_id", "n", "total"))
	notL0 := func(e optest.Event) bool { return e.Lesson != "l-0" }
	ssSQL := optest.Sessions(events, gap, delay, func(e optest.Event) string { return strings.ToUpper(e.Course) }, notL0, notL0, func(s optest.Session) bool { return s.Count > 1 })
	add("sessions-sql", "memory", func(s *query.Spec) {
		s.SQL = `SELECT session_window.start AS s_start, session_window.end AS s_end, upper(course_id) AS course, count(*) AS n, sum(seq) AS total
FROM events WHERE lesson_id != 'l-0'
GROUP BY session_window(event_time, '2 minutes'), upper(course_id) HAVING count(*) > 1`
	}, []string{"s_start", "s_end", "course", "n", "total"}, optest.SessionRows(ssSQL, "s_start", "s_end", "course", "n", "total"))

	var specs []string
	for _, q := range qs {
		specs = append(specs, writeSpec(t, q.spec))
	}
	addr := freePort(t)
	l := localLocations(t, "cluster")
	c := startClusterWith(t, l, 2, []string{"--listen", addr}, []string{"SLUICE_FAULT=after-offsets:3"}, specs...)
	if err := c.driver.Wait(120 * time.Second); !killedBySignal(err) {
		t.Fatalf("driver was not killed after logging a batch 3 (exit %v):\n%s", err, c.logs())
	}
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	second := NewProc(t, "driver", bins.driver, append(c.driver.args, "--exit-when-done", "--progress-json", progress)...).Env(l.Env...)
	second.Start()
	if err := second.Wait(180 * time.Second); err != nil {
		t.Fatalf("restarted driver failed: %v\n%s\n%s", err, second.Logs(), c.logs())
	}
	reruns := 0
	for _, p := range readProgress(t, progress) {
		if p.Rerun {
			reruns++
		}
	}
	if reruns == 0 {
		t.Fatalf("the restarted driver re-ran no logged batch")
	}
	for _, q := range qs {
		cols, rows, err := parquet.ReadCommitted(context.Background(), q.where.store(t, q.where.Sink))
		if err != nil {
			t.Fatal(err)
		}
		got, err := optest.Rows(cols, rows, q.cols...)
		if err != nil {
			t.Fatal(err)
		}
		if len(q.want) < 20 {
			t.Fatalf("%s: the oracle writes %d rows: the input tests too little", q.spec.Name, len(q.want))
		}
		if d := optest.Diff(q.want, got); d != "" {
			t.Errorf("%s: committed rows differ from the oracle:\n%s", q.spec.Name, d)
		}
	}
	if !strings.Contains(second.Logs(), `executors=2`) && !strings.Contains(c.driver.Logs(), `executors=2`) {
		t.Errorf("the batches did not run on 2 executors")
	}
}
