package query_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	. "github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/catalog"
)

const tileYAML = `
name: course-activity-tile
source:
  file: {path: ./lab/in}
  format: json
  schema:
    - {name: event_id,   type: string,    nullable: false}
    - {name: course_id,  type: string,    nullable: false}
    - {name: lesson_id,  type: string}
    - {name: event_time, type: timestamp, nullable: false}
    - {name: duration_ms, type: long}
    - {name: score, type: double}
watermark: {column: event_time, delay: 10 minutes}
aggregate:
  window: {column: event_time, size: 5m}
  groupBy: [course_id]
  measures: [{name: event_count, fn: count}]
outputMode: append
sink:
  parquet: {path: ./lab/course_activity_tile, partitionBy: window_date}
checkpointLocation: ./lab/checkpoint
`

func tileSpec(t *testing.T) Spec {
	t.Helper()
	s, err := Parse([]byte(tileYAML))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sqlSpec is the tile spec with sql: instead of aggregate:, a join
// declared as the view lessons, and the output mode given.
func sqlSpec(t *testing.T, query string, mode OutputMode) Spec {
	t.Helper()
	s := tileSpec(t)
	s.Aggregate = nil
	s.SQL = query
	s.OutputMode = mode
	s.Sink.Parquet = nil
	s.Sink.JSONBatches = &JSONBatchesSink{Path: "./lab/out"}
	s.Join = &Join{Path: "./lab/lessons", Format: JoinJSON, Keys: []string{"lesson_id"}, Type: JoinInner,
		Columns: []JoinColumn{{Name: "module", Type: "string"}, {Name: "lesson_minutes", Type: "long"}}, View: "lessons"}
	return s
}

// The tile in SQL and in YAML compile to the same plan, whose output is
// today's tile output (window_start, window_end, course_id, event_count).
func TestTileInSQLAndInYAMLGiveTheSamePlan(t *testing.T) {
	y := tileSpec(t)
	s := tileSpec(t)
	s.Aggregate = nil
	s.SQL = `-- the tile
SELECT window.start AS window_start, window.end AS window_end, course_id,
       count(*) AS event_count
FROM events
GROUP BY window(event_time, '5 minutes'), course_id`
	for _, sp := range []Spec{y, s} {
		if err := catalog.Validate(sp); err != nil {
			t.Fatalf("validate: %v", err)
		}
	}
	py, err := y.Plan()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := s.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(py, ps) {
		t.Errorf("plans differ:\nYAML:\n%s\nSQL:\n%s", py, ps)
	}
	want := fmt.Sprint(y.OutputSchema())
	if got := fmt.Sprint(s.OutputSchema()); got != want {
		t.Errorf("SQL output schema %s, YAML %s", got, want)
	}
	if want != "[{window_start timestamp} {window_end timestamp} {course_id string} {event_count long}]" {
		t.Errorf("tile output schema is %s", want)
	}
	// An INTERVAL literal, window's other spelling, and a different select
	// order give the same aggregate with a projection.
	s.SQL = "SELECT course_id, window.start AS window_start, count(1) AS event_count FROM events GROUP BY course_id, window(event_time, INTERVAL 5 MINUTES)"
	ps2, err := s.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ps2.Aggregate, py.Aggregate) {
		t.Errorf("aggregate differs:\n%s\n%s", ps2, py)
	}
	if fmt.Sprint(ps2.OutputColumns()) != "[{course_id string} {window_start timestamp} {event_count long}]" {
		t.Errorf("projection output %v", ps2.OutputColumns())
	}
}

// TestSQLPlan runs testdata/sql.txt: "plan [mode=append|update|complete]"
// with SQL as input prints the plan or the problems.
func TestSQLPlan(t *testing.T) {
	datadriven.RunTest(t, "testdata/sql.txt", func(t *testing.T, td *datadriven.TestData) string {
		mode := "append"
		if td.HasArg("mode") {
			td.ScanArgs(t, "mode", &mode)
		}
		s := sqlSpec(t, td.Input, OutputMode(mode))
		if td.HasArg("leftjoin") {
			s.Join.Type = JoinLeft
		}
		if err := catalog.Validate(s); err != nil {
			return "refused:\n" + err.Error() + "\n"
		}
		p, err := s.Plan()
		if err != nil {
			return "plan error: " + err.Error() + "\n"
		}
		return p.String()
	})
}

