package generator

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
)

var ctx = context.Background()

func tileDecoder() *row.Decoder {
	return row.NewDecoder([]row.Field{
		{Name: "event_id", Kind: row.String},
		{Name: "course_id", Kind: row.String},
		{Name: "lesson_id", Kind: row.String},
		{Name: "event_time", Kind: row.Timestamp},
	})
}

// readRange reads rows [from, to) through Read with one hand-made split.
func readRange(t *testing.T, s *Source, from, to int64) []byte {
	t.Helper()
	split := source.Split{ID: "x", Desc: fmt.Appendf(nil, `{"from":%d,"to":%d}`, from, to)}
	return readSplits(t, s, []source.Split{split})
}

func readSplits(t *testing.T, s *Source, splits []source.Split) []byte {
	t.Helper()
	var out []byte
	for _, sp := range splits {
		next := int64(-1)
		err := s.Read(ctx, sp, func(r *source.Record) error {
			if next >= 0 && r.Offset != next {
				return fmt.Errorf("offset %d after %d", r.Offset, next-1)
			}
			if r.Part != Part {
				return fmt.Errorf("part %q", r.Part)
			}
			next = r.Offset + 1
			out = append(out, r.Value...)
			out = append(out, '\n')
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestSameSeedGivesSameBytesWhateverTheSplits(t *testing.T) {
	opts := query.GeneratorSource{RowsPerSecond: 1000, Seed: 7, Jitter: query.Duration(30 * time.Second), LateFraction: 0.1}
	a, b := New(opts), New(opts)
	const n = 250_001
	splits, err := a.Splits(ctx, Offset{}.Marshal(), Offset{Row: n}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if want := (n + SplitRows - 1) / SplitRows; len(splits) != want {
		t.Fatalf("splits = %d, want %d of at most %d rows", len(splits), want, SplitRows)
	}
	whole := readSplits(t, a, splits)
	var pieces []byte
	for _, cut := range [][2]int64{{0, 7}, {7, 7}, {7, 123_457}, {123_457, n}} {
		pieces = append(pieces, readRange(t, b, cut[0], cut[1])...)
	}
	if !bytes.Equal(whole, pieces) {
		t.Fatal("different splits of the same rows gave different bytes")
	}
	if got := bytes.Count(whole, []byte("\n")); got != n {
		t.Errorf("lines = %d, want %d", got, n)
	}
	other := readRange(t, New(query.GeneratorSource{RowsPerSecond: 1000, Seed: 8, Jitter: opts.Jitter, LateFraction: 0.1}), 0, 1000)
	if bytes.Equal(other, whole[:len(other)]) {
		t.Error("a different seed gave the same bytes")
	}
}

func TestEventMatchesTheDecodedLine(t *testing.T) {
	s := New(query.GeneratorSource{RowsPerSecond: 333, Seed: -3, Courses: 1500, Jitter: query.Duration(5 * time.Second), LateFraction: 0.2})
	d := tileDecoder()
	var r row.Row
	for i := int64(0); i < 20_000; i += 7 {
		line := s.AppendLine(nil, i)
		var err error
		r, err = d.Decode(line, r)
		if err != nil {
			t.Fatalf("row %d: %s: %v", i, line, err)
		}
		id, course, lesson, us := s.Event(i)
		if r[0].S != id || r[1].S != course || r[2].S != lesson || r[3].I != us {
			t.Fatalf("row %d: line %s decodes to %v, Event gives %s %s %s %d", i, line, r, id, course, lesson, us)
		}
		if want := fmt.Sprintf("e--3-%d", i); id != want {
			t.Fatalf("event_id = %s, want %s", id, want)
		}
	}
}

func TestEventTimeFollowsRowsWithJitterAndLateRows(t *testing.T) {
	const (
		rps    = 50
		n      = 100_000
		late   = 0.05
		jitter = 30 * time.Second
	)
	s := New(query.GeneratorSource{RowsPerSecond: rps, Jitter: query.Duration(jitter), LateFraction: late, Seed: 1})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	lateRows := 0
	sawJitter := false
	for i := range int64(n) {
		_, _, _, us := s.Event(i)
		base := start + i*1_000_000/rps // 1 s / rowsPerSecond per row
		lag := base - us
		if lag >= LateDelay.Microseconds() {
			lateRows++
			lag -= LateDelay.Microseconds()
		}
		// Jitter is in [0, jitter], plus under 1 ms of truncation to ms.
		if lag < 0 || lag >= jitter.Microseconds()+1000 {
			t.Fatalf("row %d: event time %s is %dµs before its slot %s", i, row.FormatTimestamp(us), lag, row.FormatTimestamp(base))
		}
		if lag > jitter.Microseconds()/2 {
			sawJitter = true
		}
	}
	if !sawJitter {
		t.Error("no row was jittered by more than half the jitter")
	}
	// Binomial(n, late): standard deviation ~69 rows; allow 6 of them.
	sd := math.Sqrt(n * late * (1 - late))
	if d := math.Abs(float64(lateRows) - n*late); d > 6*sd {
		t.Errorf("late rows = %d, want about %d", lateRows, int(n*late))
	}
}

func TestNoJitterNoLateGivesExactEventTimes(t *testing.T) {
	s := New(query.GeneratorSource{RowsPerSecond: 1, EventTimePerRow: query.Duration(1500 * time.Millisecond), StartTime: "2030-06-01T10:00:00.250+02:00"})
	for i, want := range []string{"2030-06-01T08:00:00.250Z", "2030-06-01T08:00:01.750Z", "2030-06-01T08:00:03.250Z"} {
		line := string(s.AppendLine(nil, int64(i)))
		if !strings.Contains(line, `"event_time":"`+want+`"`) {
			t.Errorf("row %d = %s, want event_time %s", i, line, want)
		}
	}
}

func TestTimeFormattingMatchesTheStandardLibrary(t *testing.T) {
	for ms := int64(-5_000_000_000_000); ms < 250_000_000_000_000; ms += 7_777_777_777 {
		got := string(appendTimeMs(nil, ms))
		want := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
		if got != want {
			t.Fatalf("appendTimeMs(%d) = %s, want %s", ms, got, want)
		}
	}
}

func TestCoursesAreSkewedAndInRange(t *testing.T) {
	s := New(query.GeneratorSource{RowsPerSecond: 100, Courses: 100, Seed: 3})
	counts := map[string]int{}
	const n = 50_000
	for i := range int64(n) {
		_, c, l, _ := s.Event(i)
		counts[c]++
		var k, m int
		if _, err := fmt.Sscanf(c, "c-%d", &k); err != nil || k < 0 || k >= 100 || len(c) != 5 {
			t.Fatalf("course %q out of range", c)
		}
		if _, err := fmt.Sscanf(l, "l-%d", &m); err != nil || m < 0 || m >= Lessons {
			t.Fatalf("lesson %q out of range", l)
		}
	}
	// Hot courses: the most frequent course has far more than its even
	// share of 1%.
	if top := counts["c-000"]; top < n/10 {
		t.Errorf("c-000 has %d rows, want a hot course (>10%%)", top)
	}
	if len(counts) < 90 {
		t.Errorf("only %d distinct courses of 100", len(counts))
	}
}

func TestOffsetsAreCanonicalJSON(t *testing.T) {
	s := New(query.GeneratorSource{RowsPerSecond: 1000})
	init, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(init) != `{"row":0,"startedAtMs":0}` {
		t.Errorf("Initial = %s", init)
	}
	t0 := time.UnixMilli(1_767_225_600_000)
	if got, _ := s.Latest(ctx, init, t0); !bytes.Equal(got, init) {
		t.Errorf("Latest at the clock start = %s, want start (nothing due yet)", got)
	}
	lim, err := s.Latest(ctx, init, t0.Add(2500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if string(lim) != `{"row":2500,"startedAtMs":1767225600000}` {
		t.Errorf("Latest after 2.5 s = %s", lim)
	}
	end, err := s.Next(ctx, init, lim)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(end, lim) {
		t.Errorf("Next = %s, want %s", end, lim)
	}
	p, err := ParseOffset(end)
	if err != nil || p.Marshal() == nil || !bytes.Equal(p.Marshal(), end) {
		t.Errorf("offset does not round-trip: %s -> %+v", end, p)
	}
}

func TestUnboundedGeneratorIsPacedFromTheLoggedStartAfterRestart(t *testing.T) {
	opts := query.GeneratorSource{RowsPerSecond: 1000}
	logged := Offset{Row: 2500, StartedAtMs: 1_767_225_600_000}.Marshal()
	restarted := New(opts) // another process: no memory of the clock start
	got, err := restarted.Latest(ctx, logged, time.UnixMilli(1_767_225_610_000))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"row":10000,"startedAtMs":1767225600000}` {
		t.Errorf("Latest = %s", got)
	}
}

func TestRowsBoundAndMaxRowsPerTrigger(t *testing.T) {
	s := New(query.GeneratorSource{RowsPerSecond: 1, Rows: 1000, MaxRowsPerTrigger: 300})
	start, _ := s.Initial(ctx)
	now := time.UnixMilli(1_000_000)
	// A finite generator offers all its rows at once, whatever the clock.
	limit, err := s.Latest(ctx, start, now)
	if err != nil {
		t.Fatal(err)
	}
	if string(limit) != `{"row":1000,"startedAtMs":1000000}` {
		t.Fatalf("Latest = %s", limit)
	}
	var sizes []int64
	var total int
	for range 10 {
		end, err := s.Next(ctx, start, limit)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(end, start) {
			break
		}
		splits, err := s.Splits(ctx, start, end)
		if err != nil {
			t.Fatal(err)
		}
		total += bytes.Count(readSplits(t, s, splits), []byte("\n"))
		a, _ := ParseOffset(start)
		b, _ := ParseOffset(end)
		sizes = append(sizes, b.Row-a.Row)
		start = end
	}
	if fmt.Sprint(sizes) != "[300 300 300 100]" || total != 1000 {
		t.Errorf("batch sizes = %v (%d rows read), want [300 300 300 100]", sizes, total)
	}
	if got, _ := s.Latest(ctx, start, now.Add(time.Hour)); !bytes.Equal(got, start) {
		t.Errorf("Latest after all rows = %s, want start", got)
	}
	if splits, _ := s.Splits(ctx, start, start); len(splits) != 0 {
		t.Errorf("Splits of an empty range = %v", splits)
	}
}

func TestInvalidOptionsAreReportedByEveryMethod(t *testing.T) {
	s := New(query.GeneratorSource{RowsPerSecond: 0, LateFraction: 1.5, StartTime: "tomorrow"})
	_, err := s.Initial(ctx)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, part := range []string{"source.generator.rowsPerSecond: 0", "source.generator.lateFraction: 1.5", `source.generator.startTime: "tomorrow"`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not mention %s", err, part)
		}
	}
	if err := s.Read(ctx, source.Split{Desc: []byte(`{"from":0,"to":1}`)}, func(*source.Record) error { return nil }); err == nil {
		t.Error("Read with invalid options should fail")
	}
}

func BenchmarkAppendLine(b *testing.B) {
	s := New(query.GeneratorSource{RowsPerSecond: 1000, Jitter: query.Duration(30 * time.Second), LateFraction: 0.01})
	buf := make([]byte, 0, 160)
	var i int64
	for b.Loop() {
		buf = s.AppendLine(buf[:0], i)
		i++
	}
}

// BenchmarkReadAndDecode is the map-task input path for the tile query:
// generate a line, decode it against the schema.
func BenchmarkReadAndDecode(b *testing.B) {
	s := New(query.GeneratorSource{RowsPerSecond: 1000, Jitter: query.Duration(30 * time.Second), LateFraction: 0.01})
	d := tileDecoder()
	var r row.Row
	b.ReportAllocs()
	n := int64(b.N)
	b.ResetTimer()
	split := source.Split{Desc: fmt.Appendf(nil, `{"from":0,"to":%d}`, n)}
	err := s.Read(ctx, split, func(rec *source.Record) error {
		var err error
		r, err = d.Decode(rec.Value, r)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}
