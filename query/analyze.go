package query

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/expr"
	"github.com/sluicehq/sluice/query/sql"
	"github.com/sluicehq/sluice/row"
)

// The SQL analyzer: it resolves a parsed SELECT against the spec (the
// source's view with its schema, already watermarked on
// watermark.column; the join's static view), assigns Spark's types, and
// refuses what Spark refuses on a stream (with Spark's reason) or what
// Sluice does not run, with the position in the SQL text.

// Refusal reasons in Spark's words (UnsupportedOperationChecker).
const (
	reasonSort          = "Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated DataFrame/Dataset in Complete output mode (Spark's reason)"
	reasonSortComplete  = "Sluice does not sort the output of a complete-mode aggregation: sort when you read the sink"
	reasonLimitUpdate   = "Limits are not supported on streaming DataFrames/Datasets in Update output mode (Spark's reason)"
	reasonLimit         = "is not supported by Sluice on a stream: it keeps no state for a limit"
	reasonDistinctAgg   = "Distinct aggregations are not supported on streaming DataFrames/Datasets. Consider using approx_count_distinct() instead (Spark's reason)"
	reasonSelectDistinc = "SELECT DISTINCT keeps every distinct row in state forever: drop duplicates within the watermark with FROM drop_duplicates_within_watermark(TABLE(events), key, ...), or GROUP BY the columns"
	reasonAppendNoWm    = "Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark (Spark's reason): group by window(%s, ...) or session_window(%s, ...) on the watermarked column, or use outputMode update"
	reasonCompleteNoAgg = "Complete output mode not supported when there are no streaming aggregations on streaming DataFrames/Datasets (Spark's reason): add a GROUP BY, or use outputMode append"
	reasonNondet        = "is not deterministic: a re-run of a logged batch would give other rows, so Sluice refuses it"
	// DedupFunction is the table function that spells
	// dropDuplicatesWithinWatermark in SQL.
	DedupFunction = "drop_duplicates_within_watermark"
	// ReasonDedupAggregate refuses a deduplication followed by an
	// aggregate (YAML dedup with aggregate, SQL
	// drop_duplicates_within_watermark with GROUP BY or aggregates).
	ReasonDedupAggregate = "with an aggregate is not run by this build: Spark aggregates the deduplicated rows through a second shuffle " +
		"(the kept rows re-partitioned by the aggregate's key), which Sluice does not have yet; run the deduplication as a query of its own " +
		"(no aggregate, sink jsonBatches) and aggregate its output in a second query whose file source reads that sink's path"
)

type sqlError = sql.Error

func errAt(pos sql.Pos, construct, format string, args ...any) error {
	return &sqlError{Pos: pos, Construct: construct, Reason: fmt.Sprintf(format, args...)}
}

// analyzeSQL parses and resolves s.SQL into a plan, or returns the
// problems (field sql, with the position).
func analyzeSQL(s *Spec) (*Plan, []Problem) {
	q, err := sql.Parse(s.SQL)
	if err == nil {
		a := &analyzer{s: s, q: q, p: sourcePlan(s)}
		var p *Plan
		p, err = a.run()
		if err == nil {
			return p, nil
		}
	}
	var se *sqlError
	if errors.As(err, &se) {
		return nil, []Problem{{Field: "sql", Line: se.Pos.Line, Column: se.Pos.Col, Value: se.Construct, Rule: se.Reason}}
	}
	return nil, []Problem{{Field: "sql", Rule: err.Error()}}
}

type analyzer struct {
	s *Spec
	q *sql.Query
	p *Plan
	// names the FROM view and the join view answer to (lower case)
	srcNames, joinNames []string
	in                  []PlanColumn
	usingJoin           bool
	env                 expr.Env
	// aggregation
	agg      *aggScope
	computed []PlanExpr
}

// aggScope is what the expressions after an aggregate can read.
type aggScope struct {
	nWindow  int // 0, or 2 (window_start, window_end)
	winName  string
	groups   []groupCol
	measures []PlanMeasure
	mText    []string // measure calls' SQL, lower case, to share them
	out      []PlanColumn
	a        *analyzer
	inSelect *sql.SelectItem
}

type groupCol struct {
	text string // SQL of the grouping expression, lower case
	col  int    // map-row column
	name string
	typ  expr.Type
}

func (a *analyzer) run() (*Plan, error) {
	s, q, p := a.s, a.q, a.p
	a.env = expr.Env{Zone: s.SessionZone()}
	if err := a.from(); err != nil {
		return nil, err
	}
	if err := a.join(); err != nil {
		return nil, err
	}
	a.in = p.Input()
	// Clauses refused whatever the rest says.
	if q.Distinct != nil {
		return nil, errAt(*q.Distinct, "SELECT DISTINCT", reasonSelectDistinc)
	}
	if err := a.where(); err != nil {
		return nil, err
	}
	aggregated := len(q.GroupBy) > 0 || q.Having != nil || a.hasAggregate()
	if aggregated {
		if err := a.aggregate(); err != nil {
			return nil, err
		}
	} else if err := a.project(); err != nil {
		return nil, err
	}
	if err := a.outputMode(aggregated); err != nil {
		return nil, err
	}
	if p.Dedup != nil && p.Aggregate != nil {
		return nil, errAt(q.From.Pos, DedupFunction+"(...)", "%s", ReasonDedupAggregate)
	}
	seen := map[string]bool{}
	for _, c := range p.Output {
		if seen[strings.ToLower(c.Name)] {
			return nil, errAt(q.Pos, "SELECT", "the output column %s appears twice: give the columns distinct names with AS", c.Name)
		}
		seen[strings.ToLower(c.Name)] = true
		if c.Type.Array || c.Type.IsInterval() {
			return nil, errAt(q.Pos, c.Name, "has the type %s, which the sinks cannot write (index split's array: split(s, ',')[0])", c.Type)
		}
	}
	return p, nil
}

