package dedup_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dedup"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/statestore"
)

// BenchmarkDedupBatch is one batch of 100,000 rows, one in ten a
// duplicate, through a map task's Table and one state partition's reduce
// on the in-memory store (changed and aborted: no commit; opening and
// aborting not measured), with a watermark that evicts the previous
// batch's 90,000 keys. Reported per row.
func BenchmarkDedupBatch(b *testing.B) {
	spec := query.Spec{
		Name:      "b",
		Source:    query.Source{Schema: schema},
		Watermark: &query.Watermark{Column: "t", Delay: query.Duration(time.Minute)},
		Dedup:     &query.Dedup{Keys: []string{"id"}},
	}
	l, err := dedup.Compile(&spec)
	if err != nil {
		b.Fatal(err)
	}
	const n = 100000
	batch := func(k int) []row.Row {
		rows := make([]row.Row, n)
		for i := range rows {
			id := k*n + i
			if i%10 == 9 {
				id--
			}
			rows[i] = row.Row{row.TimestampValue(int64(k+1) * int64(time.Hour/time.Microsecond)), row.StringValue(fmt.Sprintf("event-%09d", id)), row.LongValue(1)}
		}
		return rows
	}
	prov := statestore.NewMemory(objstore.NewMem(), statestore.MemoryOptions{Operator: 1, BoundPrefix: true})
	// A first batch's keys in state, which the benchmark's watermark evicts.
	st, err := prov.Open(b.Context(), ids.PartitionID(0), 0)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := l.Reduce(st, [][]row.Row{batch(0)}, eventtime.Batch{}); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Commit(b.Context(), ""); err != nil {
		b.Fatal(err)
	}
	rows := batch(1)
	w := eventtime.Watermark(time.Hour.Microseconds() * 3 / 2)
	wm := eventtime.Batch{Late: w, Evict: w}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// Opening reloads the version the last iteration aborted: not
		// measured.
		b.StopTimer()
		st, err := prov.Open(b.Context(), ids.PartitionID(0), 1)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		tbl := dedup.NewTable(l, 1)
		for _, r := range rows {
			tbl.Add(r, wm.Late)
		}
		kept, stats, err := l.Reduce(st, [][]row.Row{tbl.Rows()[0]}, wm)
		if err != nil || len(kept) != n-n/10 || stats.Removed != n-n/10 {
			b.Fatalf("kept %d, evicted %d: %v", len(kept), stats.Removed, err)
		}
		b.StopTimer()
		st.Abort()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}
