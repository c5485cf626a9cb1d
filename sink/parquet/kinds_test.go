package parquet

import (
	"bytes"
	"context"
	"math"
	"reflect"
	"testing"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// The kinds only expressions make (int, date, decimal) are written as
// Spark writes them (ParquetWriteSupport, writeLegacyFormat false): int
// INT32, date INT32 DATE, decimal(p,s) DECIMAL(p,s) on INT32 for p <= 9,
// INT64 for p <= 18, else a FIXED_LEN_BYTE_ARRAY of
// Decimal.minBytesForPrecision(p) bytes; and they read back as written.
func TestIntDateAndDecimalColumnsAreSparksTypesAndReadBack(t *testing.T) {
	cols := []query.Column{
		{Name: "i", Kind: row.Int},
		{Name: "d", Kind: row.Date},
		{Name: "small", Kind: row.Decimal, Precision: 5, Scale: 2},
		{Name: "mid", Kind: row.Decimal, Precision: 18, Scale: 4},
		{Name: "wide", Kind: row.Decimal, Precision: 38, Scale: 10},
		{Name: "odd", Kind: row.Decimal, Precision: 20, Scale: 0},
	}
	dec := func(scale uint8, i int64) row.Value { return row.Value{Kind: row.Decimal, Scale: scale, I: i} }
	big := func(scale uint8, s string) row.Value { return row.Value{Kind: row.Decimal, Scale: scale, S: s} }
	in := []row.Row{
		{{Kind: row.Int, I: 42}, {Kind: row.Date, I: 20_000}, dec(2, 12345), dec(4, 999_999_999_999_999_999), big(10, "99999999999999999999999999999999999999"), big(0, "-99999999999999999999")},
		{{}, {}, {}, {}, {}, {}},
		{{Kind: row.Int, I: math.MinInt32}, {Kind: row.Date, I: -719_162}, dec(2, -99999), dec(4, -1), dec(10, math.MinInt64), dec(0, 0)},
		{{Kind: row.Int, I: math.MaxInt32}, {Kind: row.Date, I: 0}, dec(2, 0), dec(4, 1), big(10, "-99999999999999999999999999999999999999"), dec(0, math.MaxInt64)},
	}
	st := newStore(t)
	s := New(st, cols, Options{})
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	descs, err := s.WritePartition(context.Background(), sink.Batch{QueryID: queryA, ID: 0}, 0, in)
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.Get(context.Background(), visible(t, st, descs)[0])
	if err != nil {
		t.Fatal(err)
	}
	gotCols, got, err := ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotCols, cols) {
		t.Errorf("columns read back %v, want %v", gotCols, cols)
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("rows read back differ:\n got %v\nwant %v", got, in)
	}

	f, err := pq.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		phys      pq.Kind
		length    int // fixed length, for FIXED_LEN_BYTE_ARRAY
		logical   string
		prec, scl int32
	}
	wants := []want{
		{pq.Int32, 0, "int", 0, 0},
		{pq.Int32, 0, "date", 0, 0},
		{pq.Int32, 0, "decimal", 5, 2},
		{pq.Int64, 0, "decimal", 18, 4},
		{pq.FixedLenByteArray, 16, "decimal", 38, 10}, // minBytesForPrecision(38) = 16
		{pq.FixedLenByteArray, 9, "decimal", 20, 0},   // minBytesForPrecision(20) = 9
	}
	for i, c := range f.Root().Columns() {
		w := wants[i]
		typ := c.Type()
		if typ.Kind() != w.phys || (w.length > 0 && typ.Length() != w.length) {
			t.Errorf("%s: physical type %s (length %d), want %s (%d)", c.Name(), typ.Kind(), typ.Length(), w.phys, w.length)
		}
		lt := typ.LogicalType()
		var got string
		var p, sc int32
		switch l := lt.Value.(type) {
		case *format.IntType:
			got = "int"
			if l.BitWidth != 32 || !l.IsSigned {
				t.Errorf("%s: INT(%d, %v), want INT(32, signed)", c.Name(), l.BitWidth, l.IsSigned)
			}
		case *format.DateType:
			got = "date"
		case *format.DecimalType:
			got, p, sc = "decimal", l.Precision, l.Scale
		}
		if got != w.logical || p != w.prec || sc != w.scl {
			t.Errorf("%s: logical type %s(%d,%d), want %s(%d,%d)", c.Name(), got, p, sc, w.logical, w.prec, w.scl)
		}
	}
}

// A decimal of another scale than its column's is refused before anything
// is written.
func TestDecimalOfTheWrongScaleIsRefused(t *testing.T) {
	cols := []query.Column{{Name: "x", Kind: row.Decimal, Precision: 5, Scale: 2}}
	s := New(newStore(t), cols, Options{})
	_, err := s.WritePartition(context.Background(), sink.Batch{QueryID: queryA, ID: 0}, 0, []row.Row{{{Kind: row.Decimal, Scale: 3, I: 1}}})
	if err == nil {
		t.Fatal("a decimal of scale 3 was written to a decimal(5,2) column")
	}
}
