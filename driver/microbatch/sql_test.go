package microbatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/optest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

var queryIDInName = regexp.MustCompile(`-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.`)

// committedParquet returns the sink's committed files by name without the
// query id, their columns and rows.
func committedParquet(t *testing.T, dir string) (map[string][]byte, []query.Column, []row.Row) {
	t.Helper()
	ctx := context.Background()
	store, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parquet.LogEntries(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		for _, f := range e.Files {
			b, err := store.Get(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			files[queryIDInName.ReplaceAllString(f, ".")] = b
		}
	}
	cols, rows, err := parquet.ReadCommitted(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	return files, cols, rows
}

// The tile in SQL and in YAML, on the same input, write the same rows,
// columns and types: the very same Parquet files, byte for byte, per
// (batch, partition); both equal the oracle.
func TestTileInSQLWritesTheYAMLTilesFiles(t *testing.T) {
	events := tiletest.Events(7, 6000, 150*time.Millisecond, 4*time.Minute, 9)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, 500); err != nil {
		t.Fatal(err)
	}
	var files []map[string][]byte
	var colss [][]query.Column
	for _, sql := range []bool{false, true} {
		dir := t.TempDir()
		spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
		if sql {
			spec = tiletest.SQLSpec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
		}
		spec.Source.File.MaxFilesPerTrigger = 3
		reports := run(t, spec, microbatch.Options{})
		if len(reports) < 4 {
			t.Fatalf("sql=%v: %d batches", sql, len(reports))
		}
		fs, cols, rows := committedParquet(t, filepath.Join(dir, "out"))
		got, err := tiletest.FromRows(cols, rows)
		if err != nil {
			t.Fatal(err)
		}
		if d := tiletest.Diff(want, got); d != "" {
			t.Fatalf("sql=%v: output differs from the oracle:\n%s", sql, d)
		}
		files, colss = append(files, fs), append(colss, cols)
	}
	if !reflect.DeepEqual(colss[0], colss[1]) {
		t.Errorf("columns: YAML %v, SQL %v", colss[0], colss[1])
	}
	if len(files[0]) == 0 || len(files[0]) != len(files[1]) {
		t.Fatalf("YAML committed %d files, SQL %d", len(files[0]), len(files[1]))
	}
	for name, b := range files[0] {
		if !bytes.Equal(b, files[1][name]) {
			t.Errorf("%s differs between YAML and SQL", name)
		}
	}
}

// tileOracle is the tile's append-mode output when each inner slice of
// batches is one batch, in order, all of them available at the start (so
// a data batch follows a data batch: no no-data batch runs between them,
// as in Spark): batch i runs with W_evict, the watermark the batches
// before it set (max event time of the rows that count toward it, minus
// the delay, never falling, from 0), and W_late, the previous batch's
// W_evict (0 for batch 0); a kept row whose window ends at or before
// W_late is dropped as late; a window is written once with its count when
// its end is at or before a batch's W_evict, or at the end (the trailing
// no-data batch) the final watermark. counts says whether a row counts
// toward the watermark, keep whether it reaches the aggregate.
func tileOracle(batches [][]tiletest.Event, size, delay time.Duration, counts, keep func(tiletest.Event) bool) []tiletest.Window {
	type key struct {
		start  int64
		course string
	}
	sz := size.Microseconds()
	n := map[key]int64{}
	var late, evict int64 // microseconds
	for _, b := range batches {
		maxT, has := int64(0), false
		for _, e := range b {
			us := e.Time.UnixMilli() * 1000
			if counts(e) && (!has || us > maxT) {
				maxT, has = us, true
			}
			if !keep(e) {
				continue
			}
			start := us - ((us%sz)+sz)%sz
			if start+sz <= late {
				continue // late
			}
			n[key{start, e.Course}]++
		}
		late = evict
		if has && maxT-delay.Microseconds() > evict {
			evict = maxT - delay.Microseconds()
		}
	}
	var out []tiletest.Window
	for k, c := range n {
		if k.start+sz <= evict {
			out = append(out, tiletest.Window{Start: time.UnixMicro(k.start).UTC(), Course: k.course, Count: c})
		}
	}
	tiletest.Sort(out)
	return out
}

// A WHERE conjunct that does not read the event-time column runs below
// the watermark (Spark's PushPredicateThroughNonJoin at
// EventTimeWatermark, docs/semantics.md rule 25): rows it drops do not
// move the watermark. A conjunct on the event-time column stays above it:
// the rows it drops still do. The input has, in its second file, rows of
// course "noise" three hours ahead of the others: counted, they raise the
// watermark past every later row, which is then late. Each query's output
// equals an oracle that applies the rule to the input.
func TestFilterBelowTheWatermarkOnlyWhenItDoesNotReadTheEventTime(t *testing.T) {
	events := tiletest.Events(11, 4800, time.Second, 2*time.Minute, 4)
	const perFile = 600
	var batches [][]tiletest.Event
	for f := 0; f*perFile < len(events); f++ {
		b := append([]tiletest.Event(nil), events[f*perFile:min(len(events), (f+1)*perFile)]...)
		if f == 1 {
			for i := range 5 {
				b = append(b, tiletest.Event{ID: "noise", Course: "noise", Lesson: "l", Time: tiletest.Base.Add(3*time.Hour + time.Duration(i)*time.Second)})
			}
		}
		batches = append(batches, b)
	}
	in := filepath.Join(t.TempDir(), "in")
	for f, b := range batches {
		if err := tiletest.WriteFiles(filepath.Join(in, "f"+string(rune('a'+f))), b, len(b)); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := tiletest.Base.Add(2 * time.Hour)
	notNoise := func(e tiletest.Event) bool { return e.Course != "noise" }
	beforeCutoff := func(e tiletest.Event) bool { return e.Time.Before(cutoff) }
	all := func(tiletest.Event) bool { return true }
	const head = "SELECT window.start AS window_start, window.end AS window_end, course_id, count(*) AS event_count FROM events WHERE "
	const tail = " GROUP BY window(event_time, '5 minutes'), course_id"
	cases := []struct {
		name, where  string
		counts, keep func(tiletest.Event) bool
	}{
		{"pushed", "course_id != 'noise'", notNoise, notNoise},
		{"on the event time", "event_time < TIMESTAMP '2026-03-02 11:00:00'", all, beforeCutoff},
		{"both", "course_id != 'noise' AND event_time < TIMESTAMP '2026-03-02 11:00:00'", notNoise, func(e tiletest.Event) bool { return notNoise(e) && beforeCutoff(e) }},
	}
	wants := map[string][]tiletest.Window{}
	for _, tc := range cases {
		wants[tc.name] = tileOracle(batches, 5*time.Minute, 10*time.Minute, tc.counts, tc.keep)
	}
	if len(wants["pushed"]) < 2*len(wants["on the event time"]) {
		t.Fatalf("the oracle gives %d windows pushed and %d not: the noise rows test nothing", len(wants["pushed"]), len(wants["on the event time"]))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := tiletest.SQLSpec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
			spec.SQL = head + tc.where + tail
			spec.Source.File.MaxFilesPerTrigger = 1
			reports := run(t, spec, microbatch.Options{})
			_, cols, rows := committedParquet(t, filepath.Join(dir, "out"))
			got, err := tiletest.FromRows(cols, rows)
			if err != nil {
				t.Fatal(err)
			}
			if d := tiletest.Diff(wants[tc.name], got); d != "" {
				t.Fatalf("output differs from the oracle:\n%s", d)
			}
			var input int64
			for _, p := range reports {
				input += p.NumInputRows
			}
			if input != int64(len(events)+5) {
				t.Errorf("numInputRows %d, want every record read (%d): a filter is not a source", input, len(events)+5)
			}
		})
	}
}

