package sql

// Query is one SELECT statement.
type Query struct {
	Pos      Pos
	Distinct *Pos // SELECT DISTINCT, refused by the analyzer
	Items    []SelectItem
	From     TableRef
	Join     *Join
	Where    Expr
	GroupBy  []Expr
	GroupPos Pos
	Having   Expr
	OrderBy  []Expr // refused by the analyzer (a sort on a stream)
	OrderPos Pos
	Limit    Expr // refused by the analyzer
	LimitPos Pos
}

// SelectItem is one output column: an expression with an optional alias,
// or a star (Qualifier.* or *).
type SelectItem struct {
	Pos       Pos
	Expr      Expr // nil for a star
	Alias     string
	Star      bool
	Qualifier string
}

// TableRef is the FROM source: a view, or a table function over a view
// (drop_duplicates_within_watermark(TABLE(events), key, ...)).
type TableRef struct {
	Pos   Pos
	Name  string
	Alias string
	// Func is set for a table-valued function: Name is the function,
	// Table the view passed as TABLE(view), Args the other arguments.
	Func  bool
	Table string
	Args  []Expr
}

// Join is a join of the FROM view with another view.
type Join struct {
	Pos   Pos
	Type  string // "inner", "left", "right", "full", "cross", "semi", "anti"
	Table TableRef
	On    Expr
	Using []Ident
}

// Expr is an expression node.
type Expr interface {
	Position() Pos
}

// Ident is a possibly qualified name: a, t.a, window.start.
type Ident struct {
	Pos   Pos
	Parts []string
}

// LiteralKind says what a Literal is.
type LiteralKind uint8

const (
	LitNull LiteralKind = iota + 1
	LitBool
	LitString
	LitNumber   // Text holds the number as written (with its suffix)
	LitInterval // Micros holds its length; Months any year/month part
	LitTyped    // TIMESTAMP '...', DATE '...': Type and Text
)

// Literal is a constant.
type Literal struct {
	Pos    Pos
	Kind   LiteralKind
	Text   string
	Bool   bool
	Micros int64
	Months int64
	Type   string // LitTyped: timestamp or date
}

// Unary is -x, +x, NOT x.
type Unary struct {
	Pos Pos
	Op  string // "-", "+", "NOT"
	X   Expr
}

// Binary is l op r: OR AND = == <=> != <> < <= > >= + - * / % div ||.
type Binary struct {
	Pos  Pos
	Op   string
	L, R Expr
}

// Call is a function call; Star for f(*), Distinct for f(DISTINCT ...).
type Call struct {
	Pos      Pos
	Name     string
	Args     []Expr
	Star     bool
	Distinct bool
	// Over is set when a window specification follows (refused).
	Over *Pos
	// Filter is set for f(...) FILTER (WHERE ...) (refused).
	Filter *Pos
}

// Case is CASE [Operand] WHEN ... THEN ... [ELSE ...] END.
type Case struct {
	Pos     Pos
	Operand Expr
	Whens   []Expr
	Thens   []Expr
	Else    Expr
}

// Cast is CAST(x AS type).
type Cast struct {
	Pos  Pos
	X    Expr
	Type TypeName
}

// TypeName is a SQL type as written: name and, for decimal, precision and
// scale (-1 when not given).
type TypeName struct {
	Pos       Pos
	Name      string
	Precision int
	Scale     int
}

// In is x [NOT] IN (list).
type In struct {
	Pos  Pos
	X    Expr
	List []Expr
	Not  bool
}

// Between is x [NOT] BETWEEN lo AND hi.
type Between struct {
	Pos    Pos
	X      Expr
	Lo, Hi Expr
	Not    bool
}

// Like is x [NOT] LIKE pattern [ESCAPE esc] (RLIKE/REGEXP: Regex).
type Like struct {
	Pos     Pos
	X       Expr
	Pattern Expr
	Escape  string
	Not     bool
	Regex   bool
}

// IsNull is x IS [NOT] NULL.
type IsNull struct {
	Pos Pos
	X   Expr
	Not bool
}

// Index is x[i].
type Index struct {
	Pos   Pos
	X     Expr
	Index Expr
}

// Field is x.name where x is not a plain name (struct field access).
type Field struct {
	Pos  Pos
	X    Expr
	Name string
}

func (e *Ident) Position() Pos   { return e.Pos }
func (e *Literal) Position() Pos { return e.Pos }
func (e *Unary) Position() Pos   { return e.Pos }
func (e *Binary) Position() Pos  { return e.Pos }
func (e *Call) Position() Pos    { return e.Pos }
func (e *Case) Position() Pos    { return e.Pos }
func (e *Cast) Position() Pos    { return e.Pos }
func (e *In) Position() Pos      { return e.Pos }
func (e *Between) Position() Pos { return e.Pos }
func (e *Like) Position() Pos    { return e.Pos }
func (e *IsNull) Position() Pos  { return e.Pos }
func (e *Index) Position() Pos   { return e.Pos }
func (e *Field) Position() Pos   { return e.Pos }