func (a *analyzer) from() error {
	f := a.q.From
	view := a.s.ViewName()
	name := f.Name
	if f.Func {
		if !strings.EqualFold(f.Name, DedupFunction) {
			return errAt(f.Pos, f.Name+"(...)", "is not a table function Sluice knows: FROM names the source's view %s, or %s(TABLE(%s), key, ...)", view, DedupFunction, view)
		}
		name = f.Table
		if name == "" {
			return errAt(f.Pos, f.Name, "needs the view as its first argument: %s(TABLE(%s), key, ...)", DedupFunction, view)
		}
	}
	if !strings.EqualFold(name, view) {
		if j := a.s.Join; j != nil && strings.EqualFold(name, j.View) {
			return errAt(f.Pos, name, "is the static view: FROM reads the stream (%s) and JOINs the static view", view)
		}
		return errAt(f.Pos, name, "is not a view of this query: the source's view is %s (source.view)", view)
	}
	a.srcNames = []string{strings.ToLower(view)}
	if f.Alias != "" {
		a.srcNames = []string{strings.ToLower(f.Alias)}
	}
	if f.Func {
		if a.s.Watermark == nil {
			return errAt(f.Pos, f.Name, "dropDuplicatesWithinWatermark is not supported on streaming DataFrames/DataSets without watermark (Spark's reason): add watermark {column: ..., delay: ...}")
		}
		if len(f.Args) == 0 {
			return errAt(f.Pos, f.Name, "needs at least one key column: %s(TABLE(%s), event_id)", DedupFunction, view)
		}
		d := &PlanDedup{}
		for _, arg := range f.Args {
			id, ok := arg.(*sql.Ident)
			if !ok || len(id.Parts) != 1 {
				return errAt(arg.Position(), sql.SQL(arg), "is not a column of %s: the keys of %s are column names", view, DedupFunction)
			}
			i := a.findSource(id.Parts[0])
			if i < 0 {
				return errAt(id.Pos, id.Parts[0], "is not a column of %s (columns: %s)", view, colNames(a.p.Source))
			}
			if slices.Contains(d.Keys, i) {
				return errAt(id.Pos, id.Parts[0], "is listed twice")
			}
			d.Keys = append(d.Keys, i)
			d.Names = append(d.Names, a.p.Source[i].Name)
		}
		a.p.Dedup = d
	}
	return nil
}

func (a *analyzer) findSource(name string) int {
	for i, c := range a.p.Source {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

func colNames(cs []PlanColumn) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.Name
	}
	return strings.Join(s, ", ")
}

func (a *analyzer) join() error {
	j := a.q.Join
	sj := a.s.Join
	if j == nil {
		// A spec join without a JOIN in the SQL: the SQL reads the stream
		// alone, so the static view is not joined.
		a.p.Join = nil
		return nil
	}
	view := a.s.ViewName()
	if strings.EqualFold(j.Table.Name, view) || j.Table.Func {
		switch a.s.OutputMode {
		case Update, Complete:
			return errAt(j.Pos, "JOIN "+j.Table.Name, "Join between two streaming DataFrames/Datasets is not supported in %s output mode, only in Append output mode (Spark's reason)", titleMode(a.s.OutputMode))
		}
		return errAt(j.Pos, "JOIN "+j.Table.Name, "a stream-stream join is not supported: Sluice keeps no join state; join a static view declared in join:")
	}
	if sj == nil || sj.View == "" || !strings.EqualFold(j.Table.Name, sj.View) {
		if sj != nil && sj.View == "" {
			return errAt(j.Table.Pos, j.Table.Name, "is not a view of this query: name the static view with join.view: %s", j.Table.Name)
		}
		return errAt(j.Table.Pos, j.Table.Name, "is not a view of this query: declare the static view in join: (path, keys, columns, view: %s)", j.Table.Name)
	}
	switch j.Type {
	case "inner", "left":
	case "right", "full":
		return errAt(j.Pos, strings.ToUpper(j.Type)+" JOIN", "is refused: it would emit static rows no event matched, which a stream never knows are final; use JOIN or LEFT JOIN")
	default:
		return errAt(j.Pos, strings.ToUpper(j.Type)+" JOIN", "is not supported: use JOIN (inner) or LEFT JOIN on the keys")
	}
	if want := sj.JoinType(); j.Type != want {
		kw := map[string]string{JoinInner: "JOIN", JoinLeft: "LEFT JOIN"}
		return errAt(j.Pos, kw[j.Type], "is a %s join but join.type is %s: write %s, or set join.type: %s", j.Type, want, kw[want], j.Type)
	}
	a.joinNames = []string{strings.ToLower(sj.View)}
	if j.Table.Alias != "" {
		a.joinNames = []string{strings.ToLower(j.Table.Alias)}
	}
	keys := map[string]bool{}
	switch {
	case len(j.Using) > 0:
		a.usingJoin = true
		for _, u := range j.Using {
			keys[strings.ToLower(u.Parts[0])] = true
		}
	case j.On != nil:
		if err := a.onKeys(j.On, keys); err != nil {
			return err
		}
	default:
		return errAt(j.Pos, "JOIN", "needs ON or USING with the keys of join.keys (%s)", strings.Join(sj.Keys, ", "))
	}
	want := map[string]bool{}
	for _, k := range sj.Keys {
		want[strings.ToLower(k)] = true
	}
	if len(keys) != len(want) {
		return errAt(j.Pos, "JOIN", "joins on %s but join.keys is %s: the ON or USING columns must be exactly the join's keys", strings.Join(slices.Sorted(maps.Keys(keys)), ", "), strings.Join(sj.Keys, ", "))
	}
	for k := range keys {
		if !want[k] {
			return errAt(j.Pos, "JOIN", "joins on %s but join.keys is %s: the ON or USING columns must be exactly the join's keys", strings.Join(slices.Sorted(maps.Keys(keys)), ", "), strings.Join(sj.Keys, ", "))
		}
	}
	return nil
}

// onKeys reads ON src.k = view.k [AND ...].
func (a *analyzer) onKeys(e sql.Expr, keys map[string]bool) error {
	b, ok := e.(*sql.Binary)
	if ok && b.Op == "AND" {
		if err := a.onKeys(b.L, keys); err != nil {
			return err
		}
		return a.onKeys(b.R, keys)
	}
	bad := func() error {
		return errAt(e.Position(), sql.SQL(e), "is not an equality of a key: ON takes %s.key = %s.key for each of join.keys, joined with AND", a.srcNames[0], a.joinNames[0])
	}
	if !ok || b.Op != "=" {
		return bad()
	}
	l, lok := b.L.(*sql.Ident)
	r, rok := b.R.(*sql.Ident)
	if !lok || !rok || len(l.Parts) != 2 || len(r.Parts) != 2 {
		return bad()
	}
	ls, rs := strings.ToLower(l.Parts[0]), strings.ToLower(r.Parts[0])
	if slices.Contains(a.joinNames, ls) {
		l, r, ls, rs = r, l, rs, ls
	}
	if !slices.Contains(a.srcNames, ls) || !slices.Contains(a.joinNames, rs) || !strings.EqualFold(l.Parts[1], r.Parts[1]) {
		return bad()
	}
	keys[strings.ToLower(l.Parts[1])] = true
	return nil
}

