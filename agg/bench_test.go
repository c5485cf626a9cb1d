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
