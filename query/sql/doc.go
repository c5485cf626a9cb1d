// Package sql reads the Spark SQL a query spec's sql: field holds: a lexer
// (Spark's literals, backquoted identifiers, -- and nested /* */
// comments), a recursive-descent parser for the subset docs/sql.md
// describes, the syntax tree it builds, and a printer that writes a tree
// back as SQL (Spark's auto-generated column names come from it).
//
// It knows nothing of schemas, types or streaming: package query
// resolves the tree against the spec (names, types, Spark's streaming
// refusals) into its logical plan. Constructs outside the subset that
// the parser can recognise (a subquery, UNION, a window function's OVER,
// GROUPING SETS, bitwise operators) are refused here with their position
// and the reason; clauses whose refusal depends on the query (ORDER BY,
// LIMIT, DISTINCT, a join of the stream with itself) are kept in the tree
// for the analyzer to refuse with Spark's reason for the output mode.
//
// It performs no I/O and holds no state between calls.
package sql