// Every refused construct: the message names it, says why, and points at
// its line and column.
func TestSQLRefusalsNameTheConstructAndItsPosition(t *testing.T) {
	for _, tc := range []struct {
		mode      OutputMode
		sql       string
		line, col int
		construct string
		reason    string
	}{
		{Append, "SELECT course_id FROM events ORDER BY course_id", 1, 30, "ORDER BY", "Sorting is not supported on streaming DataFrames/Datasets"},
		{Complete, "SELECT course_id, count(*) FROM events GROUP BY course_id ORDER BY 2", 1, 59, "ORDER BY", "does not sort"},
		{Update, "SELECT * FROM events LIMIT 10", 1, 22, "LIMIT", "Limits are not supported on streaming DataFrames/Datasets in Update output mode"},
		{Append, "SELECT * FROM events LIMIT 10", 1, 22, "LIMIT", "keeps no state for a limit"},
		{Update, "SELECT course_id, count(DISTINCT event_id) FROM events GROUP BY course_id", 1, 19, "count(DISTINCT event_id)", "Consider using approx_count_distinct()"},
		{Append, "SELECT course_id, count(*) FROM events GROUP BY course_id", 1, 40, "GROUP BY", "Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark"},
		{Complete, "SELECT * FROM events", 1, 1, "SELECT", "Complete output mode not supported when there are no streaming aggregations"},
		{Update, "SELECT e.course_id FROM events e JOIN events f ON e.event_id = f.event_id", 1, 34, "JOIN events", "Join between two streaming DataFrames/Datasets is not supported in Update output mode, only in Append output mode"},
		{Append, "SELECT * FROM events JOIN events2 ON events.x = events2.x", 1, 27, "events2", "is not a view of this query"},
		{Append, "SELECT * FROM events\nWHERE course_id IN (SELECT course_id FROM events)", 2, 21, "IN (SELECT ...)", "subqueries are not supported"},
		{Append, "SELECT * FROM (SELECT * FROM events)", 1, 15, "(", "subqueries are not supported"},
		{Append, "SELECT course_id, row_number() OVER (PARTITION BY course_id ORDER BY event_time) FROM events", 1, 32, "OVER", "Non-time-based windows are not supported on streaming DataFrames/Datasets"},
		{Append, "SELECT DISTINCT course_id FROM events", 1, 8, "SELECT DISTINCT", "drop_duplicates_within_watermark"},
		{Append, "SELECT * FROM events UNION SELECT * FROM events", 1, 22, "UNION", "one SELECT over one stream"},
		{Append, "WITH t AS (SELECT * FROM events) SELECT * FROM t", 1, 1, "WITH", "common table expressions"},
		{Append, "SELECT * FROM events RIGHT JOIN lessons USING (lesson_id)", 1, 22, "RIGHT JOIN", "static rows no event matched"},
		{Append, "SELECT * FROM events LEFT JOIN lessons USING (lesson_id)", 1, 22, "LEFT JOIN", "join.type is inner"},
		{Append, "SELECT * FROM events JOIN lessons ON events.course_id = lessons.course_id", 1, 22, "JOIN", "must be exactly the join's keys"},
		{Append, "SELECT rand() FROM events", 1, 8, "rand()", "not deterministic"},
		{Append, "SELECT to_json(course_id) FROM events", 1, 8, "to_json", "UNRESOLVED_ROUTINE"},
		{Append, "SELECT nope FROM events", 1, 8, "nope", "UNRESOLVED_COLUMN"},
		{Append, "SELECT lesson_id FROM events JOIN lessons ON events.lesson_id = lessons.lesson_id", 1, 8, "lesson_id", "AMBIGUOUS_REFERENCE"},
		{Append, "SELECT course_id, event_id, count(*) FROM events GROUP BY window(event_time, '5 minutes'), course_id", 1, 19, "event_id", "MISSING_AGGREGATION"},
		{Append, "SELECT window.start, count(*) FROM events GROUP BY window(event_time, '1 month')", 1, 71, "'1 month'", "Intervals greater than a month is not supported"},
		{Append, "SELECT window.start, count(*) FROM events GROUP BY window(event_time, '5 minutes', '10 minutes')", 1, 84, "'10 minutes'", "must be less than or equal to the windowDuration"},
		{Append, "SELECT window.start, count(*) FROM events GROUP BY window(course_id, '5 minutes')", 1, 59, "course_id", "needs a timestamp column"},
		{Append, "SELECT course_id FROM events WHERE count(*) > 1", 1, 36, "count(*)", "not allowed in WHERE"},
		{Append, "SELECT course_id FROM events WHERE course_id + true", 1, 46, "(course_id + true)", "requires numeric operands"},
		{Append, "SELECT regexp_extract(course_id, '(a)(b)', 3) FROM events", 1, 8, "regexp_extract(course_id, '(a)(b)', 3)", "between 0 and 2, but got 3"},
		{Append, "SELECT regexp_extract(course_id, '(?<=a)b', 0) FROM events", 1, 8, "regexp_extract(course_id, '(?<=a)b', 0)", "RE2"},
		{Append, "SELECT date_format(event_time, 'YYYY-ww') FROM events", 1, 8, "date_format(event_time, 'YYYY-ww')", "week-based patterns are unsupported"},
		{Append, "SELECT split(course_id, ',') FROM events", 1, 8, "split(course_id, ',')", "index split's array"},
		{Append, "SELECT course_id FROM events WHERE course_id = 'a' &&& 1", 1, 52, "'&'", "bitwise"},
		{Append, "SELECT course_id\nFROM events\nWHERE course_id = 'it''s", 3, 23, "string literal", "not closed"},
		{Append, "SELECT course_id FROM events /* open", 1, 30, "/*", "not closed"},
		{Append, "SELECT course_id FROM", 1, 22, "end of input", "syntax error"},
		{Append, "SELECT CAST(course_id AS float) FROM events", 1, 26, "FLOAT", "is not a type Sluice supports"},
		{Append, "SELECT event_time + INTERVAL 1 MONTH FROM events", 1, 21, "INTERVAL 1 MONTH", "no fixed length"},
		{Append, "SELECT course_id, count(*) FROM events GROUP BY ROLLUP(course_id)", 1, 49, "ROLLUP", "GROUPING SETS, ROLLUP and CUBE"},
		{Append, "SELECT * FROM drop_duplicates_within_watermark(TABLE(events), nope)", 1, 63, "nope", "is not a column"},
		{Append, "SELECT course_id, count(*) FILTER (WHERE score > 1) FROM events GROUP BY course_id", 1, 28, "FILTER (WHERE ...)", "aggregate filters"},
	} {
		s := sqlSpec(t, tc.sql, tc.mode)
		err := catalog.Validate(s)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: want a refusal, got %v", tc.sql, err)
			continue
		}
		var p *Problem
		for i := range ve.Problems {
			if ve.Problems[i].Field == "sql" {
				p = &ve.Problems[i]
			}
		}
		if p == nil {
			t.Errorf("%s: no sql problem in %v", tc.sql, err)
			continue
		}
		if p.Line != tc.line || p.Column != tc.col || p.Value != tc.construct || !strings.Contains(p.Rule, tc.reason) {
			t.Errorf("%s (%s):\n got %d:%d %q: %s\nwant %d:%d %q: ...%s...", tc.sql, tc.mode, p.Line, p.Column, p.Value, p.Rule, tc.line, tc.col, tc.construct, tc.reason)
		}
	}
}
