package parquet

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// gatheredParts returns n partitions' outputs over two dates, every other
// partition empty, and all their rows.
func gatheredParts(n int) ([]sink.PartitionRows, []row.Row) {
	var parts []sink.PartitionRows
	var all []row.Row
	for p := range ids.PartitionID(n) {
		var rows []row.Row
		if p%2 == 1 {
			for d := range 2 {
				rows = append(rows, tileRow(fmt.Sprintf("2024-03-0%dT10:00:00Z", d+1), fmt.Sprintf("c%d", p), int64(p)))
			}
		}
		parts = append(parts, sink.PartitionRows{Partition: p, Rows: rows})
		all = append(all, rows...)
	}
	return parts, all
}

// The gathered outputs of a batch become one file per directory, named for
// the lowest partition with rows, holding every part's rows in partition
// order; committed, a directory reader sees each row once.
func TestGatheredOutputsAreOneFilePerDirectoryNamedForTheirFirstPartition(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			s := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			b := sink.Batch{QueryID: queryA, ID: 12}
			parts, all := gatheredParts(8)
			descs, err := s.WriteGathered(ctx, b, parts)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, d := range descs {
				u, _, err := parseDescriptor(d)
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, u.Key)
			}
			name := FileName(queryA, 12, 1)
			if want := []string{"window_date=2024-03-01/" + name, "window_date=2024-03-02/" + name}; !slices.Equal(keys, want) {
				t.Fatalf("gathered files %v, want %v", keys, want)
			}
			if got := readVisible(t, st); len(got) != 0 {
				t.Fatalf("gathered rows visible before commit: %v", got)
			}
			if err := s.Commit(ctx, b, descs); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, st); !sameRows(got, all) {
				t.Fatalf("visible = %v, want %v", got, all)
			}
			data, err := st.Get(ctx, keys[0])
			if err != nil {
				t.Fatal(err)
			}
			_, rows, err := ReadFile(data)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(rows); i++ {
				if rows[i-1][2].S > rows[i][2].S {
					t.Fatalf("rows of %s are not in partition order: %v", keys[0], rows)
				}
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// Gathering the same parts again (another attempt, another process's sink)
// writes the same objects, byte for byte.
func TestGatheredFilesOfARerunAreByteIdentical(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	b := sink.Batch{QueryID: queryA, ID: 3}
	parts, _ := gatheredParts(6)
	var got [][]byte
	var names [][]string
	for range 2 {
		descs, err := New(st, tileSchema, Options{PartitionBy: "window_date"}).WriteGathered(ctx, b, parts)
		if err != nil {
			t.Fatal(err)
		}
		keys := visible(t, st, descs)
		data, err := st.Get(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		got, names = append(got, data), append(names, keys)
	}
	if !slices.Equal(names[0], names[1]) || !bytes.Equal(got[0], got[1]) {
		t.Fatalf("a re-run gathered %v into other bytes than %v", names[1], names[0])
	}
}

// A group of gathered parts holds at most one upload part's size
// (estimated); the next part starts a file named for it. A part larger
// than that is a file of its own.
func TestGatheredPartsSplitIntoFilesOfBoundedSize(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	s := New(st, tileSchema, Options{})
	parts, _ := gatheredParts(8) // rows in partitions 1, 3, 5, 7
	s.partSize = int(estimateSize(parts[1].Rows)*2 + 1)
	parts[5].Rows = append(parts[5].Rows, parts[5].Rows...) // two parts' worth: alone
	descs, err := s.WriteGathered(ctx, sink.Batch{QueryID: queryA, ID: 0}, parts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range visible(t, st, descs) {
		names = append(names, path.Base(k))
	}
	want := []string{FileName(queryA, 0, 1), FileName(queryA, 0, 5), FileName(queryA, 0, 7)}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v (1 and 3 together, 5 alone, then 7)", names, want)
	}
	var rows []row.Row
	for _, p := range parts {
		rows = append(rows, p.Rows...)
	}
	if got := readVisible(t, st); !sameRows(got, rows) {
		t.Fatalf("visible = %v, want %v", got, rows)
	}
}

// Partitions written by their tasks and gathered ones commit together
// without sharing a name, and a re-run that reads other data and splits
// the batch differently leaves only its own files.
func TestGatheredAndTaskWrittenFilesOfABatchCommitTogether(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			b := sink.Batch{QueryID: queryA, ID: 4}
			// First attempt: partition 0 written by its task, 1-3 gathered.
			s1 := New(st, tileSchema, Options{})
			if err := s1.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if _, err := s1.WritePartition(ctx, b, 0, []row.Row{tileRow("2024-03-01T10:00:00Z", "old0", 1)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s1.WriteGathered(ctx, b, []sink.PartitionRows{{Partition: 1, Rows: []row.Row{tileRow("2024-03-01T10:00:00Z", "old1", 1)}}}); err != nil {
				t.Fatal(err)
			}
			// The driver dies; the re-run gathers partition 0 and writes
			// partition 1 in its task.
			s2 := New(st, tileSchema, Options{})
			if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			want := []row.Row{tileRow("2024-03-01T10:00:00Z", "new0", 2), tileRow("2024-03-01T10:00:00Z", "new1", 2), tileRow("2024-03-01T10:00:00Z", "new2", 2)}
			own, err := s2.WritePartition(ctx, b, 1, want[1:2])
			if err != nil {
				t.Fatal(err)
			}
			gathered, err := s2.WriteGathered(ctx, b, []sink.PartitionRows{{Partition: 0, Rows: want[:1]}, {Partition: 2, Rows: want[2:]}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s2.Commit(ctx, b, append(own, gathered...)); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, st); !sameRows(got, want) {
				t.Fatalf("visible = %v, want only the re-run's %v", got, want)
			}
			if _, got, err := ReadCommitted(ctx, st); err != nil || !sameRows(got, want) {
				t.Fatalf("ReadCommitted = %v, %v; want %v", got, err, want)
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// The bound: Options.GatherBelow (64 KiB by default), at most 4 MiB over
// the batch's partitions; never on a store whose files are visible as
// soon as written; never when GatherBelow is negative.
func TestGatherBelowBoundsAPartitionAndTheBatch(t *testing.T) {
	fs := newStore(t)
	for _, c := range []struct {
		name       string
		store      objstore.Store
		opt        int64
		partitions int
		want       int64
	}{
		{"default", fs, 0, 8, DefaultGatherBelow},
		{"many partitions", fs, 0, 1024, gatherBudget / 1024},
		{"option", fs, 100, 8, 100},
		{"off", fs, -1, 8, 0},
		{"no multipart", plainStore{fs}, 0, 8, 0},
	} {
		s := New(c.store, tileSchema, Options{GatherBelow: c.opt})
		if got := s.GatherBelow(c.partitions); got != c.want {
			t.Errorf("%s: GatherBelow(%d) = %d, want %d", c.name, c.partitions, got, c.want)
		}
	}
	s := New(fs, tileSchema, Options{})
	rows := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 1)}
	if n := estimateSize(rows); !s.Gather(rows, n) || s.Gather(rows, n-1) || s.Gather(nil, 0) {
		t.Errorf("Gather: rows of %d bytes gathered below %d and %d, or anything below 0", n, n, n-1)
	}
}

// plainStore is a store without Multipart.
type plainStore struct{ objstore.Store }

func TestGatheredPartsOutOfOrderAreRefused(t *testing.T) {
	s := New(newStore(t), tileSchema, Options{})
	r := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 1)}
	_, err := s.WriteGathered(context.Background(), sink.Batch{QueryID: queryA, ID: 0}, []sink.PartitionRows{{Partition: 2, Rows: r}, {Partition: 1, Rows: r}})
	if err == nil {
		t.Fatal("parts out of order were written")
	}
}
