// Package aggtest builds the aggregation fixtures that the tests of the
// shuffle and of the wire codec share: a layout with every measure, input
// rows with nulls, and their partials.
package aggtest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// LayoutAllMeasures is a windowed aggregation with every measure function.
func LayoutAllMeasures(t testing.TB) *agg.Layout {
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

// TableRows returns n input rows over a few courses and windows, with nulls.
func TableRows(n int) []row.Row {
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

// Partials folds rows into one table and splits it into parts partitions.
func Partials(t testing.TB, l *agg.Layout, rows []row.Row, parts int) [][]agg.Entry {
	tab := agg.NewTable(l)
	for _, r := range rows {
		tab.Add(r, eventtime.Watermark(math.MinInt64))
	}
	return tab.Partition(parts)
}

// OutputRows renders partials as their output rows (sketches compare by
// estimate: their encoding is not canonical).
func OutputRows(l *agg.Layout, es []agg.Entry) []string {
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
