package sql

import (
	"reflect"
	"strings"
	"testing"
)

var roundTrip = []string{
	"SELECT window.start AS window_start, window.end AS window_end, course_id, count(*) AS event_count FROM events GROUP BY window(event_time, '5 minutes'), course_id",
	"SELECT a, `weird name`, b AS `x y` FROM events AS e JOIN lessons l USING (lesson_id) WHERE a > 1 AND NOT b IS NULL OR c IN (1, 2.5, 'x') HAVING count(DISTINCT a) > 1",
	"SELECT CASE WHEN a BETWEEN 1 AND 2 THEN 'a\\'b' ELSE NULL END, CAST(a AS DECIMAL(10, 2)), -a, a div 2 % 3, a || b, split(s, ',')[0] FROM events",
	"SELECT * FROM drop_duplicates_within_watermark(TABLE(events), event_id) WHERE event_time > TIMESTAMP '2026-01-01 00:00:00' + INTERVAL 5 MINUTES",
	"SELECT x FROM events WHERE s LIKE 'a\\%%' ESCAPE '!' AND t NOT LIKE '_b' AND u <=> NULL ORDER BY x LIMIT 3",
	"SELECT session_window.start, max(score) FROM events GROUP BY session_window(event_time, INTERVAL '10' MINUTE), `from`",
}

// stripPos zeroes positions so that trees compare by content.
func stripPos(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			stripPos(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[Pos]() {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			stripPos(v.Field(i))
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			stripPos(v.Index(i))
		}
	}
}

func TestPrintThenParseGivesTheSameTree(t *testing.T) {
	for _, src := range roundTrip {
		q, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		printed := q.String()
		q2, err := Parse(printed)
		if err != nil {
			t.Fatalf("reparse %s: %v", printed, err)
		}
		stripPos(reflect.ValueOf(q))
		stripPos(reflect.ValueOf(q2))
		if !reflect.DeepEqual(q, q2) {
			t.Errorf("round trip changed the tree:\n%s\n%s", src, printed)
		}
	}
}

func TestLiteralsAndCommentsAsSparkReadsThem(t *testing.T) {
	q, err := Parse("/* a /* nested */ comment */ SELECT 'it\\'s' 'ok', \"dq\\n\", r'\\d+', `a``b`, 5L, 1.50, 1e3, 2BD -- trailing\nFROM events;")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"'it\\'sok'", "'dq\\n'", "'\\\\d+'", "`a``b`", "5L", "1.50", "1e3", "2BD"}
	for i, w := range want {
		if got := SQL(q.Items[i].Expr); got != w {
			t.Errorf("item %d: %s, want %s", i, got, w)
		}
	}
	for _, tc := range []struct {
		src    string
		micros int64
	}{
		{"INTERVAL 5 MINUTES", 5 * 60e6},
		{"INTERVAL '5' MINUTE", 5 * 60e6},
		{"INTERVAL 1 HOUR 30 MINUTES", 90 * 60e6},
		{"INTERVAL '1 hour 30 minutes'", 90 * 60e6},
		{"INTERVAL '1.5' SECONDS", 1.5e6},
		{"INTERVAL -2 DAYS", -2 * 86400e6},
	} {
		q, err := Parse("SELECT " + tc.src + " FROM events")
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if l := q.Items[0].Expr.(*Literal); l.Micros != tc.micros {
			t.Errorf("%s: %d µs, want %d", tc.src, l.Micros, tc.micros)
		}
	}
}

func TestSyntaxErrorsPointAtLineAndColumn(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"SELECT a\nFROM events\nWHERE a = = 1", "line 3:11: '=': syntax error: expected an expression"},
		{"SELECT a FROM events WHERE (a", "line 1:30: end of input: syntax error: expected ')'"},
		{"SELECT a b c FROM events", "line 1:12: 'c': syntax error: expected ',' or FROM"},
		{"SELECT 1abc FROM events", "line 1:8: '1abc': is neither a number nor an identifier"},
	} {
		_, err := Parse(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %s", tc.src, err, tc.want)
		}
	}
}

// FuzzParse: the parser never panics, and what it accepts prints to SQL
// it accepts again as the same tree.
func FuzzParse(f *testing.F) {
	for _, s := range roundTrip {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		q, err := Parse(src)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		printed := q.String()
		q2, err := Parse(printed)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", src, printed, err)
		}
		stripPos(reflect.ValueOf(q))
		stripPos(reflect.ValueOf(q2))
		if !reflect.DeepEqual(q, q2) {
			t.Fatalf("%q printed as %q, which parses differently", src, printed)
		}
	})
}