func (a *analyzer) hasAggregate() bool {
	found := false
	var walk func(e sql.Expr)
	walk = func(e sql.Expr) {
		if e == nil || found {
			return
		}
		forEachChild(e, walk)
		if c, ok := e.(*sql.Call); ok && expr.IsAggregate(c.Name) {
			found = true
		}
	}
	for _, it := range a.q.Items {
		walk(it.Expr)
	}
	return found
}

func forEachChild(e sql.Expr, f func(sql.Expr)) {
	switch x := e.(type) {
	case *sql.Unary:
		f(x.X)
	case *sql.Binary:
		f(x.L)
		f(x.R)
	case *sql.Call:
		for _, c := range x.Args {
			f(c)
		}
	case *sql.Case:
		if x.Operand != nil {
			f(x.Operand)
		}
		for i := range x.Whens {
			f(x.Whens[i])
			f(x.Thens[i])
		}
		if x.Else != nil {
			f(x.Else)
		}
	case *sql.Cast:
		f(x.X)
	case *sql.In:
		f(x.X)
		for _, c := range x.List {
			f(c)
		}
	case *sql.Between:
		f(x.X)
		f(x.Lo)
		f(x.Hi)
	case *sql.Like:
		f(x.X)
		f(x.Pattern)
	case *sql.IsNull:
		f(x.X)
	case *sql.Index:
		f(x.X)
		f(x.Index)
	case *sql.Field:
		f(x.X)
	}
}

// where splits WHERE into conjuncts, each pushed below the watermark when
// it is deterministic, reads only source columns and not the event-time
// column (Spark's PushPredicateThroughNonJoin at EventTimeWatermark),
// kept above it otherwise. Under a dedup no conjunct is pushed: Spark's
// optimizer does not push a filter through a deduplication.
func (a *analyzer) where() error {
	if a.q.Where == nil {
		return nil
	}
	var conj []sql.Expr
	var split func(e sql.Expr)
	split = func(e sql.Expr) {
		if b, ok := e.(*sql.Binary); ok && b.Op == "AND" {
			split(b.L)
			split(b.R)
			return
		}
		conj = append(conj, e)
	}
	split(a.q.Where)
	nSrc := len(a.p.Source)
	for _, c := range conj {
		e, err := a.expr(c, nil, "WHERE")
		if err != nil {
			return err
		}
		if e, err = a.predicate(e, c, "WHERE"); err != nil {
			return err
		}
		push := a.p.Dedup == nil && e.Deterministic()
		e.References(func(col int, _ string) {
			if col >= nSrc || col == a.p.EventTime {
				push = false
			}
		})
		if push {
			a.p.PreFilter = append(a.p.PreFilter, e)
		} else {
			a.p.Filter = append(a.p.Filter, e)
		}
	}
	return nil
}

// predicate casts a condition to boolean as Spark does (a string or null
// condition is cast), refusing other types.
func (a *analyzer) predicate(e *expr.Expr, at sql.Expr, clause string) (*expr.Expr, error) {
	if e.Type == expr.BoolType {
		return e, nil
	}
	switch e.Type.Kind {
	case row.Null, row.String:
		c, err := expr.Cast(e, expr.BoolType)
		if err == nil {
			return c, nil
		}
	}
	return nil, errAt(at.Position(), sql.SQL(at), "[DATATYPE_MISMATCH.FILTER_NOT_BOOLEAN] the %s condition has the type %s, not boolean", clause, strings.ToUpper(e.Type.String()))
}

// project handles a query without aggregation: the select list over the
// Input row.
func (a *analyzer) project() error {
	p := a.p
	identity := true
	var proj []PlanExpr
	for i := range a.q.Items {
		it := &a.q.Items[i]
		if it.Star {
			cols, err := a.star(*it)
			if err != nil {
				return err
			}
			for _, c := range cols {
				if len(proj) != c || a.in[c].Name != a.in[len(proj)].Name {
					identity = false
				}
				proj = append(proj, PlanExpr{Name: a.in[c].Name, Expr: expr.Column(c, a.in[c].Name, a.in[c].Type)})
			}
			continue
		}
		e, err := a.expr(it.Expr, nil, "SELECT")
		if err != nil {
			return err
		}
		if err := writable(it, e); err != nil {
			return err
		}
		name := it.Alias
		if name == "" {
			name = sql.ColumnName(it.Expr)
		}
		if e.Op != expr.OpColumn || e.Col != len(proj) || name != a.in[e.Col].Name {
			identity = false
		}
		proj = append(proj, PlanExpr{Name: name, Expr: e})
	}
	if len(proj) != len(a.in) {
		identity = false
	}
	for _, x := range proj {
		p.Output = append(p.Output, PlanColumn{Name: x.Name, Type: x.Expr.Type})
	}
	if !identity {
		p.Project = proj
	}
	return nil
}

// star expands * or v.* to Input column indices.
func (a *analyzer) star(it sql.SelectItem) ([]int, error) {
	var out []int
	nSrc := len(a.p.Source)
	q := strings.ToLower(it.Qualifier)
	switch {
	case q == "":
		for i := range a.in {
			out = append(out, i)
		}
	case slices.Contains(a.srcNames, q):
		for i := 0; i < nSrc; i++ {
			out = append(out, i)
		}
	case slices.Contains(a.joinNames, q):
		for i := nSrc; i < len(a.in); i++ {
			out = append(out, i)
		}
	default:
		return nil, errAt(it.Pos, it.Qualifier+".*", "%s is not a view of the query", it.Qualifier)
	}
	return out, nil
}

