package query

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/expr"
	"github.com/sluicehq/sluice/row"
)

// Plan is a query's logical plan, the same whether the spec says
// aggregate: or sql:. A map task runs, per decoded source row:
//
//	PreFilter (below the watermark: only rows that pass count toward the
//	max event time, docs/sql.md "Where the filter runs") -> watermark -> Dedup (over
//	the source row) -> Join (appends the static view's columns) -> Filter
//	(above the watermark) -> Computed (appended) -> Aggregate's partials,
//	or Project when there is no aggregate.
//
// After the aggregate (on the reduce side, per emitted row of
// Aggregate.Output): Having, then Project. Column indices: Source is
// the decoded row; Input is Source followed by the join's columns; the
// map row is Input followed by Computed. Expressions are plain data
// (expr.Expr); compile them with expr.CompileFilter and
// expr.CompileProjection, once per task.
type Plan struct {
	// View is the source's view name in the SQL (default events).
	View   string
	Source []PlanColumn
	// EventTime is the watermarked column's index in Source (-1: none).
	EventTime int
	// PreFilter holds the WHERE conjuncts that are deterministic and do not
	// read the event-time column: evaluated over the source row before
	// the watermark sees it.
	PreFilter []*expr.Expr
	// Dedup drops rows whose keys were seen within the watermark, after
	// the watermark and before the join (with a dedup, Spark's optimizer
	// pushes no filter below it, so PreFilter is empty).
	Dedup *PlanDedup
	Join  *PlanJoin
	// Filter holds the other conjuncts, over the Input row.
	Filter []*expr.Expr
	// Computed are expressions over the Input row the aggregate groups by
	// or aggregates, appended to it in the map phase.
	Computed  []PlanExpr
	Aggregate *PlanAggregate
	// Having filters the aggregate's output rows.
	Having []*expr.Expr
	// Project computes the output row from the aggregate's output (or from
	// the Input row without an aggregate); nil when the output is that row
	// as it is.
	Project []PlanExpr
	Output  []PlanColumn
}

// PlanColumn is a named, typed column.
type PlanColumn struct {
	Name string
	Type expr.Type
}

// PlanExpr is a named expression.
type PlanExpr struct {
	Name string
	Expr *expr.Expr
}

// PlanJoin is the stream-static join (spec join:).
type PlanJoin struct {
	View    string
	Type    string // JoinLeft or JoinInner
	Keys    []string
	Columns []PlanColumn
}

// PlanDedup is dropDuplicatesWithinWatermark over the source row's Keys
// (indices) named Names.
type PlanDedup struct {
	Keys  []int
	Names []string
}

// PlanAggregate is a grouped aggregation. Its output row is window_start
// and window_end (with a window or session window), the grouping
// columns, then the measures.
type PlanAggregate struct {
	Window  *PlanWindow
	Session *PlanSession
	// GroupBy are indices into the map row (Input then Computed).
	GroupBy  []int
	Measures []PlanMeasure
	Output   []PlanColumn
}

// PlanWindow is window(column, size, slide, startTime), in microseconds.
type PlanWindow struct {
	Column                 int
	Size, Slide, StartTime int64
}

// PlanSession is session_window(column, gap), in microseconds.
type PlanSession struct {
	Column int
	Gap    int64
}

// PlanMeasure is one aggregate: Fn (FnCount, ...) over the map-row column
// Arg (-1: count(*)), with its result type.
type PlanMeasure struct {
	Name    string
	Fn      string
	Arg     int
	ArgType expr.Type
	Type    expr.Type
}

// OutputColumns returns the output as query.Columns (name and kind, and a
// decimal's precision and scale).
func (p *Plan) OutputColumns() []Column { return Columns(p.Output) }

// Columns returns plan columns as query.Columns.
func Columns(cs []PlanColumn) []Column {
	out := make([]Column, len(cs))
	for i, c := range cs {
		out[i] = c.Column()
	}
	return out
}

// Column returns c as a query.Column.
func (c PlanColumn) Column() Column {
	col := Column{Name: c.Name, Kind: c.Type.Kind}
	if c.Type.Kind == row.Decimal {
		col.Precision, col.Scale = c.Type.Precision, c.Type.Scale
	}
	return col
}

// MapRow returns the columns of the map row: Input, then Computed.
func (p *Plan) MapRow() []PlanColumn {
	cols := p.Input()
	for _, c := range p.Computed {
		cols = append(cols, PlanColumn{Name: c.Name, Type: c.Expr.Type})
	}
	return cols
}

// Stateful reports whether the plan keeps state: an aggregate or a
// deduplication.
func (p *Plan) Stateful() bool { return p.Aggregate != nil || p.Dedup != nil }

