// Package tiletest makes course-activity tile inputs for tests and
// benchmarks, and computes the expected output independently of the
// engine: an oracle that shares no code with agg or eventtime.
package tiletest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// Event is one tile event.
type Event struct {
	ID     string
	Course string
	Lesson string
	Time   time.Time
}

// JSON renders the event as the topic's JSON line.
func (e Event) JSON() string {
	return fmt.Sprintf(`{"event_id":%q,"course_id":%q,"lesson_id":%q,"event_time":%q}`, e.ID, e.Course, e.Lesson, e.Time.UTC().Format(time.RFC3339Nano))
}

// Base is the event time of the first generated event.
var Base = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Events returns n events starting at Base, one every step, each shifted
// back by a random amount below disorder (so no event is later than
// disorder behind the newest), over courses courses; deterministic in seed.
func Events(seed uint64, n int, step, disorder time.Duration, courses int) []Event {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]Event, n)
	for i := range out {
		t := Base.Add(time.Duration(i) * step)
		if disorder > 0 {
			t = t.Add(-time.Duration(r.Int64N(int64(disorder))))
		}
		out[i] = Event{
			ID:     fmt.Sprintf("e-%d-%d", seed, i),
			Course: fmt.Sprintf("c-%02d", r.IntN(courses)),
			Lesson: fmt.Sprintf("l-%d", r.IntN(5)),
			Time:   t.Truncate(time.Millisecond),
		}
	}
	return out
}

// WriteFiles writes events as JSON-lines files of perFile events each,
// named in order (part-00000.jsonl, ...), into dir.
func WriteFiles(dir string, events []Event, perFile int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for f := 0; f*perFile < len(events); f++ {
		var b strings.Builder
		for _, e := range events[f*perFile : min(len(events), (f+1)*perFile)] {
			b.WriteString(e.JSON())
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d.jsonl", f)), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Window is one expected output row.
type Window struct {
	Start  time.Time
	Course string
	Count  int64
}

func (w Window) String() string {
	return fmt.Sprintf("%s %s %d", w.Start.UTC().Format(time.RFC3339), w.Course, w.Count)
}

// Oracle returns the windows an append-mode tile emits for events: counts
// per (tumbling window, course), for windows whose end is at or before the
// final watermark (max event time - delay), assuming no event is late
// (disorder below delay). Sorted by start, then course.
func Oracle(events []Event, size, delay time.Duration) []Window {
	counts := map[Window]int64{}
	var maxT time.Time
	for _, e := range events {
		if e.Time.After(maxT) {
			maxT = e.Time
		}
		start := time.UnixMicro(floor(e.Time.UnixMicro(), size.Microseconds())).UTC()
		counts[Window{Start: start, Course: e.Course}]++
	}
	wm := maxT.Truncate(time.Millisecond).Add(-delay)
	var out []Window
	for k, n := range counts {
		if !k.Start.Add(size).After(wm) {
			out = append(out, Window{Start: k.Start, Course: k.Course, Count: n})
		}
	}
	Sort(out)
	return out
}

func floor(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q * b
}

// Sort orders windows by start, course, count.
func Sort(ws []Window) {
	sort.Slice(ws, func(i, j int) bool {
		if !ws[i].Start.Equal(ws[j].Start) {
			return ws[i].Start.Before(ws[j].Start)
		}
		if ws[i].Course != ws[j].Course {
			return ws[i].Course < ws[j].Course
		}
		return ws[i].Count < ws[j].Count
	})
}

// FromRows converts output rows of the tile (window_start, window_end,
// course_id, event_count) into windows.
func FromRows(cols []query.Column, rows []row.Row) ([]Window, error) {
	idx := map[string]int{}
	for i, c := range cols {
		idx[c.Name] = i
	}
	for _, n := range []string{"window_start", "course_id", "event_count"} {
		if _, ok := idx[n]; !ok {
			return nil, fmt.Errorf("output has no column %s (columns %v)", n, cols)
		}
	}
	out := make([]Window, 0, len(rows))
	for _, r := range rows {
		out = append(out, Window{Start: r[idx["window_start"]].Time(), Course: r[idx["course_id"]].S, Count: r[idx["event_count"]].I})
	}
	Sort(out)
	return out, nil
}

// Diff describes how got differs from want ("" when equal): windows
// missing, duplicated, or with wrong counts.
func Diff(want, got []Window) string {
	type key struct {
		start  int64
		course string
	}
	w := map[key]int64{}
	for _, x := range want {
		w[key{x.Start.UnixMicro(), x.Course}] = x.Count
	}
	seen := map[key]int{}
	var b strings.Builder
	for _, x := range got {
		k := key{x.Start.UnixMicro(), x.Course}
		seen[k]++
		if seen[k] == 2 {
			fmt.Fprintf(&b, "duplicate: %s\n", x)
		}
		if n, ok := w[k]; !ok {
			fmt.Fprintf(&b, "unexpected: %s\n", x)
		} else if n != x.Count && seen[k] == 1 {
			fmt.Fprintf(&b, "wrong count: %s, want %d\n", x, n)
		}
	}
	for _, x := range want {
		if seen[key{x.Start.UnixMicro(), x.Course}] == 0 {
			fmt.Fprintf(&b, "missing: %s\n", x)
		}
	}
	return b.String()
}

// Spec returns the tile query over a file source dir, with a Parquet sink
// and checkpoint at the given locations, availableNow.
func Spec(in, out, checkpoint string) query.Spec {
	f := false
	return query.Spec{
		Name: "course-activity-tile",
		Source: query.Source{
			File:   &query.FileSource{Path: in},
			Format: "json",
			Schema: []query.Field{
				{Name: "event_id", Type: "string", Nullable: &f},
				{Name: "course_id", Type: "string", Nullable: &f},
				{Name: "lesson_id", Type: "string"},
				{Name: "event_time", Type: "timestamp", Nullable: &f},
			},
		},
		Watermark: &query.Watermark{Column: "event_time", Delay: query.Duration(10 * time.Minute)},
		Aggregate: &query.Aggregate{
			Window:   &query.Window{Column: "event_time", Size: query.Duration(5 * time.Minute)},
			GroupBy:  []string{"course_id"},
			Measures: []query.Measure{{Name: "event_count", Fn: query.FnCount}},
		},
		OutputMode:         query.Append,
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: out, PartitionBy: "window_date"}},
		CheckpointLocation: checkpoint,
		Trigger:            query.Trigger{AvailableNow: true},
		ShufflePartitions:  4,
	}
}

// SQL is the tile as a Spark SQL query over the source's view (docs/sql.md):
// the same rows, columns and types as Spec's aggregate.
const SQL = `SELECT window.start AS window_start, window.end AS window_end, course_id,
       count(*) AS event_count
FROM events
GROUP BY window(event_time, '5 minutes'), course_id`

// SQLSpec is Spec with the tile written in SQL instead of aggregate:.
func SQLSpec(in, out, checkpoint string) query.Spec {
	s := Spec(in, out, checkpoint)
	s.Aggregate, s.SQL = nil, SQL
	return s
}