// badRecords reads every bad record under the checkpoint's bad_records/.
func badRecords(t *testing.T, cp string) map[string][]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(cp, "bad_records", "batch_id=*", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out[filepath.Base(f)] = append(out[filepath.Base(f)], m)
		}
	}
	return out
}

// A row whose expression fails (a regular expression read from a column
// that does not compile, which Spark fails on too) is set aside as
// malformed with the reason, like a record that does not decode: in the
// map task (a WHERE, a projection) with the record, and after the
// aggregate (a projection of a grouping column, in the reduce task) with
// the aggregate's row; numRowsMalformed counts both and the other rows
// are written.
func TestExpressionFailuresAreSetAsideWithTheReason(t *testing.T) {
	dir := t.TempDir()
	in, cp := filepath.Join(dir, "in"), filepath.Join(dir, "cp")
	line := func(id, course, lesson, ts string) string {
		return fmt.Sprintf(`{"event_id":%q,"course_id":%q,"lesson_id":%q,"event_time":%q}`, id, course, lesson, ts)
	}
	writeLines(t, filepath.Join(in, "a.jsonl"),
		line("e1", "c1", "l.", "2026-03-02T09:00:01Z"),
		line("e2", "c1", "(", "2026-03-02T09:00:02Z"), // lesson_id is no regular expression
		line("e3", "(", "l.", "2026-03-02T09:00:03Z"), // course_id is none either
		line("e4", "c2", "l.", "2026-03-02T09:00:04Z"),
		line("e5", "(", "l.", "2026-03-02T09:00:05Z"),
		line("e6", "c2", "l.", "2026-03-02T09:30:00Z"), // closes the 09:00 windows
	)
	t.Run("map", func(t *testing.T) {
		out := filepath.Join(dir, "map-out")
		spec := tiletest.SQLSpec(in, out, cp+"-map")
		spec.Sink.Parquet.PartitionBy = ""
		spec.SQL = "SELECT event_id, regexp_extract('l1', lesson_id, 0) AS m FROM events WHERE regexp_extract(course_id, 'c', 0) = 'c'"
		reports := run(t, spec, microbatch.Options{})
		var malformed int64
		for _, p := range reports {
			malformed += p.NumRowsMalformed
		}
		if malformed != 1 {
			t.Errorf("numRowsMalformed %d, want 1 (e2)", malformed)
		}
		bad := badRecords(t, cp+"-map")
		if len(bad["part-00000.jsonl"]) != 1 {
			t.Fatalf("bad records %v, want e2's in part-00000.jsonl", bad)
		}
		b := bad["part-00000.jsonl"][0]
		if !strings.Contains(b["record"].(string), `"e2"`) || !strings.Contains(b["reason"].(string), "regexp_extract") || !strings.Contains(b["reason"].(string), "missing closing )") {
			t.Errorf("bad record %v: want e2's record and the reason naming the expression and the regexp's error", b)
		}
		got := sinkRows(t, out, "event_id", "m")
		want := []string{"event_id=e1 m=l1", "event_id=e4 m=l1", "event_id=e6 m=l1"} // e3, e5: course ( does not match c
		if d := optest.Diff(want, got); d != "" {
			t.Errorf("output:\n%s", d)
		}
	})
	t.Run("reduce", func(t *testing.T) {
		out := filepath.Join(dir, "reduce-out")
		spec := tiletest.SQLSpec(in, out, cp+"-reduce")
		spec.SQL = `SELECT window.start AS window_start, course_id, regexp_extract('c1(', course_id, 0) AS m, count(*) AS n
FROM events GROUP BY window(event_time, '5 minutes'), course_id`
		reports := run(t, spec, microbatch.Options{})
		var malformed int64
		for _, p := range reports {
			malformed += p.NumRowsMalformed
		}
		if malformed != 1 {
			t.Errorf("numRowsMalformed %d, want 1 (the 09:00 window of course '(')", malformed)
		}
		var reduceBad []map[string]any
		for name, rs := range badRecords(t, cp+"-reduce") {
			if strings.HasPrefix(name, "reduce-") {
				reduceBad = append(reduceBad, rs...)
			}
		}
		if len(reduceBad) != 1 || !strings.Contains(reduceBad[0]["record"].(string), `"course_id":"("`) || !strings.Contains(reduceBad[0]["reason"].(string), "regexp_extract") {
			t.Fatalf("reduce-side bad records %v, want the ( window's row with the reason", reduceBad)
		}
		got := sinkRows(t, out, "window_start", "course_id", "m", "n")
		want := []string{"window_start=2026-03-02T09:00:00Z course_id=c1 m=c1 n=2", "window_start=2026-03-02T09:00:00Z course_id=c2 m= n=1"}
		if d := optest.Diff(want, got); d != "" {
			t.Errorf("output:\n%s", d)
		}
	})
}

