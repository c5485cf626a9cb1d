package shuffle

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// layoutAllMeasures is a windowed aggregation with every measure function.
func layoutAllMeasures(t testing.TB) *agg.Layout {
	t.Helper()
	s := query.Spec{
		Name: "all-measures",
		Source: query.Source{Schema: []query.Field{
			{Name: "event_time", Type: "timestamp"},
			{Name: "course", Type: "string"},
			{Name: "n", Type: "long"},
			{Name: "x", Type: "double"},
		}},
		Watermark: &query.Watermark{Column: "event_time", Delay: query.Duration(time.Minute)},
		Aggregate: &query.Aggregate{
			Window:  &query.Window{Column: "event_time", Size: query.Duration(5 * time.Minute)},
			GroupBy: []string{"course"},
			Measures: []query.Measure{
				{Name: "c", Fn: query.FnCount},
				{Name: "sn", Fn: query.FnSum, Column: "n"},
				{Name: "sx", Fn: query.FnSum, Column: "x"},
				{Name: "mn", Fn: query.FnMin, Column: "x"},
				{Name: "mx", Fn: query.FnMax, Column: "course"},
				{Name: "av", Fn: query.FnAvg, Column: "n"},
				{Name: "d", Fn: query.FnApproxCountDistinct, Column: "n"},
			},
		},
		OutputMode: query.Update,
	}
	l, err := agg.Compile(&s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// tableRows returns n input rows over a few courses and windows, with nulls.
func tableRows(n int) []row.Row {
	var rows []row.Row
	base := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC).UnixMicro()
	for i := range n {
		r := row.Row{
			row.TimestampValue(base + int64(i)*int64(17*time.Second/time.Microsecond)),
			row.StringValue(fmt.Sprintf("c-%d\x00%d", i%7, i%2)),
			row.LongValue(int64(i*i - 50)),
			row.DoubleValue(float64(i) / 3),
		}
		if i%11 == 0 {
			r[3] = row.Value{}
		}
		rows = append(rows, r)
	}
	return rows
}

func partialsOf(t testing.TB, l *agg.Layout, rows []row.Row, parts int) [][]agg.Entry {
	tab := agg.NewTable(l)
	for _, r := range rows {
		tab.Add(r, eventtime.Watermark(math.MinInt64))
	}
	return tab.Partition(parts)
}

// encodeAccs renders partials as their output rows (sketches compare by
// estimate: their encoding is not canonical).
func encodeAccs(l *agg.Layout, es []agg.Entry) []string {
	var out []string
	for _, e := range es {
		r, err := l.OutputRow([]byte(e.Key), e.Accs)
		if err != nil {
			panic(err)
		}
		out = append(out, fmt.Sprint(r))
	}
	return out
}

func TestPartialsSurviveEncodingInChunksOfAnySize(t *testing.T) {
	l := layoutAllMeasures(t)
	want := partialsOf(t, l, tableRows(500), 1)[0]
	if len(want) < 20 {
		t.Fatalf("only %d groups: the test needs more", len(want))
	}
	for _, target := range []int{1, 64, 1 << 20} {
		var chunks [][]byte
		c := NewChunker(target, func(b []byte) error { chunks = append(chunks, b); return nil })
		var scratch []byte
		for _, e := range want {
			var b []byte
			b, scratch = AppendEntry(c.Buf(), l, e, scratch)
			if err := c.Done(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		if target == 1 && len(chunks) != len(want) {
			t.Fatalf("target 1: %d chunks for %d groups, want one per group", len(chunks), len(want))
		}
		got, err := DecodePartials(l, [][][]byte{chunks})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(encodeAccs(l, want), encodeAccs(l, got[0])) {
			t.Fatalf("target %d: decoded partials differ from the encoded ones", target)
		}
	}
}

func TestRowsSurviveEncodingWithEveryKind(t *testing.T) {
	want := []row.Row{
		{row.Value{}, row.StringValue(""), row.StringValue("héllo\x00"), row.LongValue(math.MinInt64), row.LongValue(math.MaxInt64)},
		{row.DoubleValue(math.Inf(-1)), row.DoubleValue(-0.5), row.BoolValue(true), row.BoolValue(false), row.TimestampValue(-1)},
		{},
	}
	var b []byte
	for _, r := range want {
		b = AppendRow(b, r)
	}
	got, err := DecodeRows(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := DecodeRows(b[:len(b)-3], nil); err == nil {
		t.Fatal("a truncated chunk decoded without error")
	}
}

func TestTruncatedPartialIsAnError(t *testing.T) {
	l := layoutAllMeasures(t)
	es := partialsOf(t, l, tableRows(10), 1)[0]
	b, _ := AppendEntry(nil, l, es[0], nil)
	for cut := 1; cut < len(b); cut++ {
		if _, err := DecodeEntries(l, b[:cut], nil); err == nil {
			t.Fatalf("cut at %d of %d decoded without error", cut, len(b))
		}
	}
	if _, err := DecodeEntries(l, b, nil); err != nil {
		t.Fatal(err)
	}
}
