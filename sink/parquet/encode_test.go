package parquet

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// encodeRowWise is the encoding as it was before encodeTo wrote column by
// column: one parquet.Row per row, through WriteRows. It is the oracle:
// the column-wise encoding must give its bytes.
func encodeRowWise(out io.Writer, schema *pq.Schema, cols []query.Column, rows []row.Row, opts ...pq.WriterOption) error {
	w := pq.NewWriter(out, append([]pq.WriterOption{schema, pq.Compression(&pq.Snappy), &pq.WriterConfig{CreatedBy: createdBy}}, opts...)...)
	prow := make(pq.Row, len(cols))
	batch := []pq.Row{prow}
	for i, r := range rows {
		for c, v := range r {
			pv, err := toParquet(v, cols[c])
			if err != nil {
				return fmt.Errorf("encode row %d: %w", i, err)
			}
			def := 1
			if v.IsNull() {
				def = 0
			}
			prow[c] = pv.Level(0, def, c)
		}
		if _, err := w.WriteRows(batch); err != nil {
			return fmt.Errorf("encode row %d: %w", i, err)
		}
	}
	return w.Close()
}

// toParquet is the conversion the row-wise encoding made.
func toParquet(v row.Value, c query.Column) (pq.Value, error) {
	if v.IsNull() {
		return pq.NullValue(), nil
	}
	if v.Kind != c.Kind {
		return pq.Value{}, fmt.Errorf("column %s holds a %s value, want %s", c.Name, v.Kind, c.Kind)
	}
	switch v.Kind {
	case row.String:
		return pq.ByteArrayValue([]byte(v.S)), nil
	case row.Long, row.Timestamp:
		return pq.Int64Value(v.I), nil
	case row.Double:
		return pq.DoubleValue(v.F), nil
	case row.Bool:
		return pq.BooleanValue(v.I != 0), nil
	}
	return pq.Value{}, fmt.Errorf("column %s: kind %s has no parquet value", c.Name, v.Kind)
}

var everyKindCols = []query.Column{
	{Name: "window_start", Kind: row.Timestamp},
	{Name: "course_id", Kind: row.String},
	{Name: "n", Kind: row.Long},
	{Name: "avg", Kind: row.Double},
	{Name: "flag", Kind: row.Bool},
}

// everyKindRows are n rows of every kind, a tenth of the values null,
// strings of varied length (some long enough to fill pages quickly).
func everyKindRows(n int, seed uint64) []row.Row {
	rng := rand.New(rand.NewPCG(seed, 7))
	rows := make([]row.Row, n)
	for i := range rows {
		r := row.Row{
			row.TimestampValue(int64(i/50) * 300_000_000),
			row.StringValue(fmt.Sprintf("c-%d%s", rng.IntN(1_000_000), strings.Repeat("x", rng.IntN(40)))),
			row.LongValue(rng.Int64N(1 << 40)),
			row.DoubleValue(rng.Float64()),
			row.BoolValue(rng.IntN(2) == 0),
		}
		for c := range r {
			if rng.IntN(10) == 0 {
				r[c] = row.Value{}
			}
		}
		rows[i] = r
	}
	return rows
}

func TestColumnWiseEncodingIsTheRowWiseBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cols  []query.Column
		rows  []row.Row
		spool bool
	}{
		{"one row", everyKindCols, everyKindRows(1, 1), false},
		{"every kind, nulls", everyKindCols, everyKindRows(3000, 2), false},
		{"many pages", everyKindCols, everyKindRows(200_000, 3), false},
		{"many pages, spooled", everyKindCols, everyKindRows(60_000, 4), true},
		{"wide strings", wideCols, wideRows(40_000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema, err := buildSchema(tc.cols)
			if err != nil {
				t.Fatal(err)
			}
			var opts []pq.WriterOption
			if tc.spool {
				opts = []pq.WriterOption{pq.ColumnPageBuffers(pq.NewFileBufferPool(t.TempDir(), "column-*"))}
			}
			var want, got bytes.Buffer
			if err := encodeRowWise(&want, schema, tc.cols, tc.rows, opts...); err != nil {
				t.Fatal(err)
			}
			if err := encodeTo(&got, schema, tc.cols, tc.rows, opts...); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want.Bytes(), got.Bytes()) {
				t.Fatalf("column-wise encoding: %d bytes, row-wise %d, and they differ", got.Len(), want.Len())
			}
			_, back, err := ReadFile(got.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if !sameRowsInOrder(back, tc.rows) {
				t.Fatal("the file does not read back as its rows")
			}
		})
	}
	schema, _ := buildSchema(everyKindCols)
	rows := everyKindRows(100, 5)
	rows[70][2] = row.StringValue("not a long")
	rows[90][1] = row.LongValue(1)
	var want, got bytes.Buffer
	werr := encodeRowWise(&want, schema, everyKindCols, rows)
	gerr := encodeTo(&got, schema, everyKindCols, rows)
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() || !strings.Contains(gerr.Error(), "row 70") {
		t.Fatalf("a value of the wrong kind: %v, row-wise %v", gerr, werr)
	}
}