// A SQL query whose state changes (another GROUP BY) is refused on the
// checkpoint of the old one ("new checkpoint required", both state
// schemas named); the tile moves from YAML to SQL on its checkpoint and
// carries on exactly (the output equals the oracle over both runs).
func TestChangedSQLNeedsANewCheckpointAndTheTileMovesFromYAMLToSQL(t *testing.T) {
	events := tiletest.Events(17, 3000, 150*time.Millisecond, 4*time.Minute, 5)
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	if err := tiletest.WriteFiles(in, events[:1500], 300); err != nil {
		t.Fatal(err)
	}
	run(t, tiletest.Spec(in, out, cp), microbatch.Options{})
	if err := tiletest.WriteFiles(filepath.Join(in, "later"), events[1500:], 300); err != nil {
		t.Fatal(err)
	}
	changed := tiletest.SQLSpec(in, out, cp)
	changed.SQL = "SELECT window.start AS window_start, window.end AS window_end, course_id, lesson_id, count(*) AS event_count FROM events GROUP BY window(event_time, '5 minutes'), course_id, lesson_id"
	_, err := microbatch.Build(context.Background(), changed, microbatch.Options{})
	if !errors.Is(err, checkpoint.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "new checkpoint required") || !strings.Contains(err.Error(), "lesson_id string") {
		t.Fatalf("want a 'new checkpoint required' error naming both state schemas, got %v", err)
	}
	run(t, tiletest.SQLSpec(in, out, cp), microbatch.Options{})
	if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), sinkWindows(t, out, true)); d != "" {
		t.Fatalf("YAML then SQL on one checkpoint differ from the oracle:\n%s", d)
	}
}

