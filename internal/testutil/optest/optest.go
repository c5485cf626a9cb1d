// Package optest makes inputs for the tests of deduplication and session
// windows (in YAML and in SQL), and computes their expected output
// independently of the engine: oracles that share no code with agg, dedup
// or eventtime, written from docs/semantics.md (rules 7, 8, 23, 24) by
// brute force over the whole input, batch by batch.
package optest

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

// Event is one input row: an event whose id may repeat (the producer
// retries), with a sequence number that tells its copies apart.
type Event struct {
	ID     string
	Course string
	Lesson string
	Time   time.Time
	Seq    int64
}

// JSON renders the event as one JSON line.
func (e Event) JSON() string {
	return fmt.Sprintf(`{"event_id":%q,"course_id":%q,"lesson_id":%q,"event_time":%q,"seq":%d}`,
		e.ID, e.Course, e.Lesson, e.Time.UTC().Format(time.RFC3339Nano), e.Seq)
}

// Base is the event time the generated events start near.
var Base = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Events returns batches batches of perBatch events, deterministic in
// seed: time moves on by 1 to 20 seconds per event, with a pause of four
// minutes every 40 events (so sessions end), each event shifted back by
// up to disorder, and one in 50 by an hour more (late once the watermark
// has passed it); about a third of the events repeat
// the id of one of the 30 before (within a batch, across batches, and
// after the first copy's key has left the state).
func Events(seed uint64, batches, perBatch int, disorder time.Duration) [][]Event {
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	t := Base
	var recent []string
	out := make([][]Event, batches)
	seq := int64(0)
	for b := range out {
		for range perBatch {
			t = t.Add(time.Duration(1+r.IntN(20)) * time.Second)
			if seq%40 == 39 {
				t = t.Add(4 * time.Minute)
			}
			id := fmt.Sprintf("e-%d", seq)
			if len(recent) > 0 && r.IntN(3) == 0 {
				id = recent[r.IntN(len(recent))]
			}
			recent = append(recent, id)
			if len(recent) > 30 {
				recent = recent[1:]
			}
			et := t
			if disorder > 0 {
				et = et.Add(-time.Duration(r.Int64N(int64(disorder))))
			}
			if seq%50 == 25 {
				et = et.Add(-time.Hour) // far behind: late when the watermark is past it
			}
			out[b] = append(out[b], Event{ID: id, Course: fmt.Sprintf("c-%d", r.IntN(4)), Lesson: fmt.Sprintf("l-%d", r.IntN(3)),
				Time: et.Truncate(time.Millisecond), Seq: seq})
			seq++
		}
	}
	return out
}

