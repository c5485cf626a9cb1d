package wire

import (
	"math"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/aggtest"
	"github.com/sluicehq/sluice/row"
)

func TestPartialsSurviveEncodingInChunksOfAnySize(t *testing.T) {
	l := aggtest.LayoutAllMeasures(t)
	want := aggtest.Partials(t, l, aggtest.TableRows(500), 1)[0]
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
		if !reflect.DeepEqual(aggtest.OutputRows(l, want), aggtest.OutputRows(l, got[0])) {
			t.Fatalf("target %d: decoded partials differ from the encoded ones", target)
		}
	}
}

func TestRowsSurviveEncodingWithEveryKind(t *testing.T) {
	want := []row.Row{
		{row.Value{}, row.StringValue(""), row.StringValue("héllo\x00"), row.LongValue(math.MinInt64), row.LongValue(math.MaxInt64)},
		{row.DoubleValue(math.Inf(-1)), row.DoubleValue(-0.5), row.BoolValue(true), row.BoolValue(false), row.TimestampValue(-1)},
		// int, date and decimal (small, negative, and past an int64 in S)
		{row.Value{Kind: row.Int, I: math.MinInt32}, row.Value{Kind: row.Date, I: -719162}, row.Value{Kind: row.Decimal, Scale: 2, I: -12345},
			row.Value{Kind: row.Decimal, Scale: 38, S: "-99999999999999999999999999999999999999"}, row.Value{Kind: row.Decimal}},
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
	l := aggtest.LayoutAllMeasures(t)
	es := aggtest.Partials(t, l, aggtest.TableRows(10), 1)[0]
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
