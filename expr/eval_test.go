package expr

import (
	"testing"

	"github.com/sluicehq/sluice/row"
)

func tileFilter(t testing.TB) (*Filter, row.Row) {
	course := Column(0, "course_id", StringType)
	dur := Column(1, "duration_ms", LongType)
	eq, err := Binary(OpEq, course, Literal(row.StringValue("c-7"), StringType))
	if err != nil {
		t.Fatal(err)
	}
	gt, err := Binary(OpGt, dur, Literal(row.Value{Kind: row.Int, I: 5}, IntType))
	if err != nil {
		t.Fatal(err)
	}
	in, err := In(course, []*Expr{Literal(row.StringValue("c-7"), StringType), Literal(row.StringValue("c-9"), StringType)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := CompileFilter([]*Expr{eq, gt, in}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	return f, row.Row{row.StringValue("c-7"), row.LongValue(42)}
}

// The comparisons of a map-side filter allocate nothing per row.
func TestFilterOnColumnsAndLiteralsDoesNotAllocate(t *testing.T) {
	f, r := tileFilter(t)
	allocs := testing.AllocsPerRun(1000, func() {
		if ok, err := f.Keep(r); !ok || err != nil {
			t.Fatal("row should pass")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per row, want 0", allocs)
	}
	// A null makes the row fail the filter, as WHERE does.
	if ok, _ := f.Keep(row.Row{{}, row.LongValue(42)}); ok {
		t.Error("a null course_id passed course_id = 'c-7'")
	}
}

func BenchmarkFilter(b *testing.B) {
	f, r := tileFilter(b)
	b.ReportAllocs()
	for b.Loop() {
		f.Keep(r)
	}
}

// Spark's Murmur3 x86_32 (seed 42) values: hash('Spark', array(123), 2)
// is -1321691492 in Spark 3.5's SQL function reference
// (api/sql/index.html#hash); Murmur3_x86_32Suite's hashInt and hashLong
// vectors follow the same algorithm.
func TestHashIsSparks(t *testing.T) {
	h := hashValue(row.StringValue("Spark"), StringType, hashSeed)
	h = hashValue(row.Value{Kind: row.Int, I: 123}, IntType, h)
	h = hashValue(row.Value{Kind: row.Int, I: 2}, IntType, h)
	if int32(h) != -1321691492 {
		t.Errorf("hash('Spark', 123, 2) = %d, want -1321691492", int32(h))
	}
	// A null leaves the seed; -0.0 hashes as 0.0.
	if hashValue(row.Value{}, IntType, 7) != 7 {
		t.Error("null changed the hash")
	}
	if hashValue(row.DoubleValue(-0.0), DoubleType, 42) != hashValue(row.DoubleValue(0), DoubleType, 42) {
		t.Error("-0.0 and 0.0 hash differently")
	}
}

func TestLikePatterns(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"a%", "abc", true}, {"%c", "abc", true}, {"%b%", "abc", true}, {"a_c", "abc", true},
		{"a_c", "aééc", false}, {"a__c", "aééc", true}, {"%a%b%", "xxaxxbxx", true}, {"%a%b", "xxaxxbxx", false},
		{`a\%`, "a%", true}, {`a\%`, "ab", false}, {"", "", true}, {"%", "", true}, {"_", "", false},
	} {
		m, err := compileLike(tc.pat, '\\')
		if err != nil {
			t.Fatal(err)
		}
		if got := m.match(tc.s); got != tc.want {
			t.Errorf("%q LIKE %q = %v, want %v", tc.s, tc.pat, got, tc.want)
		}
	}
	if _, err := compileLike(`a\b`, '\\'); err == nil {
		t.Error(`the escape before b was taken`)
	}
}
