package agg

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// BenchmarkReduce is one state partition's reduce when a batch touches
// many groups, every one already in the state (a large key space): the
// merge into the state, the eviction scan, and in update mode the sorted
// output of every touched group. Compare builds with go test -bench, never
// with a timing assertion.
func BenchmarkReduce(b *testing.B) {
	for _, mode := range []query.OutputMode{query.Append, query.Update} {
		for _, groups := range []int{1000, 100000} {
			b.Run(fmt.Sprintf("%s/groups=%d", mode, groups), func(b *testing.B) {
				spec := query.Spec{
					Name: "b", OutputMode: mode,
					Source: query.Source{Schema: []query.Field{{Name: "t", Type: "timestamp"}, {Name: "key", Type: "string"}}},
					Aggregate: &query.Aggregate{
						Window:   &query.Window{Column: "t", Size: query.Duration(5 * time.Minute)},
						GroupBy:  []string{"key"},
						Measures: []query.Measure{{Name: "count", Fn: query.FnCount}},
					},
				}
				l, err := Compile(&spec)
				if err != nil {
					b.Fatal(err)
				}
				t := NewTable(l)
				for i := range groups {
					t.Add(row.Row{row.TimestampValue(int64(i)), row.StringValue(fmt.Sprintf("course-%06d", i))}, 0)
				}
				partials := [][]Entry{t.Partition(1)[0]}
				st := mapState{}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, _, err := l.Reduce(st, partials, eventtime.Batch{}); err != nil {
						b.Fatal(err)
					}
				}
				if len(st) != groups {
					b.Fatalf("state holds %d groups, want %d", len(st), groups)
				}
			})
		}
	}
}

// BenchmarkSessionBatch is one batch of a session window over 100,000
// rows of 10,000 keys (ten rows a key, a minute apart, gap 5 minutes): the
// map side (Add and Partition's merge) and one state partition's reduce
// into a state that already holds every key's session (in-memory map;
// the stores' costs are measured in statestore). Reported per row.
func BenchmarkSessionBatch(b *testing.B) {
	spec := query.Spec{
		Name: "b", OutputMode: query.Append,
		Source:    query.Source{Schema: []query.Field{{Name: "t", Type: "timestamp"}, {Name: "key", Type: "string"}}},
		Watermark: &query.Watermark{Column: "t", Delay: query.Duration(time.Hour)},
		Aggregate: &query.Aggregate{
			SessionWindow: &query.SessionWindow{Column: "t", Gap: query.Duration(5 * time.Minute)},
			GroupBy:       []string{"key"},
			Measures:      []query.Measure{{Name: "count", Fn: query.FnCount}},
		},
	}
	l, err := Compile(&spec)
	if err != nil {
		b.Fatal(err)
	}
	const keys, perKey = 10000, 10
	rows := make([]row.Row, 0, keys*perKey)
	for j := range perKey {
		for i := range keys {
			rows = append(rows, row.Row{row.TimestampValue(int64(j) * int64(time.Minute/time.Microsecond)), row.StringValue(fmt.Sprintf("user-%06d", i))})
		}
	}
	st := rangeState{mapState{}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t := NewTable(l)
		for _, r := range rows {
			t.Add(r, 0)
		}
		if _, _, err := l.Reduce(st, [][]Entry{t.Partition(1)[0]}, eventtime.Batch{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