// BenchmarkEncode is one reduce task's file of tile rows (window start
// and end, course, count), row-wise (the old encoding) against column-wise.
// Compare with go test -bench, never with a timing assertion.
func BenchmarkEncode(b *testing.B) {
	cols := []query.Column{{Name: "window_start", Kind: row.Timestamp}, {Name: "window_end", Kind: row.Timestamp},
		{Name: "course_id", Kind: row.String}, {Name: "n", Kind: row.Long}}
	rows := make([]row.Row, 60_000)
	for i := range rows {
		rows[i] = row.Row{row.TimestampValue(int64(i/20_000) * 300e6), row.TimestampValue(int64(i/20_000+1) * 300e6),
			row.StringValue(fmt.Sprintf("c-%06d", i*7%1_000_000)), row.LongValue(int64(1 + i%3))}
	}
	schema, _ := buildSchema(cols)
	for _, enc := range []struct {
		name string
		fn   func(io.Writer, *pq.Schema, []query.Column, []row.Row, ...pq.WriterOption) error
	}{{"row-wise", encodeRowWise}, {"column-wise", encodeTo}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := enc.fn(io.Discard, schema, cols, rows); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// splitByFormat is split as it was: each row's date formatted, grouped in
// a map. The oracle for split's day numbers.
func splitByFormat(rows []row.Row, dateCol int) map[string][]row.Row {
	byDir := map[string][]row.Row{}
	for _, r := range rows {
		date := nullPartition
		if v := r[dateCol]; !v.IsNull() {
			date = v.Time().Format("2006-01-02")
		}
		dir := PartitionByWindowDate + "=" + date + "/"
		byDir[dir] = append(byDir[dir], r)
	}
	return byDir
}

func TestSplitGroupsRowsByTheirUTCDate(t *testing.T) {
	cols := []query.Column{{Name: "window_start", Kind: row.Timestamp}, {Name: "n", Kind: row.Long}}
	s := New(objstore.NewMem(), cols, Options{PartitionBy: PartitionByWindowDate})
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var rows []row.Row
	for i := range 5000 {
		var v row.Value
		switch r := rng.IntN(20); {
		case r == 0:
		case r < 4:
			v = row.TimestampValue(-rng.Int64N(1e15)) // before 1970
		case r < 6:
			v = row.TimestampValue(int64(rng.IntN(5)) * 86_400_000_000) // midnight exactly
		default:
			v = row.TimestampValue(1_700_000_000_000_000 + int64(i/100)*3_600_000_000 + rng.Int64N(1e9))
		}
		rows = append(rows, row.Row{v, row.LongValue(int64(i))})
	}
	groups, err := s.split(rows)
	if err != nil {
		t.Fatal(err)
	}
	want := splitByFormat(rows, 0)
	if len(groups) != len(want) {
		t.Fatalf("%d directories, want %d", len(groups), len(want))
	}
	for i, g := range groups {
		if i > 0 && groups[i-1].dir >= g.dir {
			t.Fatalf("directories out of order: %s after %s", g.dir, groups[i-1].dir)
		}
		if !sameRowsInOrder(g.rows, want[g.dir]) {
			t.Fatalf("%s: %d rows, want %d in the same order", g.dir, len(g.rows), len(want[g.dir]))
		}
	}
}
