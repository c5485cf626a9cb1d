package expr

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/row"
)

// Op is what an Expr node computes.
type Op uint8

// The operators. A function call is OpCall with Name set.
const (
	OpColumn Op = iota + 1
	OpLiteral
	OpCast
	OpNot
	OpAnd
	OpOr
	OpIsNull
	OpIsNotNull
	OpEq
	OpNullSafeEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpIntDiv
	OpMod
	OpNeg
	OpIn       // Args[0] IN (Args[1:])
	OpCase     // WHEN Args[0] THEN Args[1] ... [ELSE Args[n-1]] (ELSE present when len(Args) is odd)
	OpCoalesce // first non-null of Args
	OpIf       // IF(Args[0], Args[1], Args[2])
	OpLike     // Args[0] LIKE Args[1]; Val.S is the escape character
	OpCall     // the function Name over Args
	OpIndex    // Args[0][Args[1]]: an element of split's array, 0-based
	OpAddInterval
)

var opSymbols = map[Op]string{
	OpAnd: "AND", OpOr: "OR", OpEq: "=", OpNullSafeEq: "<=>", OpNe: "!=", OpLt: "<",
	OpLe: "<=", OpGt: ">", OpGe: ">=", OpAdd: "+", OpSub: "-", OpMul: "*", OpDiv: "/",
	OpIntDiv: "div", OpMod: "%", OpAddInterval: "+",
}

// Expr is a resolved, typed expression: the analyzer builds it with the
// constructors of this package, which check argument types and insert
// Spark's implicit casts, so every node's Type is its result type. It is
// plain data (no closures): two queries that mean the same thing build
// equal trees. Compile turns one into an evaluator.
type Expr struct {
	Op   Op
	Type Type
	// Name is the column's name (OpColumn) or the function's (OpCall).
	Name string
	// Col is the column's index in the row the expression reads (OpColumn).
	Col int
	// Val is the literal's value (OpLiteral), or LIKE's escape.
	Val  row.Value
	Args []*Expr
}

// Column returns a reference to column i of the input row.
func Column(i int, name string, t Type) *Expr {
	return &Expr{Op: OpColumn, Type: t, Name: name, Col: i}
}

// Literal returns a constant.
func Literal(v row.Value, t Type) *Expr {
	if v.Kind == row.Null {
		v = row.Value{}
	}
	return &Expr{Op: OpLiteral, Type: t, Val: v}
}

// Null returns the untyped NULL literal.
func Null() *Expr { return Literal(row.Value{}, NullType) }

// IsLiteral reports whether e is a constant.
func (e *Expr) IsLiteral() bool { return e.Op == OpLiteral }

// Deterministic reports whether e gives the same value for the same row
// every time. All the functions Sluice supports are; the analyzer refuses
// the ones that are not (rand, current_timestamp).
func (e *Expr) Deterministic() bool { return true }

// References calls fn for each column e reads.
func (e *Expr) References(fn func(col int, name string)) {
	if e.Op == OpColumn {
		fn(e.Col, e.Name)
	}
	for _, a := range e.Args {
		a.References(fn)
	}
}

// Rebase returns a copy of e whose column references are mapped through
// cols (old index -> new index).
func (e *Expr) Rebase(cols func(int) int) *Expr {
	c := *e
	if c.Op == OpColumn {
		c.Col = cols(c.Col)
	}
	if len(e.Args) > 0 {
		c.Args = make([]*Expr, len(e.Args))
		for i, a := range e.Args {
			c.Args[i] = a.Rebase(cols)
		}
	}
	return &c
}

// String prints e as Spark SQL (with its implicit casts written out).
func (e *Expr) String() string {
	var b strings.Builder
	e.print(&b)
	return b.String()
}

func (e *Expr) print(b *strings.Builder) {
	switch e.Op {
	case OpColumn:
		b.WriteString(QuoteIdent(e.Name))
	case OpLiteral:
		b.WriteString(literalSQL(e.Val, e.Type))
	case OpCast:
		b.WriteString("CAST(")
		e.Args[0].print(b)
		b.WriteString(" AS ")
		b.WriteString(strings.ToUpper(e.Type.String()))
		b.WriteString(")")
	case OpNot:
		b.WriteString("(NOT ")
		e.Args[0].print(b)
		b.WriteString(")")
	case OpNeg:
		b.WriteString("(- ")
		e.Args[0].print(b)
		b.WriteString(")")
	case OpIsNull, OpIsNotNull:
		b.WriteString("(")
		e.Args[0].print(b)
		if e.Op == OpIsNull {
			b.WriteString(" IS NULL)")
		} else {
			b.WriteString(" IS NOT NULL)")
		}
	case OpIn:
		b.WriteString("(")
		e.Args[0].print(b)
		b.WriteString(" IN (")
		for i, a := range e.Args[1:] {
			if i > 0 {
				b.WriteString(", ")
			}
			a.print(b)
		}
		b.WriteString("))")
	case OpCase:
		b.WriteString("CASE")
		n := len(e.Args)
		for i := 0; i+1 < n; i += 2 {
			b.WriteString(" WHEN ")
			e.Args[i].print(b)
			b.WriteString(" THEN ")
			e.Args[i+1].print(b)
		}
		if n%2 == 1 {
			b.WriteString(" ELSE ")
			e.Args[n-1].print(b)
		}
		b.WriteString(" END")
	case OpCoalesce, OpIf, OpCall:
		name := e.Name
		switch e.Op {
		case OpCoalesce:
			name = "coalesce"
		case OpIf:
			name = "if"
		}
		b.WriteString(name)
		b.WriteString("(")
		for i, a := range e.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			a.print(b)
		}
		b.WriteString(")")
	case OpLike:
		b.WriteString("(")
		e.Args[0].print(b)
		b.WriteString(" LIKE ")
		e.Args[1].print(b)
		if e.Val.S != `\` {
			b.WriteString(" ESCAPE ")
			b.WriteString(quoteString(e.Val.S))
		}
		b.WriteString(")")
	case OpIndex:
		e.Args[0].print(b)
		b.WriteString("[")
		e.Args[1].print(b)
		b.WriteString("]")
	default:
		sym, ok := opSymbols[e.Op]
		if !ok {
			fmt.Fprintf(b, "op%d", e.Op)
			return
		}
		b.WriteString("(")
		e.Args[0].print(b)
		b.WriteString(" " + sym + " ")
		e.Args[1].print(b)
		b.WriteString(")")
	}
}

// QuoteIdent writes a name as Spark SQL does: bare when it is a plain
// identifier, in backquotes otherwise.
func QuoteIdent(name string) string {
	plain := name != ""
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, c := range s {
		switch c {
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func literalSQL(v row.Value, t Type) string {
	switch {
	case v.Kind == row.Null:
		return "NULL"
	case t.Kind == intervalKind:
		return FormatInterval(v.I)
	}
	switch v.Kind {
	case row.String:
		return quoteString(v.S)
	case row.Long:
		return fmt.Sprintf("%dL", v.I)
	case row.Int:
		return fmt.Sprint(v.I)
	case row.Double:
		return string(row.AppendJavaDouble(nil, v.F)) + "D"
	case row.Bool:
		if v.I != 0 {
			return "true"
		}
		return "false"
	case row.Decimal:
		s := row.FormatDecimal(v)
		if v.Scale == 0 {
			return s + "BD"
		}
		return s
	case row.Timestamp:
		return "TIMESTAMP '" + row.FormatTimestamp(v.I) + "'"
	case row.Date:
		return "DATE '" + v.String() + "'"
	}
	return v.String()
}