// column resolves a column reference against the Input row.
func (a *analyzer) column(id *sql.Ident) (*expr.Expr, error) {
	nSrc := len(a.p.Source)
	var name string
	var cands []int
	switch len(id.Parts) {
	case 1:
		name = id.Parts[0]
		for i, c := range a.in {
			if strings.EqualFold(c.Name, name) {
				cands = append(cands, i)
			}
		}
		if a.p.Join != nil && !a.usingJoin && a.isKey(name) {
			return nil, errAt(id.Pos, name, "[AMBIGUOUS_REFERENCE] Reference %s is ambiguous: both views have it; write %s.%s", name, a.srcNames[0], name)
		}
	case 2:
		q := strings.ToLower(id.Parts[0])
		name = id.Parts[1]
		switch {
		case slices.Contains(a.srcNames, q):
			if i := a.findSource(name); i >= 0 {
				cands = append(cands, i)
			}
		case slices.Contains(a.joinNames, q):
			if a.isKey(name) {
				if a.p.Join.Type == JoinLeft {
					return nil, errAt(id.Pos, sql.SQL(id), "is null where no static row matches in a LEFT JOIN, which Sluice does not track: read %s.%s (equal where a row matches)", a.srcNames[0], name)
				}
				cands = append(cands, a.findSource(name))
				break
			}
			for i := nSrc; i < len(a.in); i++ {
				if strings.EqualFold(a.in[i].Name, name) {
					cands = append(cands, i)
				}
			}
		case q == "window" || q == "session_window":
			return nil, errAt(id.Pos, sql.SQL(id), "is only defined by a GROUP BY %s(...)", q)
		default:
			return nil, errAt(id.Pos, sql.SQL(id), "%s is not a view of the query (views: %s)", id.Parts[0], strings.Join(append(append([]string{}, a.srcNames...), a.joinNames...), ", "))
		}
	default:
		return nil, errAt(id.Pos, sql.SQL(id), "nested fields are not supported: the columns are flat")
	}
	if len(cands) == 0 {
		return nil, errAt(id.Pos, sql.SQL(id), "[UNRESOLVED_COLUMN] a column or function parameter with name %s cannot be resolved; the columns are %s", expr.QuoteIdent(name), colNames(a.in))
	}
	i := cands[0]
	return expr.Column(i, a.in[i].Name, a.in[i].Type), nil
}

