package query_test

import (
	"testing"

	"github.com/sluicehq/sluice/expr"
	. "github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// evalSQL evaluates a constant SQL expression through the parser, the
// analyzer and the compiled evaluator, in the session zone, and returns
// its type and its value as CAST(... AS STRING) gives it (NULL for null).
func evalSQL(t *testing.T, zone, e string) (typ, val string, err error) {
	t.Helper()
	s := sqlSpec(t, "SELECT ("+e+") AS v, CAST(("+e+") AS STRING) AS s FROM events", Append)
	s.Join = nil
	s.SessionTimeZone = zone
	p, perr := s.Plan()
	if perr != nil {
		return "", "", perr
	}
	f, cerr := expr.CompileProjection([]*expr.Expr{p.Project[0].Expr, p.Project[1].Expr}, expr.Env{Zone: s.SessionZone()})
	if cerr != nil {
		t.Fatalf("%s: %v", e, cerr)
	}
	out, eerr := f.Apply(nil, make(row.Row, len(p.Source)))
	if eerr != nil {
		return "", "", eerr
	}
	if out[1].Kind == row.Null {
		return p.Output[0].Type.String(), "NULL", nil
	}
	return p.Output[0].Type.String(), out[1].S, nil
}

type exprCase struct {
	zone, sql, typ, want string
}

func runExprCases(t *testing.T, page string, cases []exprCase) {
	t.Helper()
	for _, c := range cases {
		typ, got, err := evalSQL(t, c.zone, c.sql)
		if err != nil {
			t.Errorf("%s (%s): %v", c.sql, page, err)
			continue
		}
		if got != c.want || (c.typ != "" && typ != c.typ) {
			t.Errorf("%s (%s): got %s %q, want %s %q", c.sql, page, typ, got, c.typ, c.want)
		}
	}
}

// Expected values are the examples of Spark 3.5's SQL function reference,
// https://spark.apache.org/docs/3.5.1/api/sql/index.html, entry by entry
// (the anchor is the function's name), unless a comment says otherwise.
func TestStringFunctionsAsSparkDocuments(t *testing.T) {
	runExprCases(t, "api/sql/index.html#lower..#split", []exprCase{
		{"", "lower('SparkSql')", "string", "sparksql"},
		{"", "upper('SparkSql')", "string", "SPARKSQL"},
		{"", "trim('    SparkSQL   ')", "string", "SparkSQL"},
		{"", "trim(BOTH 'SL' FROM 'SSparkSQLS')", "string", "parkSQ"},
		{"", "trim(LEADING 'SL' FROM 'SSparkSQLS')", "string", "parkSQLS"},
		{"", "trim(TRAILING 'SL' FROM 'SSparkSQLS')", "string", "SSparkSQ"},
		{"", "ltrim('    SparkSQL   ')", "string", "SparkSQL   "},
		{"", "rtrim('    SparkSQL   ')", "string", "    SparkSQL"},
		{"", "length('Spark SQL ')", "int", "10"},
		{"", "char_length('Spark SQL ')", "int", "10"},
		{"", "substring('Spark SQL', 5)", "string", "k SQL"},
		{"", "substring('Spark SQL', -3)", "string", "SQL"},
		{"", "substring('Spark SQL', 5, 1)", "string", "k"},
		{"", "substring('Spark SQL' FROM 5)", "string", "k SQL"},
		{"", "substring('Spark SQL' FROM -3)", "string", "SQL"},
		{"", "substring('Spark SQL' FROM 5 FOR 1)", "string", "k"},
		{"", "substr('Spark SQL', 5, 1)", "string", "k"},
		{"", "concat('Spark', 'SQL')", "string", "SparkSQL"},
		{"", "'Spark' || 'SQL'", "string", "SparkSQL"},
		{"", "concat('Spark', NULL)", "string", "NULL"},
		{"", "concat_ws(' ', 'Spark', 'SQL')", "string", "Spark SQL"},
		{"", "concat_ws('s')", "string", ""},
		{"", "concat_ws('/', 'foo', null, 'bar')", "string", "foo/bar"},
		{"", "concat_ws(null, 'Spark', 'SQL')", "string", "NULL"},
		{"", `regexp_extract('100-200', '(\\d+)-(\\d+)', 1)`, "string", "100"},
		{"", `regexp_extract('100-200', '(\\d+)-(\\d+)', 2)`, "string", "200"},
		{"", `regexp_extract('100-200', '(\\d+)-(\\d+)', 0)`, "string", "100-200"},
		{"", `regexp_extract('foo', '(\\d+)', 1)`, "string", ""}, // no match: empty string (RegExpExtract's doc)
		// split('oneAtwoBthreeC', '[ABC]') is ["one","two","three",""]
		{"", "split('oneAtwoBthreeC', '[ABC]')[0]", "string", "one"},
		{"", "split('oneAtwoBthreeC', '[ABC]')[2]", "string", "three"},
		{"", "split('oneAtwoBthreeC', '[ABC]')[3]", "string", ""},
		{"", "split('oneAtwoBthreeC', '[ABC]')[4]", "string", "NULL"}, // out of range: null (non-ANSI element access)
		// split('oneAtwoBthreeC', '[ABC]', 2) is ["one","twoBthreeC"]
		{"", "split('oneAtwoBthreeC', '[ABC]', 2)[1]", "string", "twoBthreeC"},
		{"", "split('a,b,,c', ',')[2]", "string", ""},
		{"", "split('a,b,,c', ',')[3]", "string", "c"},
		{"", "split('a,b,,c', ',', 2)[1]", "string", "b,,c"},
		{"", "'Spark' LIKE '_park'", "boolean", "true"},
		{"", `'%SystemDrive%\\Users\\John' LIKE '\%SystemDrive\%\\\\Users%'`, "boolean", "true"},
		{"", "'Spark' NOT LIKE 'S%x'", "boolean", "true"},
		{"", "NULL LIKE 'a'", "boolean", "NULL"},
	})
}

func TestDatetimeFunctionsAsSparkDocuments(t *testing.T) {
	runExprCases(t, "api/sql/index.html#date_trunc..#from_unixtime", []exprCase{
		{"", "date_trunc('YEAR', '2015-03-05T09:32:05.359')", "timestamp", "2015-01-01 00:00:00"},
		{"", "date_trunc('MM', '2015-03-05T09:32:05.359')", "timestamp", "2015-03-01 00:00:00"},
		{"", "date_trunc('DD', '2015-03-05T09:32:05.359')", "timestamp", "2015-03-05 00:00:00"},
		{"", "date_trunc('HOUR', '2015-03-05T09:32:05.359')", "timestamp", "2015-03-05 09:00:00"},
		{"", "date_trunc('MILLISECOND', '2015-03-05T09:32:05.123456')", "timestamp", "2015-03-05 09:32:05.123"},
		{"", "date_trunc('WEEK', '2015-03-05T09:32:05.359')", "timestamp", "2015-03-02 00:00:00"}, // the Monday
		{"", "date_trunc('QUARTER', '2015-05-05T09:32:05.359')", "timestamp", "2015-04-01 00:00:00"},
		{"", "date_trunc('fortnight', '2015-03-05T09:32:05.359')", "timestamp", "NULL"},
		{"", "to_date('2009-07-30 04:17:52')", "date", "2009-07-30"},
		{"", "to_date('2016-12-31', 'yyyy-MM-dd')", "date", "2016-12-31"},
		{"", "to_date('2016-12-31x', 'yyyy-MM-dd')", "date", "NULL"},
		{"", "date_format('2016-04-08', 'y')", "string", "2016"},
		{"", "date_format(TIMESTAMP '2026-03-02 09:01:05.25', 'yyyy-MM-dd HH:mm:ss.SSS EEE MMM a')", "string", "2026-03-02 09:01:05.250 Mon Mar AM"},
		{"Europe/Paris", "date_format(TIMESTAMP '2026-03-02T09:01:00Z', 'yyyy-MM-dd HH:mm XXX')", "string", "2026-03-02 10:01 +01:00"},
		{"", "hour('2009-07-30 12:58:59')", "int", "12"},
		{"", "minute('2009-07-30 12:58:59')", "int", "58"},
		{"", "second('2009-07-30 12:58:59')", "int", "59"},
		{"", "year('2016-07-30')", "int", "2016"},
		{"", "month('2016-07-30')", "int", "7"},
		{"", "day('2009-07-30')", "int", "30"},
		{"", "extract(HOUR FROM TIMESTAMP '2019-08-12 01:00:00.123456')", "int", "1"},
		// The reference's examples ran in a UTC+9 session zone:
		// unix_timestamp('2016-04-08', 'yyyy-MM-dd') is 1460041200.
		{"Asia/Seoul", "unix_timestamp('2016-04-08', 'yyyy-MM-dd')", "bigint", "1460041200"},
		{"", "unix_timestamp('2016-04-08', 'yyyy-MM-dd')", "bigint", "1460073600"},
		{"", "unix_timestamp(TIMESTAMP '1970-01-01 00:00:01.9')", "bigint", "1"},
		{"", "unix_timestamp('2016-04-08 nope', 'yyyy-MM-dd')", "bigint", "NULL"},
		// from_unixtime(0, 'yyyy-MM-dd HH:mm:ss') is 1969-12-31 16:00:00 in
		// the reference's America/Los_Angeles.
		{"America/Los_Angeles", "from_unixtime(0, 'yyyy-MM-dd HH:mm:ss')", "string", "1969-12-31 16:00:00"},
		{"America/Los_Angeles", "from_unixtime(0)", "string", "1969-12-31 16:00:00"},
		{"", "from_unixtime(0)", "string", "1970-01-01 00:00:00"},
		{"", "TIMESTAMP '2026-03-02 09:00:00' + INTERVAL 90 MINUTES", "timestamp", "2026-03-02 10:30:00"},
		{"", "TIMESTAMP '2026-03-02 09:00:00' - INTERVAL '1' HOUR", "timestamp", "2026-03-02 08:00:00"},
		{"", "DATE '2026-03-02' + 1", "date", "2026-03-03"},
	})
}

func TestMathFunctionsAsSparkDocuments(t *testing.T) {
	runExprCases(t, "api/sql/index.html#abs..#hash", []exprCase{
		{"", "abs(-1)", "int", "1"},
		{"", "abs(-2147483648)", "int", "-2147483648"}, // non-ANSI: wraps
		{"", "round(2.5, 0)", "decimal(2,0)", "3"},
		{"", "round(25, -1)", "int", "30"},
		{"", "round(2.675D, 2)", "double", "2.68"}, // BigDecimal(Double.toString) then HALF_UP
		{"", "round(-2.5D)", "double", "-3.0"},
		{"", "floor(-0.1)", "decimal(1,0)", "-1"},
		{"", "floor(5)", "bigint", "5"},
		{"", "floor(-0.1D)", "bigint", "-1"},
		{"", "ceil(-0.1)", "decimal(1,0)", "0"},
		{"", "ceil(5)", "bigint", "5"},
		{"", "ceiling(3.2D)", "bigint", "4"},
		{"", "greatest(10, 9, 2, 4, 3)", "int", "10"},
		{"", "least(10, 9, 2, 4, 3)", "int", "2"},
		{"", "greatest(NULL, 1)", "int", "1"},
		// hash('Spark', array(123), 2) is -1321691492; an array hashes its
		// elements in turn, so array(123) hashes as 123.
		{"", "hash('Spark', 123, 2)", "int", "-1321691492"},
		{"", "coalesce(NULL, 1, NULL)", "int", "1"},
		{"", "nvl(NULL, 2)", "int", "2"},
		{"", "if(1 < 2, 'a', 'b')", "string", "a"},
		{"", "nullif(2, 2)", "int", "NULL"},
		{"", "isnull(1)", "boolean", "false"},
		{"", "isnotnull(1)", "boolean", "true"},
	})
}

// Operators: api/sql/index.html#_1 (the operator entries: +, -, *, /, %,
// div, =, <=>, <, IN, BETWEEN, CASE), and Spark's non-ANSI arithmetic
// (docs/3.5.1/sql-ref-ansi-compliance.html: overflow wraps, division by
// zero and failed casts are null).
func TestOperatorsAsSparkDocuments(t *testing.T) {
	runExprCases(t, "api/sql/index.html operators; sql-ref-ansi-compliance.html", []exprCase{
		{"", "1 + 2", "int", "3"},
		{"", "2 - 1", "int", "1"},
		{"", "2 * 3", "int", "6"},
		{"", "3 / 2", "double", "1.5"},
		{"", "2L / 2L", "double", "1.0"},
		{"", "3 div 2", "bigint", "1"},
		{"", "2 % 1.8", "decimal(2,1)", "0.2"},
		{"", "-7 % 3", "int", "-1"},
		{"", "1 / 0", "double", "NULL"},
		{"", "1 div 0", "bigint", "NULL"},
		{"", "1.0 / 0", "decimal(7,6)", "NULL"},
		{"", "1 / 3.0", "decimal(8,6)", "0.333333"},
		{"", "0.1 + 0.2", "decimal(2,1)", "0.3"},
		{"", "1.5 * 2", "decimal(4,1)", "3.0"},
		{"", "2147483647 + 1", "int", "-2147483648"},
		{"", "9223372036854775807L + 1", "bigint", "-9223372036854775808"},
		{"", "'1' + 1", "double", "2.0"},
		{"", "2 = 2", "boolean", "true"},
		{"", "1 = '1'", "boolean", "true"},
		{"", "true = NULL", "boolean", "NULL"},
		{"", "NULL = NULL", "boolean", "NULL"},
		{"", "2 <=> 2", "boolean", "true"},
		{"", "1 <=> '1'", "boolean", "true"},
		{"", "true <=> NULL", "boolean", "false"},
		{"", "NULL <=> NULL", "boolean", "true"},
		{"", "1 < 2", "boolean", "true"},
		{"", "1.1 < '1'", "boolean", "false"},
		{"", "to_date('2009-07-30 04:17:52') < to_date('2009-07-30 04:17:52')", "boolean", "false"},
		{"", "'abc' < 'abd'", "boolean", "true"},
		{"", "1 in(1, 2, 3)", "boolean", "true"},
		{"", "1 in(2, 3, 4)", "boolean", "false"},
		{"", "1 in(2, NULL)", "boolean", "NULL"},
		{"", "1 NOT IN (2, 3)", "boolean", "true"},
		{"", "0.5 BETWEEN 0.1 AND 1.0", "boolean", "true"},
		{"", "CASE WHEN 1 > 0 THEN 1 WHEN 2 > 0 THEN 2.0 ELSE 1.2 END", "decimal(11,1)", "1.0"},
		{"", "CASE WHEN 1 < 0 THEN 1 WHEN 2 > 0 THEN 2.0 ELSE 1.2 END", "decimal(11,1)", "2.0"},
		{"", "CASE WHEN 1 < 0 THEN 1 WHEN 2 < 0 THEN 2.0 END", "decimal(11,1)", "NULL"},
		{"", "CASE 2 WHEN 1 THEN 'a' WHEN 2 THEN 'b' END", "string", "b"},
		{"", "NOT NULL", "boolean", "NULL"},
		{"", "NULL AND false", "boolean", "false"},
		{"", "NULL OR true", "boolean", "true"},
		{"", "NULL AND true", "boolean", "NULL"},
		{"", "NULL IS NULL", "boolean", "true"},
		{"", "1 IS NOT NULL", "boolean", "true"},
		{"", "-(5)", "int", "-5"},
	})
}

// Casts: docs/3.5.1/sql-ref-ansi-compliance.html#cast (the non-ANSI column)
// and api/sql/index.html#cast.
func TestCastsAsSparkDocuments(t *testing.T) {
	runExprCases(t, "sql-ref-ansi-compliance.html#cast; api/sql/index.html#cast", []exprCase{
		{"", "cast('10' as int)", "int", "10"},
		{"", "cast('abc' as int)", "int", "NULL"},
		{"", "cast(' 12 ' as bigint)", "bigint", "12"},
		{"", "cast('1.9' as int)", "int", "1"},
		{"", "cast('3000000000' as int)", "int", "NULL"},
		{"", "cast(3000000000L as int)", "int", "-1294967296"},
		{"", "cast(3.9D as int)", "int", "3"},
		{"", "cast(-3.9D as bigint)", "bigint", "-3"},
		{"", "cast(1e20D as bigint)", "bigint", "9223372036854775807"},
		{"", "cast('1e3' as double)", "double", "1000.0"},
		{"", "cast('Infinity' as double)", "double", "Infinity"},
		{"", "cast('x' as double)", "double", "NULL"},
		{"", "cast(12345.678 as decimal(5,2))", "decimal(5,2)", "NULL"},
		{"", "cast(123.456 as decimal(5,2))", "decimal(5,2)", "123.46"},
		{"", "cast('12.345' as decimal(10,2))", "decimal(10,2)", "12.35"},
		{"", "cast(1.5D as decimal(3,0))", "decimal(3,0)", "2"},
		{"", "cast('yes' as boolean)", "boolean", "true"},
		{"", "cast('0' as boolean)", "boolean", "false"},
		{"", "cast('maybe' as boolean)", "boolean", "NULL"},
		{"", "cast(0 as boolean)", "boolean", "false"},
		{"", "cast(1.0E7D as string)", "string", "1.0E7"},
		{"", "cast(0.001D as string)", "string", "0.001"},
		{"", "cast(true as int)", "int", "1"},
		{"", "cast('2026-03-02 09:01:00' as timestamp)", "timestamp", "2026-03-02 09:01:00"},
		{"Europe/Paris", "unix_timestamp(cast('2026-03-02 09:01:00' as timestamp))", "bigint", "1772438460"},
		{"", "unix_timestamp(cast('2026-03-02 09:01:00' as timestamp))", "bigint", "1772442060"},
		{"Europe/Paris", "cast(TIMESTAMP '2026-03-02T09:01:00Z' as string)", "string", "2026-03-02 10:01:00"},
		{"", "cast('2026-13-02' as timestamp)", "timestamp", "NULL"},
		{"", "cast('09:01:00' as timestamp)", "timestamp", "NULL"}, // spark-differences.md#time-without-date
		{"", "cast(1 as timestamp)", "timestamp", "1970-01-01 00:00:01"},
		{"", "cast(1.5D as timestamp)", "timestamp", "1970-01-01 00:00:01.5"},
		{"", "cast(TIMESTAMP '1970-01-01 00:00:01.5' as bigint)", "bigint", "1"},
		{"", "cast(TIMESTAMP '1969-12-31 23:59:59.5' as bigint)", "bigint", "-1"},
		{"", "cast(TIMESTAMP '1970-01-01 00:00:01.5' as double)", "double", "1.5"},
		{"", "cast('2026-3-2' as date)", "date", "2026-03-02"},
		{"", "cast('2026-03-02T23:00:00' as date)", "date", "2026-03-02"},
		{"America/Los_Angeles", "cast(TIMESTAMP '2026-03-02T03:00:00Z' as date)", "date", "2026-03-01"},
		{"", "cast(DATE '2026-03-02' as timestamp)", "timestamp", "2026-03-02 00:00:00"},
	})
}

// A row whose evaluation fails as Spark's would even in non-ANSI mode is
// an *expr.EvalError (row.ErrMalformed): here a datetime string the new
// parser refuses and the legacy one reads (SparkUpgradeException).
func TestEvaluationFailureIsAMalformedRowError(t *testing.T) {
	_, _, err := evalSQL(t, "", "unix_timestamp('2016-4-8', 'yyyy-MM-dd')")
	if err == nil || !expr.IsEvalError(err) {
		t.Fatalf("want an evaluation error, got %v", err)
	}
}
