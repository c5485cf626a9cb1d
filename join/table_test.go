package join

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

func testSpec(typ string, withID bool) *query.Spec {
	return &query.Spec{
		Source: query.Source{Schema: []query.Field{
			{Name: "event_id", Type: "string"}, {Name: "lesson_id", Type: "string"}, {Name: "n", Type: "long"},
		}},
		Join: &query.Join{Keys: []string{"lesson_id", "n"}, Type: typ, WithManifestID: withID,
			Columns: []query.JoinColumn{{Name: "module", Type: "string"}}},
	}
}

func snap(t *testing.T, idCol string, rows ...row.Row) *Snapshot {
	t.Helper()
	cols := []query.Column{{Name: "lesson_id", Kind: row.String}, {Name: "n", Kind: row.Long}, {Name: "module", Kind: row.String}, {Name: "mid", Kind: row.String}}
	s, err := NewSnapshot(cols, rows, idCol)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dimRow(lesson string, n int64, module, mid string) row.Row {
	return row.Row{row.StringValue(lesson), row.LongValue(n), row.StringValue(module), row.StringValue(mid)}
}

func ev(id string, lesson row.Value, n int64) row.Row {
	return row.Row{row.StringValue(id), lesson, row.LongValue(n)}
}

func apply(t *testing.T, tab *Table, r row.Row) []string {
	var out []string
	rows, _ := tab.Apply(r, nil)
	for _, jr := range rows {
		var parts []string
		for _, v := range jr {
			parts = append(parts, v.String())
		}
		out = append(out, strings.Join(parts, ","))
	}
	return out
}

func TestApplyLeftInnerNullKeyAndFanOut(t *testing.T) {
	s := snap(t, "mid",
		dimRow("l1", 1, "intro", "m1"),
		dimRow("l2", 1, "joins", "m1"),
		dimRow("l2", 1, "joins-again", "m1"), // two matches: two rows, as in SQL
		dimRow("l3", 2, "other-n", "m1"),
	)
	cases := []struct {
		typ  string
		ev   row.Row
		want []string
	}{
		{query.JoinLeft, ev("e1", row.StringValue("l1"), 1), []string{"e1,l1,1,intro,m1"}},
		{query.JoinLeft, ev("e2", row.StringValue("l2"), 1), []string{"e2,l2,1,joins,m1", "e2,l2,1,joins-again,m1"}},
		{query.JoinLeft, ev("e3", row.StringValue("l3"), 1), []string{"e3,l3,1,null,m1"}}, // second key differs
		{query.JoinLeft, ev("e4", row.Value{}, 1), []string{"e4,null,1,null,m1"}},         // null key matches nothing
		{query.JoinInner, ev("e5", row.StringValue("zz"), 1), nil},
		{query.JoinInner, ev("e6", row.StringValue("l1"), 1), []string{"e6,l1,1,intro,m1"}},
	}
	for _, c := range cases {
		tab, err := NewTable(testSpec(c.typ, true), s)
		if err != nil {
			t.Fatal(err)
		}
		got := apply(t, tab, c.ev)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s join of %v = %v, want %v", c.typ, c.ev, got, c.want)
		}
	}
}

func TestManifestIDFromColumnOrHash(t *testing.T) {
	a := snap(t, "", dimRow("l1", 1, "intro", "x"), dimRow("l2", 1, "joins", "x"))
	b := snap(t, "", dimRow("l2", 1, "joins", "x"), dimRow("l1", 1, "intro", "x"))
	if a.Ref != b.Ref || len(a.Ref.ID) != idHashLen || !strings.HasPrefix(a.Ref.Hash, a.Ref.ID) {
		t.Fatalf("the same content in another order has refs %+v and %+v; want equal, id a hash prefix", a.Ref, b.Ref)
	}
	c := snap(t, "", dimRow("l1", 1, "basics", "x"), dimRow("l2", 1, "joins", "x"))
	if c.Ref.Hash == a.Ref.Hash {
		t.Fatal("a changed module kept the content hash")
	}
	if got := snap(t, "mid", dimRow("l1", 1, "intro", "m7")).Ref.ID; got != "m7" {
		t.Fatalf("id from column = %q, want m7", got)
	}
	cols := []query.Column{{Name: "lesson_id", Kind: row.String}, {Name: "n", Kind: row.Long}, {Name: "module", Kind: row.String}, {Name: "mid", Kind: row.String}}
	if _, err := NewSnapshot(cols, []row.Row{dimRow("l1", 1, "a", "m1"), dimRow("l2", 1, "b", "m2")}, "mid"); err == nil || !strings.Contains(err.Error(), "2 distinct values") {
		t.Fatalf("two manifest ids in one snapshot: err %v", err)
	}
	if _, err := NewSnapshot(cols, nil, "mid"); err == nil {
		t.Fatal("an empty manifest with a manifestIdColumn names no id, yet was accepted")
	}
}

func TestSnapshotRoundTripAndCorruption(t *testing.T) {
	s := snap(t, "mid", dimRow("l1", 1, "intro", "m1"), row.Row{row.StringValue("l2"), row.Value{}, row.Value{}, row.StringValue("m1")})
	s.Source, s.TakenAt = "s3://b/manifest", "2026-03-02T06:00:00Z"
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref != s.Ref || len(got.Rows) != 2 || got.Rows[0][2].S != "intro" || !got.Rows[1][1].IsNull() {
		t.Fatalf("round trip: %+v", got)
	}
	bad := []byte(strings.Replace(string(data), "intro", "intrO", 1))
	if _, err := Decode(bad); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("a changed byte decodes with err %v, want ErrCorruptSnapshot", err)
	}
}

func TestNewTableRefusesASnapshotWithoutTheQuerysColumns(t *testing.T) {
	cols := []query.Column{{Name: "lesson_id", Kind: row.String}, {Name: "n", Kind: row.Long}}
	s, err := NewSnapshot(cols, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTable(testSpec(query.JoinLeft, false), s); err == nil || !strings.Contains(err.Error(), "module") {
		t.Fatalf("err %v, want one naming the missing column module", err)
	}
}

func ev0(lesson string) []row.Value { return row.Row{row.StringValue(lesson)} }
