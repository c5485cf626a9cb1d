package sql

import (
	"strings"
)

// String prints the query back as SQL; Parse of the result gives an
// equal tree (positions aside).
func (q *Query) String() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if q.Distinct != nil {
		b.WriteString("DISTINCT ")
	}
	for i, it := range q.Items {
		if i > 0 {
			b.WriteString(", ")
		}
		switch {
		case it.Star && it.Qualifier != "":
			b.WriteString(quoteIdent(it.Qualifier) + ".*")
		case it.Star:
			b.WriteString("*")
		default:
			b.WriteString(SQL(it.Expr))
			if it.Alias != "" {
				b.WriteString(" AS " + quoteIdent(it.Alias))
			}
		}
	}
	b.WriteString(" FROM ")
	b.WriteString(tableSQL(q.From))
	if j := q.Join; j != nil {
		b.WriteString(" " + strings.ToUpper(j.Type) + " JOIN " + tableSQL(j.Table))
		if j.On != nil {
			b.WriteString(" ON " + SQL(j.On))
		}
		if len(j.Using) > 0 {
			names := make([]string, len(j.Using))
			for i, u := range j.Using {
				names[i] = quoteIdent(u.Parts[0])
			}
			b.WriteString(" USING (" + strings.Join(names, ", ") + ")")
		}
	}
	if q.Where != nil {
		b.WriteString(" WHERE " + SQL(q.Where))
	}
	if len(q.GroupBy) > 0 {
		b.WriteString(" GROUP BY " + list(q.GroupBy))
	}
	if q.Having != nil {
		b.WriteString(" HAVING " + SQL(q.Having))
	}
	if len(q.OrderBy) > 0 {
		b.WriteString(" ORDER BY " + list(q.OrderBy))
	}
	if q.Limit != nil {
		b.WriteString(" LIMIT " + SQL(q.Limit))
	}
	return b.String()
}

func tableSQL(t TableRef) string {
	s := quoteIdent(t.Name)
	if t.Func {
		var args []string
		if t.Table != "" {
			args = append(args, "TABLE("+quoteIdent(t.Table)+")")
		}
		for _, a := range t.Args {
			args = append(args, SQL(a))
		}
		s += "(" + strings.Join(args, ", ") + ")"
	}
	if t.Alias != "" {
		s += " AS " + quoteIdent(t.Alias)
	}
	return s
}

func list(es []Expr) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = SQL(e)
	}
	return strings.Join(out, ", ")
}