// WriteFiles writes batch i's events as dir/bNNN/part.jsonl: with
// maxFilesPerTrigger 1, batch i of the query reads exactly them.
func WriteFiles(dir string, batches [][]Event) error {
	for i, b := range batches {
		d := filepath.Join(dir, fmt.Sprintf("b%03d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		var s strings.Builder
		for _, e := range b {
			s.WriteString(e.JSON())
			s.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(d, "part.jsonl"), []byte(s.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Spec is a query over dir's files, one file a batch, availableNow, with
// a Parquet sink and a watermark on event_time of delay; no aggregate
// (the caller sets dedup:, aggregate: or sql:).
func Spec(in, out, checkpoint string, delay time.Duration) query.Spec {
	f := false
	return query.Spec{
		Name: "operators",
		Source: query.Source{
			File:   &query.FileSource{Path: in, MaxFilesPerTrigger: 1},
			Format: "json",
			Schema: []query.Field{
				{Name: "event_id", Type: "string", Nullable: &f},
				{Name: "course_id", Type: "string"},
				{Name: "lesson_id", Type: "string"},
				{Name: "event_time", Type: "timestamp", Nullable: &f},
				{Name: "seq", Type: "long"},
			},
		},
		Watermark:          &query.Watermark{Column: "event_time", Delay: query.Duration(delay)},
		OutputMode:         query.Append,
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: out}},
		CheckpointLocation: checkpoint,
		Trigger:            query.Trigger{AvailableNow: true},
		ShufflePartitions:  4,
	}
}

// clock is the oracles' watermark, batch by batch: batch i runs with
// evict, the watermark the batches before it set (max event time of the
// rows that count toward it, in milliseconds, minus the delay, never
// falling, from 0), and late, the previous batch's evict (0 for batch 0).
// Every file is there from the start, so a data batch follows a data
// batch with no no-data batch between them, as in Spark.
type clock struct {
	late, evict int64 // microseconds
	delay       int64
}

// next moves the clock past a batch whose counted rows had maxT (has:
// any).
func (c *clock) next(maxT int64, has bool) {
	c.late = c.evict
	if has && maxT-c.delay > c.evict {
		c.evict = maxT - c.delay
	}
}

func micros(t time.Time) int64 { return t.UnixMilli() * 1000 }

// Dedup is dropDuplicatesWithinWatermark(event_id)'s output (rule 24),
// then keep applied to the kept rows (a filter after the deduplication:
// a row it drops was still kept by the deduplication, its key stored).
// Per batch: a row whose event time is at or before late is dropped; then
// a row whose key is in state is a duplicate; otherwise it is kept and
// its key stored until evict reaches event time + delay; after the
// batch's rows, keys with evict >= expiresAt leave. It returns the kept
// rows and the number of duplicates dropped.
func Dedup(batches [][]Event, delay time.Duration, keep func(Event) bool) ([]Event, int64) {
	c := &clock{delay: delay.Microseconds()}
	state := map[string]int64{} // key -> expiresAt
	var out []Event
	var dups int64
	for _, b := range batches {
		maxT, has := int64(0), false
		for _, e := range b {
			t := micros(e.Time)
			if !has || t > maxT {
				maxT, has = t, true
			}
			if t <= c.late {
				continue
			}
			if _, ok := state[e.ID]; ok {
				dups++
				continue
			}
			state[e.ID] = t + c.delay
			if keep(e) {
				out = append(out, e)
			}
		}
		for k, exp := range state {
			if c.evict >= exp {
				delete(state, k)
			}
		}
		c.next(maxT, has)
	}
	return out, dups
}

// Session is one session window's output row.
type Session struct {
	Key        string
	Start, End time.Time
	Count      int64
	SumSeq     int64
}

func (s Session) String() string {
	return fmt.Sprintf("%s [%s, %s) n=%d sum=%d", s.Key, s.Start.UTC().Format(time.RFC3339Nano), s.End.UTC().Format(time.RFC3339Nano), s.Count, s.SumSeq)
}

// Sessions is session_window(event_time, gap) grouped by key(e), with
// count(*) and sum(seq), in append mode (rules 7, 8, 23): rows for which
// counts is false do not move the watermark (a filter below it) and rows
// for which keep is false are not aggregated. Per batch: a kept row whose
// session [t, t+gap) ends at or before late is dropped; the others join
// their key's open sessions, which merge when one starts at or before
// another's end; then the sessions ending at or before evict are written
// and leave; at the end the trailing no-data batch writes those ending at
// or before the final watermark. having filters the written sessions.
func Sessions(batches [][]Event, gap, delay time.Duration, key func(Event) string, counts, keep func(Event) bool, having func(Session) bool) []Session {
	c := &clock{delay: delay.Microseconds()}
	g := gap.Microseconds()
	type sess struct{ start, end, n, sum int64 }
	open := map[string][]sess{}
	var out []Session
	emit := func() {
		for k, ss := range open {
			var rest []sess
			for _, s := range ss {
				if s.end <= c.evict {
					o := Session{Key: k, Start: time.UnixMicro(s.start).UTC(), End: time.UnixMicro(s.end).UTC(), Count: s.n, SumSeq: s.sum}
					if having(o) {
						out = append(out, o)
					}
				} else {
					rest = append(rest, s)
				}
			}
			open[k] = rest
		}
	}
	for _, b := range batches {
		maxT, has := int64(0), false
		for _, e := range b {
			t := micros(e.Time)
			if counts(e) && (!has || t > maxT) {
				maxT, has = t, true
			}
			if !keep(e) || t+g <= c.late {
				continue
			}
			k := key(e)
			ss := append(open[k], sess{start: t, end: t + g, n: 1, sum: e.Seq})
			sort.Slice(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
			var merged []sess
			for _, s := range ss {
				if n := len(merged); n > 0 && s.start <= merged[n-1].end {
					m := &merged[n-1]
					m.end = max(m.end, s.end)
					m.n += s.n
					m.sum += s.sum
					continue
				}
				merged = append(merged, s)
			}
			open[k] = merged
		}
		emit()
		c.next(maxT, has)
	}
	emit() // the trailing no-data batch
	SortSessions(out)
	return out
}

// SortSessions orders sessions by key, start, end.
func SortSessions(ss []Session) {
	sort.Slice(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		return a.End.Before(b.End)
	})
}

// Rows renders output rows as sorted lines "col=value ..." of the named
// columns, for comparing an output with an oracle's.
func Rows(cols []query.Column, rows []row.Row, names ...string) ([]string, error) {
	idx := map[string]int{}
	for i, c := range cols {
		idx[c.Name] = i
	}
	var out []string
	for _, r := range rows {
		var parts []string
		for _, n := range names {
			i, ok := idx[n]
			if !ok {
				return nil, fmt.Errorf("output has no column %s (columns %v)", n, cols)
			}
			parts = append(parts, n+"="+r[i].String())
		}
		out = append(out, strings.Join(parts, " "))
	}
	sort.Strings(out)
	return out, nil
}

// EventRows renders events as Rows renders the output rows of a query
// that writes event_id, course_id, event_time and seq.
func EventRows(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("event_id=%s course_id=%s event_time=%s seq=%d", e.ID, e.Course, row.FormatTimestamp(micros(e.Time)), e.Seq))
	}
	sort.Strings(out)
	return out
}

// SessionRows renders sessions as Rows renders the output rows of a
// session query writing start, end, key, n and total under those names.
func SessionRows(ss []Session, start, end, key, n, total string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s=%s %s=%s %s=%s %s=%d %s=%d", start, row.FormatTimestamp(s.Start.UnixMicro()), end, row.FormatTimestamp(s.End.UnixMicro()),
			key, s.Key, n, s.Count, total, s.SumSeq))
	}
	sort.Strings(out)
	return out
}

// Diff describes how got differs from want ("" when equal): lines
// missing and lines unexpected (a line twice in got and once in want is
// unexpected once).
func Diff(want, got []string) string {
	w := map[string]int{}
	for _, x := range want {
		w[x]++
	}
	var b strings.Builder
	for _, x := range got {
		if w[x] > 0 {
			w[x]--
			continue
		}
		fmt.Fprintf(&b, "unexpected: %s\n", x)
	}
	var missing []string
	for x, n := range w {
		for range n {
			missing = append(missing, x)
		}
	}
	sort.Strings(missing)
	for _, x := range missing {
		fmt.Fprintf(&b, "missing: %s\n", x)
	}
	return b.String()
}