// The tile in SQL and in YAML read the same batches from a Kafka topic of
// four partitions (capped by maxOffsetsPerTrigger) and from the generator
// (capped by maxRowsPerTrigger, every row available at once, some late),
// and write the same Parquet files.
func TestTileInSQLEqualsYAMLOnKafkaAndTheGenerator(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic(topic, 4)
	produce(c, tiletest.Events(41, 12000, 100*time.Millisecond, 3*time.Minute, 7), 4)
	for _, src := range []string{"kafka", "generator"} {
		t.Run(src, func(t *testing.T) {
			var files []map[string][]byte
			for _, sql := range []bool{false, true} {
				dir := t.TempDir()
				spec := tiletest.Spec("", filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
				if sql {
					spec = tiletest.SQLSpec("", filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
				}
				spec.Source.File = nil
				switch src {
				case "kafka":
					spec.Source.Kafka = &query.KafkaSource{BootstrapServers: c.Addr, Subscribe: topic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 1000}
				case "generator":
					spec.Source.Schema = nil
					spec.Source.Generator = &query.GeneratorSource{RowsPerSecond: 1_000_000_000, Rows: 20_000, Courses: 6, Seed: 3, LateFraction: 0.01,
						EventTimePerRow: query.Duration(100 * time.Millisecond), MaxRowsPerTrigger: 2500}
				}
				ps := run(t, spec, microbatch.Options{})
				if len(ps) < 4 {
					t.Fatalf("sql=%v: %d batches", sql, len(ps))
				}
				fs, _, rows := committedParquet(t, filepath.Join(dir, "out"))
				if len(rows) == 0 {
					t.Fatalf("sql=%v: no output", sql)
				}
				files = append(files, fs)
			}
			if len(files[0]) != len(files[1]) {
				t.Fatalf("YAML committed %d files, SQL %d", len(files[0]), len(files[1]))
			}
			for name, b := range files[0] {
				if !bytes.Equal(b, files[1][name]) {
					t.Errorf("%s differs between YAML and SQL", name)
				}
			}
		})
	}
}

// A row the filter below the watermark drops is not checked against
// watermark.maxEventTimeAhead (which guards the watermark the row does
// not move); without the filter it is set aside.
func TestRowDroppedBelowTheWatermarkIsNotTooFarAhead(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeLines(t, filepath.Join(in, "a.jsonl"),
		ev("e1", "c1", "2026-03-02T09:01:00Z"),
		ev("e2", "noise", "2099-01-01T00:00:00Z"),
		ev("e3", "c1", "2026-03-02T09:20:00Z"),
	)
	for _, tc := range []struct {
		where     string
		malformed int64
	}{{"course_id != 'noise'", 0}, {"course_id != 'c9'", 1}} {
		spec := tiletest.SQLSpec(in, filepath.Join(dir, tc.where, "out"), filepath.Join(dir, tc.where, "cp"))
		spec.Watermark.MaxEventTimeAhead = query.Duration(time.Hour)
		spec.SQL = strings.Replace(tiletest.SQL, "FROM events\n", "FROM events WHERE "+tc.where+"\n", 1)
		var malformed int64
		for _, p := range run(t, spec, microbatch.Options{}) {
			malformed += p.NumRowsMalformed
		}
		if malformed != tc.malformed {
			t.Errorf("WHERE %s: %d rows set aside, want %d", tc.where, malformed, tc.malformed)
		}
	}
}
