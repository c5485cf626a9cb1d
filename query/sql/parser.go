package sql

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Parse reads one SELECT statement (an optional trailing semicolon) in the
// subset docs/sql.md describes. A syntax error or a construct outside the
// subset is an *Error with its position.
func Parse(src string) (*Query, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	q, err := p.query()
	if err != nil {
		return nil, err
	}
	return q, nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token       { return p.toks[p.i] }
func (p *parser) peekN(n int) token { return p.toks[min(p.i+n, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool { t := p.peek(); return t.kind == tOp && t.text == op }

func (p *parser) acceptOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) accept(kw string) bool {
	if p.peek().is(kw) {
		p.next()
		return true
	}
	return false
}

func syntaxErr(t token, expected string) *Error {
	return &Error{Pos: t.pos, Construct: t.describe(), Reason: "syntax error: expected " + expected}
}

func refuse(t token, construct, reason string) *Error {
	return &Error{Pos: t.pos, Construct: construct, Reason: reason}
}

func (p *parser) expectOp(op string) error {
	if !p.acceptOp(op) {
		return syntaxErr(p.peek(), "'"+op+"'")
	}
	return nil
}

func (p *parser) expectKw(kw string) error {
	if !p.accept(kw) {
		return syntaxErr(p.peek(), strings.ToUpper(kw))
	}
	return nil
}

// Refusal reasons shared by the parser and the analyzer.
const (
	ReasonSubquery   = "subqueries are not supported: a streaming query reads its view once; write the condition on the view's columns, or join a static view"
	ReasonSetOp      = "is not supported: Sluice runs one SELECT over one stream"
	ReasonOver       = "Non-time-based windows are not supported on streaming DataFrames/Datasets (Spark's reason); group by window(...) or session_window(...) instead"
	ReasonBitwise    = "bitwise operators are not supported by Sluice"
	ReasonGroupingSt = "GROUPING SETS, ROLLUP and CUBE are not supported on a stream by Sluice: group by one list of columns"
)

// keywords that end a select item or a table reference (they cannot be
// an alias without AS).
var clauseWords = map[string]bool{
	"from": true, "where": true, "group": true, "having": true, "order": true, "limit": true,
	"join": true, "inner": true, "left": true, "right": true, "full": true, "cross": true,
	"on": true, "using": true, "union": true, "intersect": true, "except": true, "minus": true,
	"window": true, "sort": true, "cluster": true, "distribute": true, "lateral": true,
	"natural": true, "semi": true, "anti": true, "outer": true, "offset": true, "qualify": true,
	"as": true, "and": true, "or": true, "not": true, "is": true, "in": true, "between": true,
	"like": true, "rlike": true, "regexp": true, "tablesample": true, "pivot": true, "unpivot": true,
}

func (p *parser) query() (*Query, error) {
	t := p.peek()
	switch {
	case t.is("with"):
		return nil, refuse(t, "WITH", "common table expressions are not supported: write one SELECT over the view")
	case t.kind == tOp && t.text == "(":
		return nil, refuse(t, "(", ReasonSubquery)
	case !t.is("select"):
		if t.kind == tIdent && (t.is("insert") || t.is("create") || t.is("update") || t.is("delete") || t.is("merge") || t.is("drop")) {
			return nil, refuse(t, strings.ToUpper(t.text), "is not a query: the sql field holds one SELECT; the spec says where its rows go (sink)")
		}
		return nil, syntaxErr(t, "SELECT")
	}
	q := &Query{Pos: t.pos}
	p.next()
	if d := p.peek(); d.is("distinct") {
		pos := d.pos
		q.Distinct = &pos
		p.next()
	} else {
		p.accept("all")
	}
	for {
		it, err := p.selectItem()
		if err != nil {
			return nil, err
		}
		q.Items = append(q.Items, it)
		if !p.acceptOp(",") {
			break
		}
	}
	if t := p.peek(); !t.is("from") {
		if t.kind == tEOF {
			return nil, refuse(t, "SELECT without FROM", "a streaming query reads its view: add FROM events (the source's view)")
		}
		return nil, syntaxErr(t, "',' or FROM")
	}
	p.next()
	from, err := p.tableRef()
	if err != nil {
		return nil, err
	}
	q.From = from
	if p.isOp(",") {
		return nil, refuse(p.peek(), "','", "a comma join (a cross join) is not supported: JOIN the static view ON its keys")
	}
	if j, err := p.join(); err != nil {
		return nil, err
	} else if j != nil {
		q.Join = j
		if t := p.peek(); t.is("join") || t.is("left") || t.is("inner") || t.is("right") || t.is("full") || t.is("cross") || t.is("natural") {
			return nil, refuse(t, strings.ToUpper(t.text)+" JOIN", "a second join is not supported: Sluice joins the stream with one static view")
		}
	}
	if p.accept("where") {
		if q.Where, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if t := p.peek(); t.is("group") {
		p.next()
		if err := p.expectKw("by"); err != nil {
			return nil, err
		}
		q.GroupPos = t.pos
		if g := p.peek(); g.is("grouping") || ((g.is("rollup") || g.is("cube")) && p.peekN(1).kind == tOp && p.peekN(1).text == "(") {
			return nil, refuse(g, strings.ToUpper(g.text), ReasonGroupingSt)
		}
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			q.GroupBy = append(q.GroupBy, e)
			if !p.acceptOp(",") {
				break
			}
		}
		if w := p.peek(); w.is("with") {
			return nil, refuse(w, "WITH "+strings.ToUpper(p.peekN(1).text), ReasonGroupingSt)
		}
	}
	if p.accept("having") {
		if q.Having, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if t := p.peek(); t.is("window") || t.is("qualify") {
		return nil, refuse(t, strings.ToUpper(t.text), ReasonOver)
	}
	if t := p.peek(); (t.is("order") || t.is("sort")) && p.peekN(1).is("by") {
		p.next()
		p.next()
		q.OrderPos = t.pos
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			p.accept("asc")
			p.accept("desc")
			if p.accept("nulls") {
				if !p.accept("first") && !p.accept("last") {
					return nil, syntaxErr(p.peek(), "FIRST or LAST")
				}
			}
			q.OrderBy = append(q.OrderBy, e)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if t := p.peek(); (t.is("cluster") || t.is("distribute")) && p.peekN(1).is("by") {
		return nil, refuse(t, strings.ToUpper(t.text)+" BY", "is not supported: the shuffle is by the grouping keys")
	}
	if t := p.peek(); t.is("limit") {
		p.next()
		q.LimitPos = t.pos
		if q.Limit, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if t := p.peek(); t.is("offset") {
		return nil, refuse(t, "OFFSET", "is not supported on a stream: a stream has no first rows to skip")
	}
	if t := p.peek(); t.is("union") || t.is("intersect") || t.is("except") || t.is("minus") {
		return nil, refuse(t, strings.ToUpper(t.text), ReasonSetOp)
	}
	p.acceptOp(";")
	if t := p.peek(); t.kind != tEOF {
		if t.is("select") {
			return nil, refuse(t, "SELECT", "one statement only: the sql field holds one SELECT")
		}
		return nil, syntaxErr(t, "end of the query")
	}
	return q, nil
}

func (p *parser) selectItem() (SelectItem, error) {
	t := p.peek()
	if p.acceptOp("*") {
		return SelectItem{Pos: t.pos, Star: true}, nil
	}
	if (t.kind == tIdent || t.kind == tQuoted) && p.peekN(1).kind == tOp && p.peekN(1).text == "." && p.peekN(2).kind == tOp && p.peekN(2).text == "*" {
		p.next()
		p.next()
		p.next()
		return SelectItem{Pos: t.pos, Star: true, Qualifier: t.text}, nil
	}
	e, err := p.expr()
	if err != nil {
		return SelectItem{}, err
	}
	it := SelectItem{Pos: t.pos, Expr: e}
	alias, ok, err := p.alias()
	if err != nil {
		return SelectItem{}, err
	}
	if ok {
		it.Alias = alias
	}
	return it, nil
}

// alias reads [AS] name.
func (p *parser) alias() (string, bool, error) {
	if p.accept("as") {
		t := p.next()
		if t.kind != tIdent && t.kind != tQuoted {
			if t.kind == tOp && t.text == "(" {
				return "", false, refuse(t, "AS (", "multi-column aliases are not supported")
			}
			return "", false, syntaxErr(t, "a name after AS")
		}
		return t.text, true, nil
	}
	t := p.peek()
	if t.kind == tQuoted || (t.kind == tIdent && !clauseWords[strings.ToLower(t.text)]) {
		p.next()
		return t.text, true, nil
	}
	return "", false, nil
}

func (p *parser) tableRef() (TableRef, error) {
	t := p.peek()
	if t.kind == tOp && t.text == "(" {
		return TableRef{}, refuse(t, "(", ReasonSubquery)
	}
	if t.kind != tIdent && t.kind != tQuoted {
		return TableRef{}, syntaxErr(t, "a view name")
	}
	if t.is("lateral") || t.is("values") {
		return TableRef{}, refuse(t, strings.ToUpper(t.text), "is not supported: FROM names the source's view")
	}
	p.next()
	ref := TableRef{Pos: t.pos, Name: t.text}
	if p.isOp(".") {
		return TableRef{}, refuse(p.peek(), t.text+".", "qualified table names are not supported: the views are the spec's (the source's, and the join's)")
	}
	if p.acceptOp("(") {
		ref.Func = true
		for !p.isOp(")") {
			a := p.peek()
			if a.is("table") {
				p.next()
				paren := p.acceptOp("(")
				v := p.next()
				if v.kind != tIdent && v.kind != tQuoted {
					return TableRef{}, syntaxErr(v, "a view name after TABLE")
				}
				if paren {
					if err := p.expectOp(")"); err != nil {
						return TableRef{}, err
					}
				}
				if ref.Table != "" {
					return TableRef{}, refuse(a, "TABLE", "a table function takes one view")
				}
				ref.Table = v.text
			} else {
				e, err := p.expr()
				if err != nil {
					return TableRef{}, err
				}
				ref.Args = append(ref.Args, e)
			}
			if !p.acceptOp(",") {
				break
			}
		}
		if err := p.expectOp(")"); err != nil {
			return TableRef{}, err
		}
	}
	if t := p.peek(); t.is("tablesample") || t.is("pivot") || t.is("unpivot") {
		return TableRef{}, refuse(t, strings.ToUpper(t.text), "is not supported on a stream by Sluice")
	}
	alias, ok, err := p.alias()
	if err != nil {
		return TableRef{}, err
	}
	if ok {
		ref.Alias = alias
	}
	return ref, nil
}

func (p *parser) join() (*Join, error) {
	t := p.peek()
	typ := ""
	switch {
	case t.is("join"):
		typ = "inner"
	case t.is("inner"):
		typ = "inner"
		p.next()
	case t.is("left"):
		p.next()
		switch {
		case p.accept("semi"):
			typ = "semi"
		case p.accept("anti"):
			typ = "anti"
		default:
			p.accept("outer")
			typ = "left"
		}
	case t.is("right") || t.is("full"):
		p.next()
		p.accept("outer")
		typ = strings.ToLower(t.text)
	case t.is("cross"):
		p.next()
		typ = "cross"
	case t.is("natural"):
		return nil, refuse(t, "NATURAL JOIN", "is not supported: JOIN the static view ON or USING its keys")
	default:
		return nil, nil
	}
	if err := p.expectKw("join"); err != nil {
		return nil, err
	}
	ref, err := p.tableRef()
	if err != nil {
		return nil, err
	}
	j := &Join{Pos: t.pos, Type: typ, Table: ref}
	switch {
	case p.accept("on"):
		if j.On, err = p.expr(); err != nil {
			return nil, err
		}
	case p.accept("using"):
		if err := p.expectOp("("); err != nil {
			return nil, err
		}
		for {
			n := p.next()
			if n.kind != tIdent && n.kind != tQuoted {
				return nil, syntaxErr(n, "a column name")
			}
			j.Using = append(j.Using, Ident{Pos: n.pos, Parts: []string{n.text}})
			if !p.acceptOp(",") {
				break
			}
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// Expressions, from the loosest binding.

func (p *parser) expr() (Expr, error) { return p.or() }

func (p *parser) or() (Expr, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !t.is("or") {
			return l, nil
		}
		p.next()
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = &Binary{Pos: t.pos, Op: "OR", L: l, R: r}
	}
}

func (p *parser) and() (Expr, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !t.is("and") {
			return l, nil
		}
		p.next()
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = &Binary{Pos: t.pos, Op: "AND", L: l, R: r}
	}
}

func (p *parser) not() (Expr, error) {
	t := p.peek()
	if t.is("not") || (t.kind == tOp && t.text == "!") {
		p.next()
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &Unary{Pos: t.pos, Op: "NOT", X: x}, nil
	}
	if t.is("exists") && p.peekN(1).kind == tOp && p.peekN(1).text == "(" {
		return nil, refuse(t, "EXISTS", ReasonSubquery)
	}
	return p.predicate()
}

func (p *parser) predicate() (Expr, error) {
	x, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		not := false
		if t.is("not") && (p.peekN(1).is("between") || p.peekN(1).is("in") || p.peekN(1).is("like") || p.peekN(1).is("rlike") || p.peekN(1).is("regexp") || p.peekN(1).is("ilike")) {
			not = true
			p.next()
		}
		k := p.peek()
		switch {
		case k.is("between"):
			p.next()
			lo, err := p.comparison()
			if err != nil {
				return nil, err
			}
			if err := p.expectKw("and"); err != nil {
				return nil, err
			}
			hi, err := p.comparison()
			if err != nil {
				return nil, err
			}
			x = &Between{Pos: k.pos, X: x, Lo: lo, Hi: hi, Not: not}
		case k.is("in"):
			p.next()
			if err := p.expectOp("("); err != nil {
				return nil, err
			}
			if s := p.peek(); s.is("select") || s.is("with") {
				return nil, refuse(s, "IN (SELECT ...)", ReasonSubquery)
			}
			var list []Expr
			for {
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				list = append(list, e)
				if !p.acceptOp(",") {
					break
				}
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			x = &In{Pos: k.pos, X: x, List: list, Not: not}
		case k.is("like") || k.is("rlike") || k.is("regexp") || k.is("ilike"):
			p.next()
			if k.is("ilike") {
				return nil, refuse(k, "ILIKE", "is not supported by Sluice: write lower(x) LIKE lower(pattern)")
			}
			if a := p.peek(); a.is("any") || a.is("all") || a.is("some") {
				return nil, refuse(a, "LIKE "+strings.ToUpper(a.text), "is not supported by Sluice: combine LIKEs with OR or AND")
			}
			pat, err := p.comparison()
			if err != nil {
				return nil, err
			}
			l := &Like{Pos: k.pos, X: x, Pattern: pat, Escape: `\`, Not: not, Regex: !k.is("like")}
			if e := p.peek(); e.is("escape") {
				p.next()
				s := p.next()
				if s.kind != tString || len([]rune(s.text)) != 1 {
					return nil, refuse(s, "ESCAPE", "the escape must be a string of one character")
				}
				l.Escape = s.text
			}
			x = l
		case k.is("is") && !not:
			p.next()
			isNot := p.accept("not")
			n := p.peek()
			switch {
			case n.is("null"):
				p.next()
				x = &IsNull{Pos: k.pos, X: x, Not: isNot}
			case n.is("distinct"):
				p.next()
				if err := p.expectKw("from"); err != nil {
					return nil, err
				}
				r, err := p.comparison()
				if err != nil {
					return nil, err
				}
				var e Expr = &Binary{Pos: k.pos, Op: "<=>", L: x, R: r}
				if !isNot {
					e = &Unary{Pos: k.pos, Op: "NOT", X: e}
				}
				x = e
			case n.is("true") || n.is("false") || n.is("unknown"):
				p.next()
				// x IS TRUE: (x <=> true).
				var lit Expr = &Literal{Pos: n.pos, Kind: LitBool, Bool: n.is("true")}
				if n.is("unknown") {
					lit = &Literal{Pos: n.pos, Kind: LitNull}
				}
				var e Expr = &Binary{Pos: k.pos, Op: "<=>", L: x, R: lit}
				if isNot {
					e = &Unary{Pos: k.pos, Op: "NOT", X: e}
				}
				x = e
			default:
				return nil, syntaxErr(n, "NULL, NOT NULL, TRUE, FALSE or DISTINCT FROM after IS")
			}
		default:
			if not {
				return nil, syntaxErr(p.peek(), "BETWEEN, IN or LIKE after NOT")
			}
			return x, nil
		}
	}
}

var comparisonOps = map[string]bool{"=": true, "==": true, "<=>": true, "!=": true, "<>": true, "<": true, "<=": true, ">": true, ">=": true}

func (p *parser) comparison() (Expr, error) {
	l, err := p.bitwise()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tOp || !comparisonOps[t.text] {
			return l, nil
		}
		p.next()
		r, err := p.bitwise()
		if err != nil {
			return nil, err
		}
		op := t.text
		switch op {
		case "==":
			op = "="
		case "<>":
			op = "!="
		}
		l = &Binary{Pos: t.pos, Op: op, L: l, R: r}
	}
}

func (p *parser) bitwise() (Expr, error) {
	l, err := p.additive()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tOp && (t.text == "&" || t.text == "|" || t.text == "^") {
		return nil, refuse(t, "'"+t.text+"'", ReasonBitwise)
	}
	return l, nil
}

func (p *parser) additive() (Expr, error) {
	l, err := p.multiplicative()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tOp || (t.text != "+" && t.text != "-" && t.text != "||") {
			return l, nil
		}
		p.next()
		r, err := p.multiplicative()
		if err != nil {
			return nil, err
		}
		l = &Binary{Pos: t.pos, Op: t.text, L: l, R: r}
	}
}

func (p *parser) multiplicative() (Expr, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op := ""
		switch {
		case t.kind == tOp && (t.text == "*" || t.text == "/" || t.text == "%"):
			op = t.text
		case t.is("div"):
			op = "div"
		default:
			return l, nil
		}
		p.next()
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = &Binary{Pos: t.pos, Op: op, L: l, R: r}
	}
}

func (p *parser) unary() (Expr, error) {
	t := p.peek()
	if t.kind == tOp && (t.text == "-" || t.text == "+") {
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		// A negative number literal stays a literal (Spark folds it too).
		if l, ok := x.(*Literal); ok && t.text == "-" && l.Kind == LitNumber && !strings.HasPrefix(l.Text, "-") {
			return &Literal{Pos: t.pos, Kind: LitNumber, Text: "-" + l.Text}, nil
		}
		return &Unary{Pos: t.pos, Op: t.text, X: x}, nil
	}
	if t.kind == tOp && t.text == "~" {
		return nil, refuse(t, "'~'", ReasonBitwise)
	}
	return p.postfix()
}

func (p *parser) postfix() (Expr, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tOp && t.text == "[":
			p.next()
			i, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("]"); err != nil {
				return nil, err
			}
			x = &Index{Pos: t.pos, X: x, Index: i}
		case t.kind == tOp && t.text == ".":
			p.next()
			n := p.next()
			if n.kind != tIdent && n.kind != tQuoted {
				return nil, syntaxErr(n, "a name after '.'")
			}
			if id, ok := x.(*Ident); ok {
				id.Parts = append(id.Parts, n.text)
			} else {
				x = &Field{Pos: n.pos, X: x, Name: n.text}
			}
		case t.kind == tOp && t.text == ":" && p.peekN(1).kind == tOp && p.peekN(1).text == ":":
			return nil, refuse(t, "'::'", "is not Spark 3.5 syntax: write CAST(x AS type)")
		default:
			return x, nil
		}
	}
}

func (p *parser) primary() (Expr, error) {
	t := p.peek()
	switch t.kind {
	case tNumber:
		p.next()
		return &Literal{Pos: t.pos, Kind: LitNumber, Text: t.text}, nil
	case tString:
		p.next()
		s := t.text
		for p.peek().kind == tString { // adjacent literals concatenate
			s += p.next().text
		}
		return &Literal{Pos: t.pos, Kind: LitString, Text: s}, nil
	case tQuoted:
		p.next()
		return &Ident{Pos: t.pos, Parts: []string{t.text}}, nil
	case tOp:
		if t.text == "(" {
			p.next()
			if s := p.peek(); s.is("select") || s.is("with") {
				return nil, refuse(s, "(SELECT ...)", ReasonSubquery)
			}
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			if c := p.peek(); c.kind == tOp && c.text == "," {
				return nil, refuse(c, "(a, b, ...)", "row values are not supported by Sluice")
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return e, nil
		}
		return nil, syntaxErr(t, "an expression")
	case tEOF:
		return nil, syntaxErr(t, "an expression")
	}
	// identifiers and keywords
	switch {
	case t.is("null"):
		p.next()
		return &Literal{Pos: t.pos, Kind: LitNull}, nil
	case t.is("true") || t.is("false"):
		p.next()
		return &Literal{Pos: t.pos, Kind: LitBool, Bool: t.is("true")}, nil
	case t.is("interval"):
		return p.interval()
	case (t.is("timestamp") || t.is("date") || t.is("timestamp_ltz")) && p.peekN(1).kind == tString:
		p.next()
		s := p.next()
		typ := "timestamp"
		if t.is("date") {
			typ = "date"
		}
		return &Literal{Pos: t.pos, Kind: LitTyped, Type: typ, Text: s.text}, nil
	case t.is("timestamp_ntz") && p.peekN(1).kind == tString:
		return nil, refuse(t, "TIMESTAMP_NTZ", "is not supported by Sluice: timestamps are instants (TIMESTAMP)")
	case t.is("case"):
		return p.caseExpr()
	case (t.is("cast") || t.is("try_cast")) && p.peekN(1).kind == tOp && p.peekN(1).text == "(":
		p.next()
		p.next()
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expectKw("as"); err != nil {
			return nil, err
		}
		tn, err := p.typeName()
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return &Cast{Pos: t.pos, X: x, Type: tn}, nil
	case (t.is("current_timestamp") || t.is("current_date") || t.is("current_timezone")) && !(p.peekN(1).kind == tOp && p.peekN(1).text == "("):
		p.next()
		return &Call{Pos: t.pos, Name: strings.ToLower(t.text)}, nil
	}
	p.next()
	if p.isOp("(") {
		return p.call(t)
	}
	return &Ident{Pos: t.pos, Parts: []string{t.text}}, nil
}

func (p *parser) call(name token) (Expr, error) {
	p.next() // (
	c := &Call{Pos: name.pos, Name: strings.ToLower(name.text)}
	switch c.Name {
	case "trim":
		if e, ok, err := p.trimSyntax(c); ok || err != nil {
			return e, err
		}
	case "substring", "substr":
		// substring(str FROM pos [FOR len]) is handled in the arg loop.
	case "extract":
		f := p.next()
		if f.kind != tIdent {
			return nil, syntaxErr(f, "a field name (HOUR, MINUTE, ...)")
		}
		if err := p.expectKw("from"); err != nil {
			return nil, err
		}
		src, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		field := strings.ToLower(f.text)
		switch field {
		case "hour", "minute", "second", "year", "month", "day":
		case "hours", "minutes", "seconds", "years", "months", "days":
			field = strings.TrimSuffix(field, "s")
		default:
			return nil, refuse(f, "EXTRACT("+strings.ToUpper(f.text)+" FROM ...)", "is not supported: Sluice extracts YEAR, MONTH, DAY, HOUR, MINUTE and SECOND")
		}
		return &Call{Pos: name.pos, Name: field, Args: []Expr{src}}, nil
	}
	if p.acceptOp("*") {
		c.Star = true
	} else if !p.isOp(")") {
		if d := p.peek(); d.is("distinct") {
			p.next()
			c.Distinct = true
		} else {
			p.accept("all")
		}
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			c.Args = append(c.Args, e)
			if (c.Name == "substring" || c.Name == "substr") && p.accept("from") {
				pos, err := p.expr()
				if err != nil {
					return nil, err
				}
				c.Args = append(c.Args, pos)
				if p.accept("for") {
					l, err := p.expr()
					if err != nil {
						return nil, err
					}
					c.Args = append(c.Args, l)
				}
				break
			}
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if t := p.peek(); t.is("filter") && p.peekN(1).kind == tOp && p.peekN(1).text == "(" {
		return nil, refuse(t, "FILTER (WHERE ...)", "aggregate filters are not supported by Sluice: use sum(CASE WHEN ... THEN 1 ELSE 0 END) or count(CASE WHEN ... THEN 1 END)")
	}
	if t := p.peek(); t.is("within") || t.is("respect") || t.is("ignore") {
		return nil, refuse(t, strings.ToUpper(t.text), "is not supported by Sluice")
	}
	if t := p.peek(); t.is("over") {
		return nil, refuse(t, "OVER", ReasonOver)
	}
	return c, nil
}

// trimSyntax reads TRIM([BOTH|LEADING|TRAILING] [chars] FROM str).
func (p *parser) trimSyntax(c *Call) (Expr, bool, error) {
	save := p.i
	name := "trim"
	switch {
	case p.accept("both"):
	case p.accept("leading"):
		name = "ltrim"
	case p.accept("trailing"):
		name = "rtrim"
	}
	var chars Expr
	if !p.peek().is("from") {
		e, err := p.expr()
		if err != nil {
			return nil, false, err
		}
		chars = e
	}
	if !p.accept("from") {
		p.i = save
		return nil, false, nil
	}
	src, err := p.expr()
	if err != nil {
		return nil, true, err
	}
	if err := p.expectOp(")"); err != nil {
		return nil, true, err
	}
	args := []Expr{src}
	if chars != nil {
		args = append(args, chars)
	}
	return &Call{Pos: c.Pos, Name: name, Args: args}, true, nil
}

func (p *parser) caseExpr() (Expr, error) {
	t := p.next()
	c := &Case{Pos: t.pos}
	if !p.peek().is("when") {
		op, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Operand = op
	}
	for p.accept("when") {
		w, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expectKw("then"); err != nil {
			return nil, err
		}
		th, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Whens = append(c.Whens, w)
		c.Thens = append(c.Thens, th)
	}
	if len(c.Whens) == 0 {
		return nil, syntaxErr(p.peek(), "WHEN")
	}
	if p.accept("else") {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Else = e
	}
	if err := p.expectKw("end"); err != nil {
		return nil, err
	}
	return c, nil
}

func (p *parser) typeName() (TypeName, error) {
	t := p.next()
	if t.kind != tIdent {
		return TypeName{}, syntaxErr(t, "a type name")
	}
	tn := TypeName{Pos: t.pos, Name: strings.ToLower(t.text), Precision: -1, Scale: -1}
	if p.acceptOp("(") {
		n := p.next()
		if n.kind != tNumber {
			return TypeName{}, syntaxErr(n, "a number")
		}
		tn.Precision, _ = strconv.Atoi(n.text)
		if p.acceptOp(",") {
			s := p.next()
			if s.kind != tNumber {
				return TypeName{}, syntaxErr(s, "a number")
			}
			tn.Scale, _ = strconv.Atoi(s.text)
		}
		if err := p.expectOp(")"); err != nil {
			return TypeName{}, err
		}
	}
	if p.isOp("<") {
		return TypeName{}, refuse(p.peek(), strings.ToUpper(tn.Name)+"<...>", "complex types are not supported by Sluice")
	}
	return tn, nil
}

var intervalUnits = map[string]int64{
	"microsecond": 1, "millisecond": 1000, "second": 1e6, "minute": 60e6, "hour": 3600e6,
	"day": 86400e6, "week": 7 * 86400e6,
}

// unitMicros maps a unit name (singular or plural, any case) to its
// length; months reports YEAR or MONTH.
func unitMicros(u string) (us int64, months int64, ok bool) {
	u = strings.TrimSuffix(strings.ToLower(u), "s")
	switch u {
	case "year":
		return 0, 12, true
	case "month":
		return 0, 1, true
	}
	us, ok = intervalUnits[u]
	return us, 0, ok
}

// amount multiplies a decimal number text by a unit, exactly.
func amount(text string, unit int64) (int64, bool) {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return 0, false
	}
	r.Mul(r, new(big.Rat).SetInt64(unit))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// interval reads INTERVAL 5 MINUTES, INTERVAL '5' MINUTE, INTERVAL
// '1 hour 30 minutes', INTERVAL 1 HOUR 30 MINUTES.
func (p *parser) interval() (Expr, error) {
	start := p.next()
	lit := &Literal{Pos: start.pos, Kind: LitInterval}
	var parts []string
	addPart := func(numTok token, numText string, unitTok token) error {
		us, months, ok := unitMicros(unitTok.text)
		if !ok {
			return &Error{Pos: unitTok.pos, Construct: unitTok.describe(), Reason: "is not an interval unit: use YEAR, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND or MICROSECOND"}
		}
		if months > 0 {
			n, err := strconv.ParseInt(numText, 10, 64)
			if err != nil {
				return &Error{Pos: numTok.pos, Construct: numText, Reason: "a year or month interval needs a whole number"}
			}
			lit.Months += n * months
		} else {
			v, ok := amount(numText, us)
			if !ok {
				return &Error{Pos: numTok.pos, Construct: numText, Reason: "is not a number of " + strings.ToLower(unitTok.text) + " that makes a whole number of microseconds"}
			}
			lit.Micros += v
		}
		parts = append(parts, numText+" "+strings.ToUpper(unitTok.text))
		return nil
	}
	t := p.peek()
	if t.kind == tString {
		p.next()
		u := p.peek()
		if u.kind == tIdent {
			if _, _, ok := unitMicros(u.text); ok {
				p.next()
				if p.peek().is("to") {
					return nil, refuse(p.peek(), "INTERVAL '...' "+strings.ToUpper(u.text)+" TO ...", "interval ranges are not supported by Sluice: write INTERVAL 1 HOUR 30 MINUTES")
				}
				if err := addPart(t, strings.TrimSpace(t.text), u); err != nil {
					return nil, err
				}
				lit.Text = "INTERVAL " + strings.Join(parts, " ")
				return lit, nil
			}
		}
		// '1 hour 30 minutes'
		f := strings.Fields(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(t.text)), "interval "))
		if len(f) == 0 || len(f)%2 != 0 {
			return nil, &Error{Pos: t.pos, Construct: t.raw, Reason: "is not an interval: write '5 minutes' or '1 hour 30 minutes'"}
		}
		for i := 0; i < len(f); i += 2 {
			if err := addPart(t, f[i], token{kind: tIdent, text: f[i+1], pos: t.pos, raw: f[i+1]}); err != nil {
				return nil, err
			}
		}
		lit.Text = "INTERVAL " + strings.Join(parts, " ")
		return lit, nil
	}
	for {
		neg := ""
		n := p.peek()
		if n.kind == tOp && n.text == "-" {
			p.next()
			neg = "-"
			n = p.peek()
		}
		if n.kind != tNumber {
			if len(parts) == 0 {
				return nil, syntaxErr(n, "a number or a string after INTERVAL (INTERVAL 5 MINUTES, INTERVAL '5' MINUTE)")
			}
			break
		}
		p.next()
		u := p.next()
		if u.kind != tIdent {
			return nil, syntaxErr(u, "an interval unit (MINUTES, HOURS, ...)")
		}
		if err := addPart(n, neg+n.text, u); err != nil {
			return nil, err
		}
	}
	lit.Text = "INTERVAL " + strings.Join(parts, " ")
	return lit, nil
}

// NumberValue classifies a number literal as Spark does: an integer is an
// int when it fits, a bigint when it fits 64 bits, else a decimal; L, S, Y
// suffixes make bigint, smallint, tinyint; D and F double and float; BD
// decimal; a fraction makes a decimal and an exponent a double.
func NumberValue(text string) (kind string, i int64, f float64, dec string, err error) {
	s := strings.ToLower(text)
	switch {
	case strings.HasSuffix(s, "bd"):
		return "decimal", 0, 0, text[:len(text)-2], nil
	case strings.HasSuffix(s, "l"), strings.HasSuffix(s, "s"), strings.HasSuffix(s, "y"):
		suffix := s[len(s)-1]
		n, e := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if e != nil {
			return "", 0, 0, "", fmt.Errorf("%s is out of range or not a whole number", text)
		}
		switch suffix {
		case 's':
			if n < math.MinInt16 || n > math.MaxInt16 {
				return "", 0, 0, "", fmt.Errorf("%s is out of the smallint range", text)
			}
			return "int", n, 0, "", nil
		case 'y':
			if n < math.MinInt8 || n > math.MaxInt8 {
				return "", 0, 0, "", fmt.Errorf("%s is out of the tinyint range", text)
			}
			return "int", n, 0, "", nil
		}
		return "bigint", n, 0, "", nil
	case strings.HasSuffix(s, "d"), strings.HasSuffix(s, "f"):
		v, e := strconv.ParseFloat(s[:len(s)-1], 64)
		if e != nil {
			return "", 0, 0, "", fmt.Errorf("%s is not a number", text)
		}
		return "double", 0, v, "", nil
	case strings.ContainsAny(s, "e"):
		v, e := strconv.ParseFloat(s, 64)
		if e != nil {
			return "", 0, 0, "", fmt.Errorf("%s is not a number", text)
		}
		return "double", 0, v, "", nil
	case strings.Contains(s, "."):
		return "decimal", 0, 0, text, nil
	}
	n, e := strconv.ParseInt(s, 10, 64)
	if e != nil {
		return "decimal", 0, 0, text, nil
	}
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return "int", n, 0, "", nil
	}
	return "bigint", n, 0, "", nil
}
