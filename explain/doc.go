// Package explain renders a query's incremental plan as text, as Spark's
// explain does for a streaming query: source and offset planning, decode
// and schema, a filter pushed below the watermark, the watermark, a
// deduplication (its map side, shuffle and state), the join, filters and
// computed columns, window or session-window assignment, partial
// aggregate, the shuffle by key hash, the state store, the emit/evict rule
// of the output mode, HAVING and the projection, and the sink with its
// commit protocol, with the numbers that matter. It renders the query's
// query.Plan, which sql: and aggregate: compile to alike: the tile in
// either explains the same.
//
// It is a pure function of the spec: it opens nothing, reads no clock and
// checks no path (engine.Check does that). It must not decide anything the
// engine decides: it describes the rules the engine's packages apply, using
// their constants (agg.KeyHashName, query defaults).
package explain
