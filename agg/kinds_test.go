package agg

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/expr"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// A SQL aggregate keyed by int, date and string values, with decimal
// sum, avg, min and max, folded by three map tasks over two batches
// (partials and state through their encodings), equals an oracle on
// math/big: Spark's result types (sum of decimal(10,2) is
// decimal(20,2), avg decimal(14,6) rounded HALF_UP; a sum of
// decimal(38,0) is decimal(38,0) and null past 38 digits).
func TestDecimalMeasuresAndIntDateKeysEqualABigOracle(t *testing.T) {
	s := query.Spec{
		Name: "kinds",
		Source: query.Source{File: &query.FileSource{Path: "/in"}, Schema: []query.Field{
			{Name: "course_id", Type: "string"}, {Name: "event_time", Type: "timestamp"}, {Name: "amount", Type: "string"}, {Name: "big", Type: "string"},
		}},
		SQL: `SELECT course_id, to_date(event_time) AS day, hour(event_time) AS h,
  sum(CAST(amount AS DECIMAL(10,2))) AS s, avg(CAST(amount AS DECIMAL(10,2))) AS a,
  min(CAST(amount AS DECIMAL(10,2))) AS mn, max(CAST(amount AS DECIMAL(10,2))) AS mx,
  sum(CAST(big AS DECIMAL(38,0))) AS bs, count(*) AS n
FROM events GROUP BY course_id, to_date(event_time), hour(event_time)`,
		OutputMode: query.Complete, Sink: query.Sink{JSONBatches: &query.JSONBatchesSink{Path: "/out"}}, CheckpointLocation: "/cp",
	}
	p, err := s.Plan()
	if err != nil {
		t.Fatal(err)
	}
	l, err := CompilePlan(p, s.OutputMode)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, c := range p.Aggregate.Output {
		want = append(want, fmt.Sprintf("%d:%s %s", i, c.Name, c.Type))
	}
	if got := strings.Join(want, ", "); got != "0:course_id string, 1:day date, 2:h int, 3:s decimal(20,2), 4:a decimal(14,6), 5:mn decimal(10,2), 6:mx decimal(10,2), 7:bs decimal(38,0), 8:n bigint" {
		t.Fatalf("aggregate output %s", got)
	}
	es := make([]*expr.Expr, len(p.Computed))
	for i, c := range p.Computed {
		es[i] = c.Expr
	}
	proj, err := expr.CompileProjection(es, expr.Env{})
	if err != nil {
		t.Fatal(err)
	}

	// Input: amounts with two decimals (and some nulls), big values near
	// 10^37 so that some groups' sums pass 38 digits.
	r := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 3, 2, 22, 0, 0, 0, time.UTC)
	type in struct {
		course string
		t      time.Time
		amount string // "" null
		big    string
	}
	var batches [2][]in
	for b := range batches {
		for range 400 {
			e := in{course: fmt.Sprintf("c%d", r.IntN(3)), t: base.Add(time.Duration(r.IntN(4*3600)) * time.Second)}
			if r.IntN(10) > 0 {
				e.amount = fmt.Sprintf("%d.%02d", r.IntN(2_000_000)-1_000_000, r.IntN(100))
			}
			e.big = fmt.Sprintf("%d", r.IntN(9)+1) + strings.Repeat("0", 36)
			if r.IntN(2) == 0 {
				e.big = "-" + e.big
			}
			batches[b] = append(batches[b], e)
		}
	}

	st := mapState{}
	got := map[string]string{}
	for b, rows := range batches {
		var partials [][]Entry
		for m := range 3 {
			tab := NewTable(l)
			for i := m; i < len(rows); i += 3 {
				e := rows[i]
				src := row.Row{row.StringValue(e.course), row.TimeValue(e.t), row.Value{}, row.StringValue(e.big)}
				if e.amount != "" {
					src[2] = row.StringValue(e.amount)
				}
				vals, err := proj.Apply(nil, src)
				if err != nil {
					t.Fatal(err)
				}
				tab.Add(append(src, vals...), 0)
			}
			// Through the shuffle's encoding.
			var enc []Entry
			for _, part := range tab.Partition(1) {
				for _, e := range part {
					b := l.AppendAccs(nil, e.Accs)
					accs := make([]Acc, len(l.Measures))
					if err := l.DecodeAccs(b, accs); err != nil {
						t.Fatal(err)
					}
					enc = append(enc, Entry{Key: e.Key, Accs: accs})
				}
			}
			partials = append(partials, enc)
		}
		out, _, err := l.Reduce(st, partials, eventtime.Batch{})
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		if b == 1 {
			for _, o := range out {
				vs := make([]string, len(o))
				for i, v := range o {
					vs[i] = v.String()
					if v.Kind != row.Null && v.Kind != p.Aggregate.Output[i].Type.Kind {
						t.Fatalf("column %d holds a %s", i, v.Kind)
					}
				}
				got[strings.Join(vs[:3], " ")] = strings.Join(vs[3:], " ")
			}
		}
	}

	// The oracle.
	type acc struct {
		sum, bsum   *big.Rat
		n, nAmount  int64
		minA, maxA  *big.Rat
		minS, maxS  string
		course, day string
		hour        int
		anyAmount   bool
	}
	groups := map[string]*acc{}
	for _, rows := range batches {
		for _, e := range rows {
			k := fmt.Sprintf("%s %s %d", e.course, e.t.Format(time.DateOnly), e.t.Hour())
			a := groups[k]
			if a == nil {
				a = &acc{sum: new(big.Rat), bsum: new(big.Rat)}
				groups[k] = a
			}
			a.n++
			bv, _ := new(big.Rat).SetString(e.big)
			a.bsum.Add(a.bsum, bv)
			if e.amount == "" {
				continue
			}
			v, _ := new(big.Rat).SetString(e.amount)
			a.sum.Add(a.sum, v)
			a.nAmount++
			if a.minA == nil || v.Cmp(a.minA) < 0 {
				a.minA, a.minS = v, e.amount
			}
			if a.maxA == nil || v.Cmp(a.maxA) > 0 {
				a.maxA, a.maxS = v, e.amount
			}
		}
	}
	fixed := func(x *big.Rat, scale, prec int) string {
		// HALF_UP at scale, null past prec digits.
		m := new(big.Rat).Mul(x, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
		q, rem := new(big.Int).QuoRem(m.Num(), m.Denom(), new(big.Int))
		if new(big.Int).Mul(new(big.Int).Abs(rem), big.NewInt(2)).Cmp(m.Denom()) >= 0 {
			if m.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		if len(new(big.Int).Abs(q).String()) > prec {
			return "null"
		}
		return row.FormatDecimal(row.Value{Kind: row.Decimal, Scale: uint8(scale), S: q.String()})
	}
	overflows := 0
	for k, a := range groups {
		s, avg, mn, mx := "null", "null", "null", "null"
		if a.nAmount > 0 {
			s = fixed(a.sum, 2, 20)
			avg = fixed(new(big.Rat).Quo(a.sum, new(big.Rat).SetInt64(a.nAmount)), 6, 14)
			mn, mx = a.minS, a.maxS
		}
		bs := fixed(a.bsum, 0, 38)
		if bs == "null" {
			overflows++
		}
		want := fmt.Sprintf("%s %s %s %s %s %d", s, avg, mn, mx, bs, a.n)
		if got[k] != want {
			t.Errorf("%s: got %s, want %s", k, got[k], want)
		}
	}
	if len(got) != len(groups) {
		t.Errorf("%d groups written, the oracle has %d", len(got), len(groups))
	}
	if overflows == 0 || overflows == len(groups) {
		t.Errorf("%d of %d groups overflow decimal(38,0): the input tests too little", overflows, len(groups))
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) < 10 {
		t.Errorf("only %d groups", len(keys))
	}
}
