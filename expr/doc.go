// Package expr owns typed scalar expressions with Spark 3.5's semantics in
// its default (non-ANSI) mode: the expression tree the SQL analyzer builds
// (Expr, with the result Type of every node, Spark's implicit casts made
// explicit), the functions and operators Sluice supports with their type
// rules (Resolve*, Binary, Cast, Call), and the compiler that turns a tree
// into a closure over row.Row values (Compile, Filter, Projection), built
// once and run per row with no reflection and no allocation for the
// comparisons, arithmetic and boolean logic on columns and literals.
//
// Evaluation follows non-ANSI Spark: arithmetic on int and bigint wraps,
// decimal overflow, a failed cast and division by zero give null, and
// nulls follow SQL's three-valued logic. The rare row whose evaluation
// fails in Spark even in that mode (a regular expression built from a
// column that does not compile, a group index past the pattern's groups)
// makes the compiled function return an *EvalError, which matches
// row.ErrMalformed: the caller sets the record aside with the reason.
//
// It performs no I/O and reads no clock: an expression that would read the
// clock (current_timestamp, unix_timestamp()) is refused by the analyzer.
package expr