// UsedSource reports, per source column, whether the plan reads it: the
// event-time column, the dedup keys, the join keys, and every column an
// expression, the grouping or a measure reads; every column when the
// output is the Input row as it is.
func (p *Plan) UsedSource() []bool {
	n := len(p.Source)
	used := make([]bool, n)
	mark := func(i int) {
		if i >= 0 && i < n {
			used[i] = true
		}
	}
	refs := func(es ...*expr.Expr) {
		for _, e := range es {
			e.References(func(c int, _ string) { mark(c) })
		}
	}
	if p.Aggregate == nil && p.Project == nil {
		for i := range used {
			used[i] = true
		}
		return used
	}
	mark(p.EventTime)
	refs(p.PreFilter...)
	refs(p.Filter...)
	if d := p.Dedup; d != nil {
		for _, k := range d.Keys {
			mark(k)
		}
	}
	if j := p.Join; j != nil {
		for _, k := range j.Keys {
			for i, c := range p.Source {
				if c.Name == k {
					mark(i)
				}
			}
		}
	}
	for _, c := range p.Computed {
		refs(c.Expr)
	}
	if a := p.Aggregate; a != nil {
		if a.Window != nil {
			mark(a.Window.Column)
		}
		if a.Session != nil {
			mark(a.Session.Column)
		}
		for _, g := range a.GroupBy {
			mark(g)
		}
		for _, m := range a.Measures {
			mark(m.Arg)
		}
	} else {
		for _, x := range p.Project {
			refs(x.Expr)
		}
	}
	return used
}

// Input returns the columns of the Input row (source, then join).
func (p *Plan) Input() []PlanColumn {
	in := append([]PlanColumn(nil), p.Source...)
	if p.Join != nil {
		in = append(in, p.Join.Columns...)
	}
	return in
}

// String renders the plan, one operator per line, from the source up.
func (p *Plan) String() string {
	var b strings.Builder
	cols := func(cs []PlanColumn) string {
		s := make([]string, len(cs))
		for i, c := range cs {
			s[i] = c.Name + " " + c.Type.String()
		}
		return strings.Join(s, ", ")
	}
	exprs := func(es []*expr.Expr) string {
		s := make([]string, len(es))
		for i, e := range es {
			s[i] = e.String()
		}
		return strings.Join(s, " AND ")
	}
	fmt.Fprintf(&b, "Source %s: %s\n", p.View, cols(p.Source))
	if len(p.PreFilter) > 0 {
		fmt.Fprintf(&b, "Filter (below the watermark): %s\n", exprs(p.PreFilter))
	}
	if p.EventTime >= 0 {
		fmt.Fprintf(&b, "EventTimeWatermark %s\n", p.Source[p.EventTime].Name)
	}
	if d := p.Dedup; d != nil {
		fmt.Fprintf(&b, "DropDuplicatesWithinWatermark %s\n", strings.Join(d.Names, ", "))
	}
	if j := p.Join; j != nil {
		fmt.Fprintf(&b, "Join %s %s on %s: %s\n", j.Type, j.View, strings.Join(j.Keys, ", "), cols(j.Columns))
	}
	if len(p.Filter) > 0 {
		fmt.Fprintf(&b, "Filter: %s\n", exprs(p.Filter))
	}
	for _, c := range p.Computed {
		fmt.Fprintf(&b, "Compute %s = %s\n", c.Name, c.Expr)
	}
	if a := p.Aggregate; a != nil {
		in := append(p.Input(), make([]PlanColumn, 0)...)
		for _, c := range p.Computed {
			in = append(in, PlanColumn{Name: c.Name, Type: c.Expr.Type})
		}
		var g []string
		if w := a.Window; w != nil {
			g = append(g, fmt.Sprintf("window(%s, %s, %s, %s)", in[w.Column].Name, expr.FormatInterval(w.Size), expr.FormatInterval(w.Slide), expr.FormatInterval(w.StartTime)))
		}
		if s := a.Session; s != nil {
			g = append(g, fmt.Sprintf("session_window(%s, %s)", in[s.Column].Name, expr.FormatInterval(s.Gap)))
		}
		for _, i := range a.GroupBy {
			g = append(g, in[i].Name)
		}
		var m []string
		for _, x := range a.Measures {
			arg := "*"
			if x.Arg >= 0 {
				arg = in[x.Arg].Name
			}
			m = append(m, fmt.Sprintf("%s(%s) AS %s", x.Fn, arg, x.Name))
		}
		fmt.Fprintf(&b, "Aggregate [%s] [%s]: %s\n", strings.Join(g, ", "), strings.Join(m, ", "), cols(a.Output))
	}
	if len(p.Having) > 0 {
		fmt.Fprintf(&b, "Filter (having): %s\n", exprs(p.Having))
	}
	if p.Project != nil {
		s := make([]string, len(p.Project))
		for i, x := range p.Project {
			s[i] = x.Expr.String() + " AS " + x.Name
		}
		fmt.Fprintf(&b, "Project %s\n", strings.Join(s, ", "))
	}
	fmt.Fprintf(&b, "Output: %s\n", cols(p.Output))
	return b.String()
}

