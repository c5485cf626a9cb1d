package row

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Conversion cases per column type, each with the result Spark 3.5's
// JacksonParser gives with the default JSON options (the Spark rule is
// quoted with each group). Timestamps are computed with time.Date in the
// zone the case names, independently of the decoder.
func TestConversionIsSparks(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) Value {
		return TimestampValue(us(y, mo, d, h, mi, s, ns, time.UTC))
	}
	in := func(loc *time.Location, y int, mo time.Month, d, h, mi, s int) Value {
		return TimestampValue(us(y, mo, d, h, mi, s, 0, loc))
	}
	cases := []struct {
		kind Kind
		json string
		want Value
	}{
		// StringType: VALUE_STRING is its text; any other token is copied
		// through a Jackson generator (copyCurrentStructure): integers as
		// their value, floats as Double.toString, NaN/Infinity as strings
		// (WRITE_NAN_AS_STRINGS), structures compactly.
		{String, `"abc"`, StringValue("abc")},
		{String, `12345`, StringValue("12345")},
		{String, `-0`, StringValue("0")},
		{String, `123456789012345678901234567890`, StringValue("123456789012345678901234567890")},
		{String, `1.50`, StringValue("1.5")},
		{String, `100.0`, StringValue("100.0")},
		{String, `0.001`, StringValue("0.001")},
		{String, `0.0001`, StringValue("1.0E-4")},
		{String, `1234567.5`, StringValue("1234567.5")},
		{String, `1e7`, StringValue("1.0E7")},
		{String, `12345678.9`, StringValue("1.23456789E7")},
		{String, `-2.5e-10`, StringValue("-2.5E-10")},
		{String, `0.0`, StringValue("0.0")},
		{String, `-0.0`, StringValue("-0.0")},
		{String, `1e400`, StringValue(`"Infinity"`)},
		{String, `true`, StringValue("true")},
		{String, `false`, StringValue("false")},
		{String, `NaN`, StringValue(`"NaN"`)},
		{String, `-INF`, StringValue(`"-Infinity"`)},
		{String, `{"a": 1, "b": [true, null, "x\ty\"", 2.50]}`, StringValue(`{"a":1,"b":[true,null,"x\ty\"",2.5]}`)},
		{String, `{"k":"\u00e9\u0001/"}`, StringValue("{\"k\":\"\u00e9\\u0001/\"}")},
		{String, `[ ]`, StringValue(`[]`)},

		// LongType: VALUE_NUMBER_INT, getLongValue.
		{Long, `42`, LongValue(42)},
		{Long, `-0`, LongValue(0)},
		{Long, `-9223372036854775808`, LongValue(math.MinInt64)},

		// DoubleType: VALUE_NUMBER_INT or _FLOAT, getDoubleValue; the
		// non-numeric tokens; the strings NaN, +INF, +Infinity, Infinity,
		// -INF, -Infinity.
		{Double, `1`, DoubleValue(1)},
		{Double, `1e400`, DoubleValue(math.Inf(1))},
		{Double, `NaN`, DoubleValue(math.NaN())},
		{Double, `+INF`, DoubleValue(math.Inf(1))},
		{Double, `-INF`, DoubleValue(math.Inf(-1))},
		{Double, `"NaN"`, DoubleValue(math.NaN())},
		{Double, `"Infinity"`, DoubleValue(math.Inf(1))},
		{Double, `"+Infinity"`, DoubleValue(math.Inf(1))},
		{Double, `"+INF"`, DoubleValue(math.Inf(1))},
		{Double, `"-Infinity"`, DoubleValue(math.Inf(-1))},
		{Double, `"-INF"`, DoubleValue(math.Inf(-1))},

		// BooleanType: VALUE_TRUE, VALUE_FALSE.
		{Bool, `true`, BoolValue(true)},

		// TimestampType: VALUE_NUMBER_INT is getLongValue * 1000000 (epoch
		// seconds); VALUE_STRING is DateTimeUtils.stringToTimestamp in the
		// session zone (UTC here), then again without "GMT".
		{Timestamp, `1772442060`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `-1`, utc(1969, 12, 31, 23, 59, 59, 0)},
		{Timestamp, `"2026-03-02T09:01:00Z"`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"2026-03-02 09:01:00"`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09:01"`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09"`, utc(2026, 3, 2, 9, 0, 0, 0)},
		{Timestamp, `"2026-03-02"`, utc(2026, 3, 2, 0, 0, 0, 0)},
		{Timestamp, `"2026-03"`, utc(2026, 3, 1, 0, 0, 0, 0)},
		{Timestamp, `"2026"`, utc(2026, 1, 1, 0, 0, 0, 0)},
		{Timestamp, `"2026-3-2T9:1:0Z"`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"  2026-03-02T09:01:00Z\n"`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09:01:00."`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09:01:00.123456789Z"`, utc(2026, 3, 2, 9, 1, 0, 123_456_000)},
		{Timestamp, `"2026-03-02T09:01:00.5+01:00"`, utc(2026, 3, 2, 8, 1, 0, 500_000_000)},
		{Timestamp, `"2026-03-02T09:01:00+01"`, utc(2026, 3, 2, 8, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09:01:00+1:00"`, utc(2026, 3, 2, 8, 1, 0, 0)},   // padded to +01:00
		{Timestamp, `"2026-03-02T09:01:00+01:3"`, utc(2026, 3, 2, 7, 58, 0, 0)},  // padded to +01:03
		{Timestamp, `"2026-03-02T09:01:00-0130"`, utc(2026, 3, 2, 10, 31, 0, 0)}, // +hhmm
		{Timestamp, `"2026-03-02T09:01:00+01:00:30"`, utc(2026, 3, 2, 8, 0, 30, 0)},
		{Timestamp, `"2026-03-02T09:01:00 UTC"`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09:01:00UTC+1"`, utc(2026, 3, 2, 8, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09:01:00GMT-05:00"`, utc(2026, 3, 2, 14, 1, 0, 0)},
		{Timestamp, `"2026-03-02T09:01:00EST"`, utc(2026, 3, 2, 14, 1, 0, 0)}, // SHORT_IDS: -05:00
		{Timestamp, `"2026-03-02T09:01:00PST"`, in(la, 2026, 3, 2, 9, 1, 0)},  // SHORT_IDS: America/Los_Angeles
		{Timestamp, `"2026-03-02 09:01:00 Europe/Paris"`, in(paris, 2026, 3, 2, 9, 1, 0)},
		{Timestamp, `"2026-07-01T12:00:00Europe/Paris"`, in(paris, 2026, 7, 1, 12, 0, 0)},
		// java.time: a time in the spring gap moves forward by the gap;
		// one in the autumn overlap takes the earlier offset (+02:00).
		{Timestamp, `"2026-03-29T02:30:00 Europe/Paris"`, utc(2026, 3, 29, 1, 30, 0, 0)},
		{Timestamp, `"2026-10-25T02:30:00 Europe/Paris"`, utc(2026, 10, 25, 0, 30, 0, 0)},
		{Timestamp, `"+002026-03-02T09:01:00Z"`, utc(2026, 3, 2, 9, 1, 0, 0)},
		{Timestamp, `"12026-01-01T00:00:00Z"`, utc(12026, 1, 1, 0, 0, 0, 0)},
		// The fallback: "2026-03-02GMT" fails, "2026-03-02" does not.
		{Timestamp, `"2026-03-02GMT"`, utc(2026, 3, 2, 0, 0, 0, 0)},
	}
	for _, c := range cases {
		t.Run(c.kind.String()+"/"+c.json, func(t *testing.T) {
			d := NewDecoder([]Field{{Name: "x", Kind: c.kind}})
			got, err := decodeBoth(t, d, []byte(`{"x":`+c.json+`}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			assertRow(t, got, Row{c.want})
			if c.kind == Timestamp && got[0].I != c.want.I {
				t.Errorf("got %s, want %s", FormatTimestamp(got[0].I), FormatTimestamp(c.want.I))
			}
		})
	}
}

// Values Spark's parser fails on (a corrupt record, or a null field in
// PERMISSIVE mode): Sluice sets the record aside with the reason. The
// cases where Sluice is stricter than Spark name their entry of
// docs/spark-differences.md.
func TestConversionRefusalsAreSparksOrSaySo(t *testing.T) {
	cases := []struct {
		kind   Kind
		json   string
		reason string
	}{
		{Long, `1.0`, "want an integer"},
		{Long, `"42"`, "want an integer, got a JSON string"},
		{Long, `9223372036854775808`, "Spark's parser fails on it too"},
		{Long, `NaN`, "want an integer"},
		{Double, `nan`, "Spark's JSON parser reads only"},
		{Double, `"INF"`, `got the string "INF"`},
		{Double, `"nan"`, `got the string "nan"`},
		{Bool, `"true"`, "want true or false"},
		{Timestamp, `1.5`, "Spark takes no fractional number"},
		{Timestamp, `1e9`, "Spark takes no fractional number"},
		{Timestamp, `NaN`, "Spark takes no fractional number"},
		{Timestamp, `9223372036855`, "spark-differences.md#epoch-seconds-overflow"},
		{Timestamp, `"09:01:00"`, "spark-differences.md#time-without-date"},
		{Timestamp, `"T09:01:00"`, "spark-differences.md#time-without-date"},
		{Timestamp, `"2026-03-02T09:01Z"`, "as Spark casts a string"}, // a zone needs the seconds
		{Timestamp, `"2026-03-02t09:01:00Z"`, "as Spark casts a string"},
		{Timestamp, `"2026-03-02T09:01:00z"`, "as Spark casts a string"},
		{Timestamp, `"2026-03-02T09:01:00+19:00"`, "as Spark casts a string"},
		{Timestamp, `"2026-03-02T09:01:00 Mars/Olympus"`, "as Spark casts a string"},
		{Timestamp, `"2026-03-02T09:01:00 Local"`, "as Spark casts a string"},
		{Timestamp, `"2026-03-02T09:01:00 utc"`, "as Spark casts a string"},
		{Timestamp, `"999-01-01"`, "as Spark casts a string"},
		{Timestamp, `"1000000-01-01"`, "as Spark casts a string"},
		{Timestamp, `"294248-01-01T00:00:00Z"`, "as Spark casts a string"}, // microseconds overflow a long
		{Timestamp, `"2026-02-30"`, "as Spark casts a string"},
		{Timestamp, `"   "`, "as Spark casts a string"},
	}
	for _, c := range cases {
		t.Run(c.kind.String()+"/"+c.json, func(t *testing.T) {
			d := NewDecoder([]Field{{Name: "x", Kind: c.kind}})
			_, err := decodeBoth(t, d, []byte(`{"x":`+c.json+`}`), nil)
			var me *MalformedError
			if !errors.As(err, &me) || !strings.Contains(me.Reason, c.reason) {
				t.Fatalf("Decode = %v, want a malformed record with a reason containing %q", err, c.reason)
			}
		})
	}
}

// A string without a zone is in the session time zone
// (spark.sql.session.timeZone); one with a zone and epoch seconds are not
// affected.
func TestSessionTimeZoneAppliesToStringsWithoutZone(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"America/Los_Angeles", "PST"} {
		z, err := LoadZone(id)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder([]Field{{Name: "a", Kind: Timestamp}, {Name: "b", Kind: Timestamp}, {Name: "c", Kind: Timestamp}})
		d.SetSessionTimeZone(z)
		got, err := decodeBoth(t, d, []byte(`{"a":"2026-03-02 09:01:00","b":"2026-03-02T09:01:00Z","c":1772442060}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		assertRow(t, got, Row{
			TimestampValue(us(2026, 3, 2, 9, 1, 0, 0, la)),
			TimestampValue(us(2026, 3, 2, 9, 1, 0, 0, time.UTC)),
			TimestampValue(us(2026, 3, 2, 9, 1, 0, 0, time.UTC)),
		})
	}
	fixed, err := LoadZone("+05:30")
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder([]Field{{Name: "a", Kind: Timestamp}})
	d.SetSessionTimeZone(fixed)
	got, err := decodeBoth(t, d, []byte(`{"a":"2026-03-02"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	assertRow(t, got, Row{TimestampValue(us(2026, 3, 2, 0, 0, 0, 0, time.FixedZone("", 5*3600+30*60)))})
}

func TestLoadZoneTakesWhatSparkSessionTimeZoneTakes(t *testing.T) {
	for _, id := range []string{"UTC", "Z", "+01:00", "-5", "+0530", "GMT+1", "UT-02:00", "America/Los_Angeles", "Europe/Paris", "PST", "EST", "Etc/GMT+5"} {
		if _, err := LoadZone(id); err != nil {
			t.Errorf("LoadZone(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "utc", "Local", "Mars/Olympus", "+25:00", "+18:01", "GMT+x", "1:00", "../etc/passwd"} {
		if z, err := LoadZone(id); !errors.Is(err, ErrZone) {
			t.Errorf("LoadZone(%q) = %v, %v; want ErrZone", id, z, err)
		}
	}
}

func TestJavaDoubleToString(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0.5: "0.5", 100: "100.0", 1e6: "1000000.0", 9999999: "9999999.0", 1e7: "1.0E7",
		0.001: "0.001", 0.00099: "9.9E-4", 1.5e300: "1.5E300", 123.456: "123.456",
		-1.25: "-1.25", math.MaxFloat64: "1.7976931348623157E308",
	} {
		if got := string(appendJavaDouble(nil, f)); got != want {
			t.Errorf("appendJavaDouble(%v) = %s, want %s", f, got, want)
		}
	}
}

// The timestamp forms of the hot path allocate nothing: offsets, and a
// region session zone for strings without one.
func TestTimestampStringsWithOffsetsOrSessionZoneDoNotAllocate(t *testing.T) {
	paris, err := LoadZone("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder([]Field{{Name: "a", Kind: Timestamp}, {Name: "b", Kind: Timestamp}, {Name: "c", Kind: Timestamp}})
	d.SetSessionTimeZone(paris)
	data := []byte(`{"a":"2026-03-02T09:01:00.123+05:30","b":"2026-03-02 09:01:00","c":1772442060}`)
	dst := make(Row, 0, 3)
	if _, err := d.Decode(data, dst); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(500, func() {
		var err error
		if dst, err = d.Decode(data, dst); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("Decode allocates %.1f times per record, want 0", allocs)
	}
}

// The fast path gives stringToTimestamp's result whenever it answers.
func TestFastTimestampAgreesWithStringToTimestamp(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	paris, err := LoadZone("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	zones := []string{"", "Z", "+05:30", "-18:00", "+18:30", "+1:00", "z", " UTC", "+0530"}
	answered := 0
	for range 20000 {
		tm := time.Unix(rng.Int64N(1<<35)-1<<34, 0).UTC()
		s := tm.Format("2006-01-02") + string("T "[rng.IntN(2)]) + tm.Format("15:04:05")
		if n := rng.IntN(11); n > 0 {
			s += "." + fmt.Sprintf("%09d", rng.IntN(1e9))[:min(n, 9)] + strings.Repeat("7", max(0, n-9))
		}
		s += zones[rng.IntN(len(zones))]
		b := []byte(s)
		if rng.IntN(8) == 0 {
			b[rng.IntN(len(b))] = "0x9:-. "[rng.IntN(7)]
		}
		for _, session := range []*Zone{nil, paris} {
			fast, ok := fastTimestamp(b, session)
			if !ok {
				continue
			}
			answered++
			slow, st := stringToTimestamp(b, session, nil)
			if st != tsOK || slow != fast {
				t.Fatalf("%q (session %v): fast %d, stringToTimestamp %d (%v)", b, session, fast, slow, st)
			}
		}
	}
	if answered < 10000 {
		t.Fatalf("the fast path answered only %d times", answered)
	}
}