// quoteIdent writes a name bare when the lexer reads it back as the same
// identifier and not as a keyword the parser treats specially, and in
// backquotes otherwise.
func quoteIdent(name string) string {
	plain := name != ""
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain && !reservedInPrint[strings.ToLower(name)] && !clauseWords[strings.ToLower(name)] {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

var reservedInPrint = map[string]bool{
	"select": true, "null": true, "true": true, "false": true, "interval": true, "case": true,
	"cast": true, "try_cast": true, "when": true, "then": true, "else": true, "end": true, "div": true,
	"exists": true, "timestamp": true, "date": true, "current_timestamp": true, "current_date": true,
	"distinct": true, "all": true, "with": true, "escape": true, "table": true, "filter": true, "over": true,
	"current_timezone": true, "timestamp_ltz": true, "timestamp_ntz": true,
}

func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case 0:
			b.WriteString(`\0`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// SQL prints an expression as Spark SQL, parenthesising every operator.
func SQL(e Expr) string {
	var b strings.Builder
	write(&b, e, false)
	return b.String()
}

// ColumnName is the name Spark gives an unaliased select item: the last
// part of a column reference, otherwise the expression's SQL with string
// literals unquoted (Spark's toPrettySQL); count(*) is count(1).
func ColumnName(e Expr) string {
	if id, ok := e.(*Ident); ok {
		return id.Parts[len(id.Parts)-1]
	}
	if f, ok := e.(*Field); ok {
		return f.Name
	}
	var b strings.Builder
	write(&b, e, true)
	return b.String()
}

func write(b *strings.Builder, e Expr, pretty bool) {
	w := func(x Expr) { write(b, x, pretty) }
	switch x := e.(type) {
	case *Ident:
		for i, p := range x.Parts {
			if i > 0 {
				b.WriteByte('.')
			}
			if pretty {
				b.WriteString(p)
			} else {
				b.WriteString(quoteIdent(p))
			}
		}
	case *Literal:
		switch x.Kind {
		case LitNull:
			b.WriteString("NULL")
		case LitBool:
			if x.Bool {
				b.WriteString("true")
			} else {
				b.WriteString("false")
			}
		case LitString:
			if pretty {
				b.WriteString(x.Text)
			} else {
				b.WriteString(quoteString(x.Text))
			}
		case LitNumber:
			b.WriteString(x.Text)
		case LitInterval:
			b.WriteString(x.Text)
		case LitTyped:
			b.WriteString(strings.ToUpper(x.Type) + " " + quoteString(x.Text))
		}
	case *Unary:
		if x.Op == "NOT" {
			b.WriteString("(NOT ")
		} else {
			b.WriteString("(" + x.Op + " ")
		}
		w(x.X)
		b.WriteString(")")
	case *Binary:
		b.WriteString("(")
		w(x.L)
		b.WriteString(" " + x.Op + " ")
		w(x.R)
		b.WriteString(")")
	case *Call:
		b.WriteString(x.Name + "(")
		switch {
		case x.Star && pretty:
			b.WriteString("1")
		case x.Star:
			b.WriteString("*")
		}
		if x.Distinct {
			b.WriteString("DISTINCT ")
		}
		for i, a := range x.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			w(a)
		}
		b.WriteString(")")
	case *Case:
		b.WriteString("CASE")
		if x.Operand != nil {
			b.WriteString(" ")
			w(x.Operand)
		}
		for i := range x.Whens {
			b.WriteString(" WHEN ")
			w(x.Whens[i])
			b.WriteString(" THEN ")
			w(x.Thens[i])
		}
		if x.Else != nil {
			b.WriteString(" ELSE ")
			w(x.Else)
		}
		b.WriteString(" END")
	case *Cast:
		b.WriteString("CAST(")
		w(x.X)
		b.WriteString(" AS " + strings.ToUpper(x.Type.Name))
		if x.Type.Precision >= 0 {
			b.WriteString("(" + itoa(x.Type.Precision))
			if x.Type.Scale >= 0 {
				b.WriteString(", " + itoa(x.Type.Scale))
			}
			b.WriteString(")")
		}
		b.WriteString(")")
	case *In:
		b.WriteString("(")
		w(x.X)
		if x.Not {
			b.WriteString(" NOT")
		}
		b.WriteString(" IN (")
		for i, a := range x.List {
			if i > 0 {
				b.WriteString(", ")
			}
			w(a)
		}
		b.WriteString("))")
	case *Between:
		b.WriteString("(")
		w(x.X)
		if x.Not {
			b.WriteString(" NOT")
		}
		b.WriteString(" BETWEEN ")
		w(x.Lo)
		b.WriteString(" AND ")
		w(x.Hi)
		b.WriteString(")")
	case *Like:
		b.WriteString("(")
		w(x.X)
		if x.Not {
			b.WriteString(" NOT")
		}
		if x.Regex {
			b.WriteString(" RLIKE ")
		} else {
			b.WriteString(" LIKE ")
		}
		w(x.Pattern)
		if x.Escape != `\` {
			b.WriteString(" ESCAPE " + quoteString(x.Escape))
		}
		b.WriteString(")")
	case *IsNull:
		b.WriteString("(")
		w(x.X)
		if x.Not {
			b.WriteString(" IS NOT NULL)")
		} else {
			b.WriteString(" IS NULL)")
		}
	case *Index:
		w(x.X)
		b.WriteString("[")
		w(x.Index)
		b.WriteString("]")
	case *Field:
		w(x.X)
		b.WriteString("." + quoteIdent(x.Name))
	}
}

func itoa(n int) string {
	var buf [20]byte
	i := len(buf)
	neg := n < 0
	if neg {
		n = -n
	}
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	if neg {
		i--
		buf[i] = '-'
	}
	return string(buf[i:])
}