// Plan compiles a validated spec into its logical plan: from sql: through
// the SQL analyzer, from aggregate: (or neither) directly.
func (s *Spec) Plan() (*Plan, error) {
	d := s.WithDefaults()
	if d.SQL != "" {
		p, problems := analyzeSQL(&d)
		if len(problems) > 0 {
			return nil, &ValidationError{Problems: problems}
		}
		return p, nil
	}
	return yamlPlan(&d), nil
}

// sourcePlan fills the source, watermark and join parts of a plan.
func sourcePlan(s *Spec) *Plan {
	p := &Plan{View: s.ViewName(), EventTime: -1}
	for i, f := range s.Source.Schema {
		k, _ := row.ParseKind(f.Type)
		p.Source = append(p.Source, PlanColumn{Name: f.Name, Type: expr.SchemaType(k)})
		if s.Watermark != nil && f.Name == s.Watermark.Column {
			p.EventTime = i
		}
	}
	if j := s.Join; j != nil {
		pj := &PlanJoin{View: j.View, Type: j.JoinType(), Keys: append([]string(nil), j.Keys...)}
		for _, c := range s.JoinColumns() {
			pj.Columns = append(pj.Columns, PlanColumn{Name: c.Name, Type: expr.SchemaType(c.Kind)})
		}
		p.Join = pj
	}
	return p
}

// yamlPlan compiles today's aggregate: spec (or a pass-through) into a plan.
func yamlPlan(s *Spec) *Plan {
	p := sourcePlan(s)
	in := p.Input()
	index := func(name string) int {
		for i, c := range in {
			if c.Name == name {
				return i
			}
		}
		return -1
	}
	if d := s.Dedup; d != nil {
		pd := &PlanDedup{}
		for _, k := range d.Keys {
			for i, c := range p.Source {
				if c.Name == k {
					pd.Keys = append(pd.Keys, i)
					pd.Names = append(pd.Names, c.Name)
				}
			}
		}
		p.Dedup = pd
	}
	a := s.Aggregate
	if a == nil {
		p.Output = in
		return p
	}
	pa := &PlanAggregate{}
	if w := a.Window; w != nil {
		pa.Window = &PlanWindow{Column: index(w.Column), Size: w.Size.Micros(), Slide: w.SlideOrSize().Micros(), StartTime: w.StartTime.Micros()}
		pa.Output = append(pa.Output, PlanColumn{WindowStart, expr.TimestampType}, PlanColumn{WindowEnd, expr.TimestampType})
	} else if sw := a.SessionWindow; sw != nil {
		pa.Session = &PlanSession{Column: index(sw.Column), Gap: sw.Gap.Micros()}
		pa.Output = append(pa.Output, PlanColumn{SessionWindowStart, expr.TimestampType}, PlanColumn{SessionWindowEnd, expr.TimestampType})
	}
	for _, g := range a.GroupBy {
		i := index(g)
		pa.GroupBy = append(pa.GroupBy, i)
		pa.Output = append(pa.Output, in[i])
	}
	for _, m := range a.Measures {
		pm := PlanMeasure{Name: m.Name, Fn: m.Fn, Arg: -1}
		if m.Column != "" {
			pm.Arg = index(m.Column)
			pm.ArgType = in[pm.Arg].Type
		}
		pm.Type = measureType(m.Fn, pm.ArgType)
		pa.Measures = append(pa.Measures, pm)
		pa.Output = append(pa.Output, PlanColumn{m.Name, pm.Type})
	}
	p.Aggregate = pa
	p.Output = pa.Output
	return p
}

// measureType is Spark's result type of an aggregate over a type: count
// and approx_count_distinct bigint; sum bigint over integers, double over
// doubles, decimal(p+10, s) over decimal(p, s); avg double, or
// decimal(p+4, s+4); min and max the input's type.
func measureType(fn string, t expr.Type) expr.Type {
	switch fn {
	case FnCount, FnApproxCountDistinct:
		return expr.LongType
	case FnSum:
		switch t.Kind {
		case row.Double:
			return expr.DoubleType
		case row.Decimal:
			return expr.DecimalType(min(int(t.Precision)+10, expr.MaxPrecision), int(t.Scale))
		}
		return expr.LongType
	case FnAvg:
		if t.Kind == row.Decimal {
			return expr.DecimalType(min(int(t.Precision)+4, expr.MaxPrecision), min(int(t.Scale)+4, expr.MaxPrecision))
		}
		return expr.DoubleType
	}
	return t
}