func (a *analyzer) isKey(name string) bool {
	if a.p.Join == nil {
		return false
	}
	for _, k := range a.p.Join.Keys {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

var nondeterministic = map[string]bool{
	"rand": true, "random": true, "randn": true, "uuid": true, "shuffle": true, "now": true,
	"current_timestamp": true, "current_date": true, "localtimestamp": true, "monotonically_increasing_id": true,
	"spark_partition_id": true, "input_file_name": true, "current_timezone": true,
}

// expr resolves an expression over the Input row, or, when agg is set,
// over the aggregate's output (where grouping expressions and aggregate
// calls are columns).
func (a *analyzer) expr(e sql.Expr, agg *aggScope, clause string) (*expr.Expr, error) {
	if agg != nil {
		if ref, ok, err := agg.match(e); ok || err != nil {
			return ref, err
		}
	}
	sub := func(x sql.Expr) (*expr.Expr, error) { return a.expr(x, agg, clause) }
	wrap := func(r *expr.Expr, err error) (*expr.Expr, error) {
		if err != nil {
			var te *expr.TypeError
			if errors.As(err, &te) {
				return nil, errAt(e.Position(), sql.SQL(e), "%s", te.Reason)
			}
			return nil, errAt(e.Position(), sql.SQL(e), "%v", err)
		}
		return r, nil
	}
	switch x := e.(type) {
	case *sql.Ident:
		if agg != nil {
			if len(x.Parts) == 1 && (strings.EqualFold(x.Parts[0], "window") || strings.EqualFold(x.Parts[0], "session_window")) && agg.nWindow > 0 {
				return nil, errAt(x.Pos, x.Parts[0], "is a struct: select window.start and window.end (or select window alone, which writes window_start and window_end)")
			}
			if _, err := a.column(x); err != nil {
				return nil, err
			}
			return nil, errAt(x.Pos, sql.SQL(x), "[MISSING_AGGREGATION] the non-aggregating expression %s is based on columns which are not participating in the GROUP BY clause: add it to GROUP BY, or wrap it in an aggregate such as max(%s)", sql.SQL(x), sql.SQL(x))
		}
		return a.column(x)
	case *sql.Literal:
		return a.literal(x)
	case *sql.Unary:
		v, err := sub(x.X)
		if err != nil {
			return nil, err
		}
		switch x.Op {
		case "NOT":
			return wrap(expr.Not(v))
		case "-":
			return wrap(expr.Neg(v))
		}
		if !v.Type.IsNumeric() && !v.Type.IsInterval() {
			return wrap(nil, fmt.Errorf("unary + needs a number, not %s", v.Type))
		}
		return v, nil
	case *sql.Binary:
		l, err := sub(x.L)
		if err != nil {
			return nil, err
		}
		r, err := sub(x.R)
		if err != nil {
			return nil, err
		}
		if x.Op == "||" {
			return wrap(expr.Call("concat", []*expr.Expr{l, r}))
		}
		ops := map[string]expr.Op{"OR": expr.OpOr, "AND": expr.OpAnd, "=": expr.OpEq, "<=>": expr.OpNullSafeEq, "!=": expr.OpNe,
			"<": expr.OpLt, "<=": expr.OpLe, ">": expr.OpGt, ">=": expr.OpGe, "+": expr.OpAdd, "-": expr.OpSub, "*": expr.OpMul,
			"/": expr.OpDiv, "%": expr.OpMod, "div": expr.OpIntDiv}
		return wrap(expr.Binary(ops[x.Op], l, r))
	case *sql.Call:
		return a.call(x, agg, clause)
	case *sql.Case:
		var ws, ts []*expr.Expr
		for i := range x.Whens {
			w, err := sub(x.Whens[i])
			if err != nil {
				return nil, err
			}
			t, err := sub(x.Thens[i])
			if err != nil {
				return nil, err
			}
			ws, ts = append(ws, w), append(ts, t)
		}
		var els *expr.Expr
		if x.Else != nil {
			v, err := sub(x.Else)
			if err != nil {
				return nil, err
			}
			els = v
		}
		if x.Operand != nil {
			op, err := sub(x.Operand)
			if err != nil {
				return nil, err
			}
			return wrap(expr.SimpleCase(op, ws, ts, els))
		}
		return wrap(expr.Case(ws, ts, els))
	case *sql.Cast:
		v, err := sub(x.X)
		if err != nil {
			return nil, err
		}
		t, err := castType(x.Type)
		if err != nil {
			return nil, err
		}
		return wrap(expr.Cast(v, t))
	case *sql.In:
		v, err := sub(x.X)
		if err != nil {
			return nil, err
		}
		var list []*expr.Expr
		for _, l := range x.List {
			le, err := sub(l)
			if err != nil {
				return nil, err
			}
			list = append(list, le)
		}
		in, err := wrap(expr.In(v, list))
		if err != nil || !x.Not {
			return in, err
		}
		return wrap(expr.Not(in))
	case *sql.Between:
		v, err := sub(x.X)
		if err != nil {
			return nil, err
		}
		lo, err := sub(x.Lo)
		if err != nil {
			return nil, err
		}
		hi, err := sub(x.Hi)
		if err != nil {
			return nil, err
		}
		ge, err := wrap(expr.Binary(expr.OpGe, v, lo))
		if err != nil {
			return nil, err
		}
		le, err := wrap(expr.Binary(expr.OpLe, v, hi))
		if err != nil {
			return nil, err
		}
		b, err := wrap(expr.Binary(expr.OpAnd, ge, le))
		if err != nil || !x.Not {
			return b, err
		}
		return wrap(expr.Not(b))
	case *sql.Like:
		if x.Regex {
			return nil, errAt(x.Pos, "RLIKE", "is not supported by Sluice: use LIKE, or regexp_extract(s, pattern, 0) != ''")
		}
		v, err := sub(x.X)
		if err != nil {
			return nil, err
		}
		pat, err := sub(x.Pattern)
		if err != nil {
			return nil, err
		}
		esc := []rune(x.Escape)
		l, err := wrap(expr.Like(v, pat, esc[0]))
		if err != nil || !x.Not {
			return l, err
		}
		return wrap(expr.Not(l))
	case *sql.IsNull:
		v, err := sub(x.X)
		if err != nil {
			return nil, err
		}
		return expr.IsNull(v, x.Not), nil
	case *sql.Index:
		v, err := sub(x.X)
		if err != nil {
			return nil, err
		}
		i, err := sub(x.Index)
		if err != nil {
			return nil, err
		}
		return wrap(expr.Index(v, i))
	case *sql.Field:
		return nil, errAt(x.Pos, sql.SQL(x), "struct fields are not supported here: the only structs are window and session_window after a GROUP BY")
	}
	return nil, errAt(e.Position(), sql.SQL(e), "is not supported")
}

func (a *analyzer) literal(x *sql.Literal) (*expr.Expr, error) {
	switch x.Kind {
	case sql.LitNull:
		return expr.Null(), nil
	case sql.LitBool:
		return expr.Literal(row.BoolValue(x.Bool), expr.BoolType), nil
	case sql.LitString:
		return expr.Literal(row.StringValue(x.Text), expr.StringType), nil
	case sql.LitInterval:
		if x.Months != 0 {
			return nil, errAt(x.Pos, x.Text, "an interval of months or years has no fixed length: write it in days, hours or smaller units")
		}
		return expr.Interval(x.Micros), nil
	case sql.LitTyped:
		t := expr.TimestampType
		if x.Type == "date" {
			t = expr.DateType
		}
		c, err := expr.Cast(expr.Literal(row.StringValue(x.Text), expr.StringType), t)
		if err != nil {
			return nil, errAt(x.Pos, x.Text, "%v", err)
		}
		f, err := expr.Compile(c, a.env)
		if err != nil {
			return nil, errAt(x.Pos, x.Text, "%v", err)
		}
		v, _ := f(nil)
		if v.Kind == row.Null {
			return nil, errAt(x.Pos, strings.ToUpper(x.Type)+" '"+x.Text+"'", "[INVALID_TYPED_LITERAL] the value of the typed literal %s is invalid", strings.ToUpper(x.Type))
		}
		return expr.Literal(v, t), nil
	case sql.LitNumber:
		kind, i, f, dec, err := sql.NumberValue(x.Text)
		if err != nil {
			return nil, errAt(x.Pos, x.Text, "%v", err)
		}
		switch kind {
		case "int":
			return expr.Literal(row.Value{Kind: row.Int, I: i}, expr.IntType), nil
		case "bigint":
			return expr.Literal(row.LongValue(i), expr.LongType), nil
		case "double":
			return expr.Literal(row.DoubleValue(f), expr.DoubleType), nil
		}
		return decimalLiteral(x, dec)
	}
	return nil, errAt(x.Pos, sql.SQL(x), "is not a literal Sluice reads")
}

// decimalLiteral types 1.50 as decimal(3,2): Java's BigDecimal precision
// and scale, precision at least the scale.
func decimalLiteral(x *sql.Literal, text string) (*expr.Expr, error) {
	neg := strings.HasPrefix(text, "-")
	digits := strings.TrimPrefix(text, "-")
	intPart, frac, _ := strings.Cut(digits, ".")
	u, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return nil, errAt(x.Pos, x.Text, "is not a number")
	}
	prec := len(strings.TrimLeft(u.String(), "0"))
	if prec == 0 {
		prec = 1
	}
	scale := len(frac)
	prec = max(prec, scale)
	if prec > expr.MaxPrecision {
		return nil, errAt(x.Pos, x.Text, "[DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION] decimal precision %d exceeds max precision 38", prec)
	}
	if neg {
		u.Neg(u)
	}
	t := expr.DecimalType(prec, scale)
	v := row.Value{Kind: row.Decimal, Scale: uint8(scale)}
	if u.IsInt64() {
		v.I = u.Int64()
	} else {
		v.S = u.String()
	}
	return expr.Literal(v, t), nil
}

func castType(t sql.TypeName) (expr.Type, error) {
	switch t.Name {
	case "string", "varchar", "char":
		return expr.StringType, nil
	case "bigint", "long":
		return expr.LongType, nil
	case "int", "integer":
		return expr.IntType, nil
	case "double":
		return expr.DoubleType, nil
	case "boolean":
		return expr.BoolType, nil
	case "timestamp", "timestamp_ltz":
		return expr.TimestampType, nil
	case "date":
		return expr.DateType, nil
	case "decimal", "dec", "numeric":
		p, s := t.Precision, t.Scale
		if p < 0 {
			p, s = 10, 0
		}
		if s < 0 {
			s = 0
		}
		if p < 1 || p > expr.MaxPrecision || s > p {
			return expr.Type{}, errAt(t.Pos, strings.ToUpper(t.Name), "decimal(%d,%d) is not a decimal type: precision 1 to 38, scale at most the precision", p, s)
		}
		return expr.DecimalType(p, s), nil
	}
	return expr.Type{}, errAt(t.Pos, strings.ToUpper(t.Name), "is not a type Sluice supports: use STRING, BIGINT, INT, DOUBLE, DECIMAL(p,s), BOOLEAN, TIMESTAMP or DATE")
}

func (a *analyzer) call(x *sql.Call, agg *aggScope, clause string) (*expr.Expr, error) {
	name := strings.ToLower(x.Name)
	switch {
	case expr.IsAggregate(name):
		if agg == nil {
			return nil, errAt(x.Pos, sql.SQL(x), "aggregate functions are not allowed in %s", clause)
		}
		return agg.measure(x)
	case name == "window" || name == "session_window":
		return nil, errAt(x.Pos, name+"(...)", "is only supported in GROUP BY")
	case nondeterministic[name], name == "unix_timestamp" && len(x.Args) == 0:
		return nil, errAt(x.Pos, sql.SQL(x), reasonNondet)
	case !expr.IsFunction(name) || name == "date_add":
		return nil, errAt(x.Pos, x.Name, "[UNRESOLVED_ROUTINE] cannot resolve function %s: Sluice supports %s (docs/sql.md#functions)", x.Name, functionList())
	}
	if x.Distinct || x.Star {
		return nil, errAt(x.Pos, sql.SQL(x), "DISTINCT and * are only taken by aggregate functions")
	}
	var args []*expr.Expr
	for _, arg := range x.Args {
		v, err := a.expr(arg, agg, clause)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	r, err := expr.Call(name, args)
	if err != nil {
		var te *expr.TypeError
		if errors.As(err, &te) {
			return nil, errAt(x.Pos, sql.SQL(x), "%s", te.Reason)
		}
		return nil, errAt(x.Pos, sql.SQL(x), "%v", err)
	}
	return r, nil
}

func functionList() string {
	var names []string
	for _, f := range expr.Functions() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// duration reads window()'s durations: a string ('5 minutes', '10s') or
// an INTERVAL literal.
func duration(e sql.Expr) (int64, error) {
	l, ok := e.(*sql.Literal)
	if ok && l.Kind == sql.LitInterval {
		if l.Months != 0 {
			return 0, errAt(l.Pos, l.Text, "Intervals greater than a month is not supported (Spark's reason): write the window in days or smaller units")
		}
		return l.Micros, nil
	}
	if !ok || l.Kind != sql.LitString {
		return 0, errAt(e.Position(), sql.SQL(e), "a window duration must be a string such as '5 minutes' or an INTERVAL literal")
	}
	lower := strings.ToLower(l.Text)
	if strings.Contains(lower, "month") || strings.Contains(lower, "year") {
		return 0, errAt(l.Pos, sql.SQL(l), "Intervals greater than a month is not supported (Spark's reason): write the window in days or smaller units")
	}
	d, err := ParseDuration(l.Text)
	if err != nil {
		return 0, errAt(l.Pos, sql.SQL(l), "is not a duration: %v", err)
	}
	if d%time.Microsecond != 0 {
		return 0, errAt(l.Pos, sql.SQL(l), "is not a whole number of microseconds: timestamps have microsecond precision")
	}
	return d.Microseconds(), nil
}

// aggregate resolves GROUP BY, the aggregates, HAVING and the select list
// over the aggregate's output.
func (a *analyzer) aggregate() error {
	q, p := a.q, a.p
	pa := &PlanAggregate{}
	sc := &aggScope{a: a}
	a.agg = sc
	mapRow := func() []PlanColumn {
		cols := append([]PlanColumn(nil), a.in...)
		for _, c := range a.computed {
			cols = append(cols, PlanColumn{Name: c.Name, Type: c.Expr.Type})
		}
		return cols
	}
	for _, g := range q.GroupBy {
		// GROUP BY 1 and GROUP BY alias, as Spark (groupByOrdinal,
		// groupByAliases).
		if l, ok := g.(*sql.Literal); ok && l.Kind == sql.LitNumber {
			kind, n, _, _, _ := sql.NumberValue(l.Text)
			if kind != "int" || n < 1 || int(n) > len(q.Items) || q.Items[n-1].Star {
				return errAt(l.Pos, l.Text, "[GROUP_BY_POS_OUT_OF_RANGE] GROUP BY position %s is not in the select list (valid range is [1, %d])", l.Text, len(q.Items))
			}
			g = q.Items[n-1].Expr
		}
		if id, ok := g.(*sql.Ident); ok && len(id.Parts) == 1 && a.findInput(id.Parts[0]) < 0 {
			for _, it := range q.Items {
				if it.Alias != "" && strings.EqualFold(it.Alias, id.Parts[0]) {
					g = it.Expr
					break
				}
			}
		}
		if c, ok := g.(*sql.Call); ok && (strings.EqualFold(c.Name, "window") || strings.EqualFold(c.Name, "session_window")) {
			if pa.Window != nil || pa.Session != nil {
				return errAt(c.Pos, c.Name+"(...)", "a query groups by one window: Multiple time/session window expressions would result in a cartesian product of rows, therefore they are currently not supported (Spark's reason)")
			}
			if err := a.windowGroup(c, pa, sc); err != nil {
				return err
			}
			continue
		}
		e, err := a.expr(g, nil, "GROUP BY")
		if err != nil {
			return err
		}
		text := strings.ToLower(sql.SQL(g))
		name := ""
		for _, it := range q.Items {
			if it.Expr != nil && strings.ToLower(sql.SQL(it.Expr)) == text && it.Alias != "" {
				name = it.Alias
				break
			}
		}
		if name == "" {
			name = sql.ColumnName(g)
		}
		col := -1
		if e.Op == expr.OpColumn {
			col = e.Col
			name = a.in[col].Name
		} else {
			if e.Type.Array {
				return errAt(g.Position(), sql.SQL(g), "an array cannot be grouped by: index it")
			}
			col = len(mapRow())
			a.computed = append(a.computed, PlanExpr{Name: name, Expr: e})
		}
		sc.groups = append(sc.groups, groupCol{text: text, col: col, name: name, typ: e.Type})
		pa.GroupBy = append(pa.GroupBy, col)
	}
	// Select list, then HAVING: aggregates are added as they are met.
	var proj []PlanExpr
	for i := range q.Items {
		it := &q.Items[i]
		if it.Star {
			return errAt(it.Pos, "*", "[MISSING_AGGREGATION] * is not allowed with GROUP BY: list the grouping columns and aggregates")
		}
		// window alone: window_start and window_end, where Spark writes
		// one struct column (docs/spark-differences.md#window-struct-flattened).
		if id, ok := it.Expr.(*sql.Ident); ok && len(id.Parts) == 1 && sc.nWindow > 0 && strings.EqualFold(id.Parts[0], sc.winName) && a.findInput(id.Parts[0]) < 0 {
			start, end := sc.windowNames()
			proj = append(proj, PlanExpr{Name: start, Expr: expr.Column(0, start, expr.TimestampType)},
				PlanExpr{Name: end, Expr: expr.Column(1, end, expr.TimestampType)})
			continue
		}
		sc.inSelect = it
		e, err := a.expr(it.Expr, sc, "SELECT")
		sc.inSelect = nil
		if err != nil {
			return err
		}
		if err := writable(it, e); err != nil {
			return err
		}
		name := it.Alias
		if name == "" {
			name = sql.ColumnName(it.Expr)
		}
		proj = append(proj, PlanExpr{Name: name, Expr: e})
	}
	if q.Having != nil {
		h, err := a.expr(q.Having, sc, "HAVING")
		if err != nil {
			return err
		}
		if h, err = a.predicate(h, q.Having, "HAVING"); err != nil {
			return err
		}
		p.Having = []*expr.Expr{h}
	}
	pa.Measures = sc.measures
	pa.Output = sc.output()
	p.Computed = a.computed
	p.Aggregate = pa
	// Rebase the projection's references to the final output layout
	// (measures were numbered as they came).
	identity := len(proj) == len(pa.Output)
	for i, x := range proj {
		if x.Expr.Op != expr.OpColumn || x.Expr.Col != i || pa.Output[i].Name != x.Name {
			identity = false
		}
		p.Output = append(p.Output, PlanColumn{Name: x.Name, Type: x.Expr.Type})
	}
	if !identity {
		p.Project = proj
	}
	return nil
}

// writable refuses an output column of a type no sink writes.
func writable(it *sql.SelectItem, e *expr.Expr) error {
	if e.Type.Array || e.Type.IsInterval() {
		return errAt(it.Pos, sql.SQL(it.Expr), "has the type %s, which the sinks cannot write (index split's array: split(s, ',')[0])", e.Type)
	}
	return nil
}

func (a *analyzer) findInput(name string) int {
	for i, c := range a.in {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

func (a *analyzer) windowGroup(c *sql.Call, pa *PlanAggregate, sc *aggScope) error {
	name := strings.ToLower(c.Name)
	if len(c.Args) == 0 {
		return errAt(c.Pos, name+"()", "needs the event-time column and a duration: %s(event_time, '5 minutes')", name)
	}
	id, ok := c.Args[0].(*sql.Ident)
	if !ok {
		return errAt(c.Args[0].Position(), sql.SQL(c.Args[0]), "the time column of %s must be a column of the view", name)
	}
	col, err := a.column(id)
	if err != nil {
		return err
	}
	if col.Type != expr.TimestampType {
		return errAt(id.Pos, sql.SQL(id), "is a %s column: %s needs a timestamp column", col.Type, name)
	}
	if col.Col >= len(a.p.Source) {
		return errAt(id.Pos, sql.SQL(id), "is a column of the static view: %s needs the stream's event-time column", name)
	}
	sc.nWindow, sc.winName = 2, name
	if name == "session_window" {
		if len(c.Args) != 2 {
			return errAt(c.Pos, "session_window(...)", "takes the time column and the gap: session_window(event_time, '10 minutes')")
		}
		gap, err := duration(c.Args[1])
		if err != nil {
			return err
		}
		if gap <= 0 {
			return errAt(c.Args[1].Position(), sql.SQL(c.Args[1]), "the gap must be positive")
		}
		pa.Session = &PlanSession{Column: col.Col, Gap: gap}
		return nil
	}
	if len(c.Args) < 2 || len(c.Args) > 4 {
		return errAt(c.Pos, "window(...)", "takes the time column, the window duration, and optionally the slide and the start time: window(event_time, '10 minutes', '5 minutes')")
	}
	var d [3]int64
	for i, arg := range c.Args[1:] {
		v, err := duration(arg)
		if err != nil {
			return err
		}
		d[i] = v
	}
	size, slide, start := d[0], d[1], d[2]
	if len(c.Args) < 3 {
		slide = size
	}
	switch {
	case size <= 0:
		return errAt(c.Args[1].Position(), sql.SQL(c.Args[1]), "The window duration (%d) must be greater than 0 (Spark's reason)", size)
	case slide <= 0:
		return errAt(c.Args[2].Position(), sql.SQL(c.Args[2]), "The slide duration (%d) must be greater than 0 (Spark's reason)", slide)
	case slide > size:
		return errAt(c.Args[2].Position(), sql.SQL(c.Args[2]), "The slide duration (%d) must be less than or equal to the windowDuration (%d) (Spark's reason)", slide, size)
	case eventtime.WindowsPerRow(size, slide) > eventtime.MaxWindowsPerRow:
		return errAt(c.Args[2].Position(), sql.SQL(c.Args[2]), "puts each row into %d windows: at most %d are allowed; use a longer slide or a shorter window", eventtime.WindowsPerRow(size, slide), eventtime.MaxWindowsPerRow)
	}
	if len(c.Args) == 4 && (start < 0 || start >= slide) {
		return errAt(c.Args[3].Position(), sql.SQL(c.Args[3]), "the start time must be at least 0 and less than the slide (Sluice; Spark takes |startTime| < slide and a negative one is the same as slide + startTime)")
	}
	pa.Window = &PlanWindow{Column: col.Col, Size: size, Slide: slide, StartTime: start}
	return nil
}

// windowNames are the output columns of window (window_start,
// window_end) or session_window (session_window_start,
// session_window_end): Spark's struct, flattened.
func (sc *aggScope) windowNames() (string, string) {
	if sc.winName == "session_window" {
		return SessionWindowStart, SessionWindowEnd
	}
	return WindowStart, WindowEnd
}

// output is the aggregate's output row.
func (sc *aggScope) output() []PlanColumn {
	var out []PlanColumn
	if sc.nWindow > 0 {
		start, end := sc.windowNames()
		out = append(out, PlanColumn{start, expr.TimestampType}, PlanColumn{end, expr.TimestampType})
	}
	for _, g := range sc.groups {
		out = append(out, PlanColumn{g.name, g.typ})
	}
	for _, m := range sc.measures {
		out = append(out, PlanColumn{m.Name, m.Type})
	}
	return out
}

// match returns the aggregate-output column e stands for: window.start or
// .end, a grouping expression, or nothing.
func (sc *aggScope) match(e sql.Expr) (*expr.Expr, bool, error) {
	if id, ok := e.(*sql.Ident); ok && len(id.Parts) == 2 && sc.nWindow > 0 && strings.EqualFold(id.Parts[0], sc.winName) && sc.a.findInput(id.Parts[0]) < 0 {
		start, end := sc.windowNames()
		switch strings.ToLower(id.Parts[1]) {
		case "start":
			return expr.Column(0, start, expr.TimestampType), true, nil
		case "end":
			return expr.Column(1, end, expr.TimestampType), true, nil
		}
		return nil, true, errAt(id.Pos, sql.SQL(id), "%s has the fields start and end", sc.winName)
	}
	text := strings.ToLower(sql.SQL(e))
	for i, g := range sc.groups {
		if g.text == text {
			return expr.Column(sc.nWindow+i, g.name, g.typ), true, nil
		}
		// A column reference matches a grouping column however it is
		// qualified.
		if id, ok := e.(*sql.Ident); ok && g.col < len(sc.a.in) {
			if c, err := sc.a.column(id); err == nil && c.Col == g.col {
				return expr.Column(sc.nWindow+i, g.name, g.typ), true, nil
			}
		}
	}
	return nil, false, nil
}

// measure returns the output column of an aggregate call, adding the
// measure the first time it is met.
func (sc *aggScope) measure(x *sql.Call) (*expr.Expr, error) {
	a := sc.a
	name := strings.ToLower(x.Name)
	if name == "mean" {
		name = FnAvg
	}
	if x.Distinct {
		if name == FnCount {
			return nil, errAt(x.Pos, sql.SQL(x), reasonDistinctAgg)
		}
		return nil, errAt(x.Pos, sql.SQL(x), "Distinct aggregations are not supported on streaming DataFrames/Datasets (Spark's reason)")
	}
	text := strings.ToLower(sql.SQL(x))
	if name == FnCount && x.Star {
		text = "count(1)"
	}
	pos := len(sc.groups) + sc.nWindow
	for i, t := range sc.mText {
		if t == text {
			m := sc.measures[i]
			return expr.Column(pos+i, m.Name, m.Type), nil
		}
	}
	m := PlanMeasure{Fn: name, Arg: -1}
	switch {
	case x.Star:
		if name != FnCount {
			return nil, errAt(x.Pos, sql.SQL(x), "only count takes *")
		}
	case name == FnCount && len(x.Args) == 1 && isNonNullLiteral(x.Args[0]):
		// count(1): count(*)
	case name == FnApproxCountDistinct && (len(x.Args) == 1 || len(x.Args) == 2):
		if len(x.Args) == 2 {
			l, ok := x.Args[1].(*sql.Literal)
			if !ok || l.Kind != sql.LitNumber || strings.TrimRight(strings.TrimRight(l.Text, "0"), ".") != "0.05" && l.Text != "0.05" {
				return nil, errAt(x.Args[1].Position(), sql.SQL(x.Args[1]), "Sluice's approx_count_distinct has a fixed relative error (rsd 0.05, Spark's default): omit the second argument")
			}
		}
		fallthrough
	default:
		if len(x.Args) != 1 && name != FnApproxCountDistinct {
			return nil, errAt(x.Pos, sql.SQL(x), "[WRONG_NUM_ARGS] the function %s requires 1 parameter but the actual number is %d", name, len(x.Args))
		}
		arg := x.Args[0]
		var nested bool
		var walk func(e sql.Expr)
		walk = func(e sql.Expr) {
			if c, ok := e.(*sql.Call); ok && expr.IsAggregate(c.Name) {
				nested = true
			}
			forEachChild(e, walk)
		}
		walk(arg)
		if nested {
			return nil, errAt(x.Pos, sql.SQL(x), "[NESTED_AGGREGATE_FUNCTION] it is not allowed to use an aggregate function in the argument of another aggregate function")
		}
		e, err := a.expr(arg, nil, "an aggregate's argument")
		if err != nil {
			return nil, err
		}
		switch name {
		case FnSum, FnAvg:
			if e.Type.Kind == row.String || e.Type.Kind == row.Null {
				c, _ := expr.Cast(e, expr.DoubleType)
				e = c
			}
			if !e.Type.IsNumeric() {
				return nil, errAt(x.Pos, sql.SQL(x), "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] parameter 1 requires the NUMERIC type, however %s has the type %s", sql.SQL(arg), strings.ToUpper(e.Type.String()))
			}
			if e.Type.Kind == row.Int {
				c, _ := expr.Cast(e, expr.LongType)
				e = c
			}
		case FnMin, FnMax:
			if e.Type.Array || e.Type.IsInterval() {
				return nil, errAt(x.Pos, sql.SQL(x), "cannot order values of type %s", e.Type)
			}
		}
		if e.Type.Array || e.Type.IsInterval() {
			return nil, errAt(x.Pos, sql.SQL(x), "cannot aggregate values of type %s", e.Type)
		}
		if e.Op == expr.OpColumn {
			m.Arg = e.Col
		} else {
			m.Arg = len(a.in) + len(a.computed)
			a.computed = append(a.computed, PlanExpr{Name: sql.ColumnName(arg), Expr: e})
		}
		m.ArgType = e.Type
	}
	m.Type = measureType(m.Fn, m.ArgType)
	// Its name: the alias of a select item that is just this call.
	m.Name = sql.ColumnName(x)
	if it := sc.inSelect; it != nil && it.Alias != "" && it.Expr == sql.Expr(x) {
		m.Name = it.Alias
	}
	sc.measures = append(sc.measures, m)
	sc.mText = append(sc.mText, text)
	return expr.Column(pos+len(sc.measures)-1, m.Name, m.Type), nil
}

func isNonNullLiteral(e sql.Expr) bool {
	l, ok := e.(*sql.Literal)
	return ok && l.Kind != sql.LitNull
}

// outputMode applies Spark's UnsupportedOperationChecker rules that depend
// on the output mode.
func (a *analyzer) outputMode(aggregated bool) error {
	q, s, p := a.q, a.s, a.p
	if len(q.OrderBy) > 0 {
		if s.OutputMode == Complete && aggregated {
			return errAt(q.OrderPos, "ORDER BY", reasonSortComplete)
		}
		return errAt(q.OrderPos, "ORDER BY", reasonSort)
	}
	if q.Limit != nil {
		if s.OutputMode == Update {
			return errAt(q.LimitPos, "LIMIT", reasonLimitUpdate)
		}
		return errAt(q.LimitPos, "LIMIT", reasonLimit)
	}
	switch s.OutputMode {
	case Update:
		if aggregated && p.Aggregate.Session != nil {
			return errAt(q.GroupPos, "session_window(...)", "Update output mode not supported for session window on streaming DataFrames/DataSets (Spark's reason): "+
				"a session that grows or merges with another would need its earlier rows retracted; use outputMode append or complete")
		}
	case Complete:
		if !aggregated {
			return errAt(q.Pos, "SELECT", reasonCompleteNoAgg)
		}
	case Append:
		if !aggregated {
			return nil
		}
		pa := p.Aggregate
		wm := p.EventTime
		ok := false
		switch {
		case wm < 0:
		case pa.Window != nil:
			ok = pa.Window.Column == wm
		case pa.Session != nil:
			ok = pa.Session.Column == wm
		default:
			ok = slices.Contains(pa.GroupBy, wm)
		}
		if !ok {
			c := "event_time"
			if s.Watermark != nil {
				c = s.Watermark.Column
			}
			pos := q.GroupPos
			if len(q.GroupBy) == 0 {
				pos = q.Pos
			}
			return errAt(pos, "GROUP BY", reasonAppendNoWm, c, c)
		}
	}
	return nil
}
