package statestore

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// BenchmarkMemoryBatch is one reduce's work on a large in-memory partition:
// every group updated, the whole partition scanned (the eviction check),
// then the commit that encodes and writes the delta. Compare builds with
// go test -bench, never with a timing assertion.
func BenchmarkMemoryBatch(b *testing.B) {
	for _, groups := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			ctx := context.Background()
			p := NewMemory(objstore.NewMem(), MemoryOptions{SnapshotInterval: 1 << 30})
			keys := make([][]byte, groups)
			for i := range keys {
				keys[i] = binary.BigEndian.AppendUint64([]byte("course-"), uint64(i))
			}
			value := make([]byte, 24)
			b.ReportAllocs()
			b.ResetTimer()
			for v := 0; v < b.N; v++ {
				st, err := p.Open(ctx, 0, Version(v))
				if err != nil {
					b.Fatal(err)
				}
				binary.BigEndian.PutUint64(value, uint64(v))
				for _, k := range keys {
					if err := st.Put(k, value); err != nil {
						b.Fatal(err)
					}
				}
				rows := 0
				if err := st.Scan(func(key, value []byte) error { rows++; return nil }); err != nil {
					b.Fatal(err)
				}
				if rows != groups {
					b.Fatalf("scan saw %d rows, want %d", rows, groups)
				}
				if _, err := st.Commit(ctx, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
