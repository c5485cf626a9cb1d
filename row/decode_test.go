package row

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

func tileFields() []Field {
	return []Field{
		{Name: "event_id", Kind: String},
		{Name: "course_id", Kind: String},
		{Name: "lesson_id", Kind: String, Nullable: true},
		{Name: "event_time", Kind: Timestamp},
	}
}

const tileEvent = `{"event_id":"e-000001","course_id":"c-042","lesson_id":"l-7","event_time":"2026-01-01T00:00:01.123Z"}`

// us is the oracle for timestamps: time.Date, independent of the decoder.
func us(year int, month time.Month, day, hour, min, sec, nsec int, loc *time.Location) int64 {
	t := time.Date(year, month, day, hour, min, sec, nsec, loc)
	return t.Unix()*1_000_000 + int64(t.Nanosecond()/1000)
}

func TestDecodeTileEvent(t *testing.T) {
	d := NewDecoder(tileFields())
	got, err := decodeBoth(t, d, []byte(tileEvent), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Row{
		StringValue("e-000001"), StringValue("c-042"), StringValue("l-7"),
		TimestampValue(us(2026, 1, 1, 0, 0, 1, 123_000_000, time.UTC)),
	}
	assertRow(t, got, want)
}

func assertRow(t *testing.T, got, want Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("row has %d values, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		same := g.Kind == w.Kind && g.I == w.I && g.S == w.S &&
			(g.F == w.F || (math.IsNaN(g.F) && math.IsNaN(w.F)))
		if !same {
			t.Errorf("value %d = %#v, want %#v", i, g, w)
		}
	}
}

func TestDecodeEachKind(t *testing.T) {
	cases := []struct {
		kind Kind
		json string
		want Value
	}{
		{String, `"hello"`, StringValue("hello")},
		{String, `""`, StringValue("")},
		{String, `"caf\u00e9 \"q\" \\ \n"`, StringValue("café \"q\" \\ \n")},
		{String, `"日本"`, StringValue("日本")},
		{Long, `0`, LongValue(0)},
		{Long, `-0`, LongValue(0)},
		{Long, `42`, LongValue(42)},
		{Long, `-17`, LongValue(-17)},
		{Long, `9223372036854775807`, LongValue(math.MaxInt64)},
		{Long, `-9223372036854775808`, LongValue(math.MinInt64)},
		{Double, `1.5`, DoubleValue(1.5)},
		{Double, `-2`, DoubleValue(-2)},
		{Double, `1e3`, DoubleValue(1000)},
		{Double, `2.5E-3`, DoubleValue(0.0025)},
		{Double, `0.1`, DoubleValue(0.1)},
		{Double, `1e400`, DoubleValue(math.Inf(1))},
		{Double, `"NaN"`, DoubleValue(math.NaN())},
		{Double, `"Infinity"`, DoubleValue(math.Inf(1))},
		{Double, `"-Infinity"`, DoubleValue(math.Inf(-1))},
		{Bool, `true`, BoolValue(true)},
		{Bool, `false`, BoolValue(false)},
		{Timestamp, `"2026-01-01T00:00:00Z"`, TimestampValue(us(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		{Timestamp, `1767225601`, TimestampValue(us(2026, 1, 1, 0, 0, 1, 0, time.UTC))},
		{Timestamp, `0`, TimestampValue(0)},
		{Timestamp, `-1`, TimestampValue(-1_000_000)},
	}
	for _, c := range cases {
		t.Run(c.kind.String()+"/"+c.json, func(t *testing.T) {
			d := NewDecoder([]Field{{Name: "x", Kind: c.kind}})
			got, err := decodeBoth(t, d, []byte(`{"x":`+c.json+`}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			assertRow(t, got, Row{c.want})
		})
	}
}

func TestDecodeRejectsValuesThatBreakTheFieldType(t *testing.T) {
	cases := []struct {
		kind   Kind
		json   string
		reason string // substring of the reason
	}{
		{String, `[1,nan]`, "a number token Spark's JSON parser does not read"},
		{Long, `1.5`, "want an integer, got 1.5"},
		{Long, `1.0`, "want an integer"},
		{Long, `1e3`, "want an integer"},
		{Long, `"42"`, "want an integer, got a JSON string"},
		{Long, `9223372036854775808`, "want an integer within the long range"},
		{Long, `-9223372036854775809`, "want an integer within the long range"},
		{Long, `99999999999999999999999`, "long range"},
		{Long, `01`, "invalid number"},
		{Long, `true`, "want an integer"},
		{Double, `"1.5"`, `want a number, got the string "1.5"`},
		{Double, `true`, "want a number"},
		{Double, `nan`, "invalid number"},
		{Double, `inf`, "invalid number"},
		{Double, `-Inf`, "invalid number"},
		{Double, `1.`, "invalid number"},
		{Double, `.5`, "invalid number"},
		{Double, `+1`, "invalid number"},
		{Double, `1e`, "invalid number"},
		{Double, `1-2`, "invalid number"},
		{Bool, `"true"`, "want true or false"},
		{Bool, `1`, "want true or false"},
		{Timestamp, `"2026-13-01T00:00:00Z"`, "as Spark casts a string"},
		{Timestamp, `"2026-02-29T00:00:00Z"`, "as Spark casts a string"},
		{Timestamp, `"2026-01-01T24:00:00Z"`, "as Spark casts a string"},
		{Timestamp, `"2026-01-01T00:60:00Z"`, "as Spark casts a string"},
		{Timestamp, `"2026-01-01T00:00:00+24:00"`, "as Spark casts a string"},
		{Timestamp, `"2026-01-01T00:00:00ZZ"`, "as Spark casts a string"},
		{Timestamp, `"yesterday"`, "as Spark casts a string"},
		{Timestamp, `""`, "as Spark casts a string"},
		{Timestamp, `true`, "want a timestamp string or epoch seconds"},
		{Timestamp, `9223372036854775807`, "out of the timestamp range"},
		{Timestamp, `1e300`, "no fractional number"},
	}
	for _, c := range cases {
		t.Run(c.kind.String()+"/"+c.json, func(t *testing.T) {
			d := NewDecoder([]Field{{Name: "x", Kind: c.kind, Nullable: true}})
			got, err := decodeBoth(t, d, []byte(`{"x":`+c.json+`}`), nil)
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("Decode = %v, %v; want a *MalformedError", got, err)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not match ErrMalformed", err)
			}
			if me.Field != "x" || !strings.Contains(me.Reason, c.reason) {
				t.Errorf("error = %+v, want field x and a reason containing %q", me, c.reason)
			}
			if len(got) != 0 {
				t.Errorf("row on error = %v, want empty", got)
			}
		})
	}
}

func TestDecodeRejectsRecordsThatAreNotJSONObjects(t *testing.T) {
	for _, in := range []string{``, `{`, `{"x":}`, `[1,2]`, `"x"`, `42`, `null`, `{"x":1}garbage`, `{"x":1,}`} {
		t.Run(in, func(t *testing.T) {
			d := NewDecoder([]Field{{Name: "x", Kind: Long, Nullable: true}})
			_, err := decodeBoth(t, d, []byte(in), nil)
			var me *MalformedError
			if !errors.As(err, &me) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode(%q) error = %v, want a malformed error", in, err)
			}
			if me.Field != "" {
				t.Errorf("Field = %q, want empty for a whole-record error", me.Field)
			}
		})
	}
}

func TestMissingOrNullFieldIsNullWhenNullableAndMalformedOtherwise(t *testing.T) {
	fields := []Field{
		{Name: "a", Kind: String, Nullable: true},
		{Name: "b", Kind: Long, Nullable: false},
	}
	d := NewDecoder(fields)
	got, err := decodeBoth(t, d, []byte(`{"b":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	assertRow(t, got, Row{{}, LongValue(1)})
	got, err = decodeBoth(t, d, []byte(`{"a":null,"b":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	assertRow(t, got, Row{{}, LongValue(2)})

	for _, in := range []string{`{"a":"x"}`, `{"a":"x","b":null}`, `{}`} {
		_, err := decodeBoth(t, d, []byte(in), nil)
		var me *MalformedError
		if !errors.As(err, &me) || me.Field != "b" {
			t.Errorf("Decode(%s) error = %v, want malformed field b", in, err)
			continue
		}
		if !strings.Contains(err.Error(), "b") || !strings.Contains(err.Error(), "non-nullable") {
			t.Errorf("error %q should name the field and the rule", err)
		}
	}
}

func TestExtraKeysAreIgnoredAndLastDuplicateWins(t *testing.T) {
	d := NewDecoder([]Field{{Name: "a", Kind: Long}})
	got, err := decodeBoth(t, d, []byte(`{"z":[1,{"q":2}],"a":1,"y":"s","a":7}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	assertRow(t, got, Row{LongValue(7)})
}

func TestKeysWithEscapesMatchFields(t *testing.T) {
	d := NewDecoder([]Field{{Name: "a\"b", Kind: Long}, {Name: "é", Kind: Long}})
	got, err := decodeBoth(t, d, []byte(`{"a\"b":1,"\u00e9":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	assertRow(t, got, Row{LongValue(1), LongValue(2)})
}

func TestWideSchemaUsesTheSameRules(t *testing.T) {
	var fields []Field
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 40 {
		fields = append(fields, Field{Name: fmt.Sprintf("f%02d", i), Kind: Long, Nullable: i%2 == 0})
		if i%4 != 0 { // skip every 4th key: nullable, so null
			if sb.Len() > 1 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"f%02d":%d`, i, i*10)
		}
	}
	sb.WriteString(`,"extra":1}`)
	d := NewDecoder(fields)
	got, err := decodeBoth(t, d, []byte(sb.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		want := LongValue(int64(i * 10))
		if i%4 == 0 {
			want = Value{}
		}
		if got[i] != want {
			t.Errorf("f%02d = %v, want %v", i, got[i], want)
		}
	}
	_, err = decodeBoth(t, d, []byte(`{"f00":1}`), nil)
	var me *MalformedError
	if !errors.As(err, &me) || me.Field != "f01" {
		t.Errorf("error = %v, want missing f01", err)
	}
}

func TestDecodeReusesRowCapacityAndStringsOutliveInput(t *testing.T) {
	d := NewDecoder(tileFields())
	buf := []byte(tileEvent)
	dst := make(Row, 0, 8)
	got, err := d.Decode(buf, dst)
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &dst[:1][0] {
		t.Error("Decode did not reuse dst's backing array")
	}
	// Overwrite the input and decode another record: earlier strings must
	// not change.
	for i := range buf {
		buf[i] = ' '
	}
	if _, err := decodeBoth(t, d, []byte(`{"event_id":"zzzzzzzz","course_id":"yyyyy","event_time":0}`), make(Row, 0, 4)); err != nil {
		t.Fatal(err)
	}
	if got[0].S != "e-000001" || got[1].S != "c-042" || got[2].S != "l-7" {
		t.Errorf("strings changed after the input was reused: %v", got)
	}
}

func TestDecoderRecoversAfterMalformedRecord(t *testing.T) {
	d := NewDecoder(tileFields())
	if _, err := decodeBoth(t, d, []byte(`{"event_id":1}`), nil); err == nil {
		t.Fatal("want error")
	}
	// A record missing lesson_id (nullable) after the bad one must not see
	// the previous record's values.
	got, err := decodeBoth(t, d, []byte(`{"event_id":"a","course_id":"b","event_time":"1970-01-01T00:00:00Z"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	assertRow(t, got, Row{StringValue("a"), StringValue("b"), {}, TimestampValue(0)})
}

func TestTimestampFractionDigitsAndOffsets(t *testing.T) {
	frac := "123456789"
	for n := 0; n <= 9; n++ {
		s := "2026-03-04T05:06:07"
		if n > 0 {
			s += "." + frac[:n]
		}
		// Oracle: nanoseconds from the digits, truncated to micros by us().
		nanos := 0
		if n > 0 {
			fmt.Sscanf(frac[:n]+strings.Repeat("0", 9-n), "%d", &nanos)
		}
		for _, zone := range []struct {
			suffix string
			loc    *time.Location
		}{
			{"Z", time.UTC},
			{"", time.UTC},
			{"+00:00", time.UTC},
			{"+05:30", time.FixedZone("", 5*3600+30*60)},
			{"-08:00", time.FixedZone("", -8*3600)},
			{"-00:45", time.FixedZone("", -45*60)},
			{"+18:00", time.FixedZone("", 18*3600)},
			{"+0530", time.FixedZone("", 5*3600+30*60)},
			{" UTC", time.UTC},
		} {
			in := s + zone.suffix
			want := us(2026, 3, 4, 5, 6, 7, nanos, zone.loc)
			got, ok := ParseTimestamp([]byte(in))
			if !ok || got != want {
				t.Errorf("ParseTimestamp(%q) = %d, %v; want %d", in, got, ok, want)
			}
		}
	}
}

func TestTimestampSpaceSeparatorButNotLowercaseTOrZ(t *testing.T) {
	want := us(2026, 1, 1, 12, 0, 0, 500_000_000, time.UTC)
	for _, in := range []string{"2026-01-01 12:00:00.5", "2026-01-01 12:00:00.500+00:00"} {
		got, ok := ParseTimestamp([]byte(in))
		if !ok || got != want {
			t.Errorf("ParseTimestamp(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	// Spark's CAST takes only 'T' or a space, and ZoneId.of only "Z".
	for _, in := range []string{"2026-01-01t12:00:00.5Z", "2026-01-01T12:00:00.5z"} {
		if got, ok := ParseTimestamp([]byte(in)); ok {
			t.Errorf("ParseTimestamp(%q) = %d, want refused", in, got)
		}
	}
}

func TestTimestampAgreesWithTimeParseAcrossDates(t *testing.T) {
	// Walk dates across leap years, century rules and before the epoch;
	// compare with the standard library.
	start := time.Date(1599, 12, 25, 23, 59, 59, 999_999_000, time.UTC)
	for tm := start; tm.Year() < 2402; tm = tm.Add(97*24*time.Hour + 7*time.Hour + 13*time.Second + 7*time.Microsecond) {
		for _, loc := range []*time.Location{time.UTC, time.FixedZone("", -11*3600-30*60), time.FixedZone("", 14*3600)} {
			in := tm.In(loc).Format("2006-01-02T15:04:05.000000Z07:00")
			got, ok := ParseTimestamp([]byte(in))
			if want := tm.UnixMicro(); !ok || got != want {
				t.Fatalf("ParseTimestamp(%q) = %d, %v; want %d", in, got, ok, want)
			}
		}
	}
	for _, in := range []string{"2000-02-29T00:00:00Z", "2024-02-29T00:00:00Z", "1900-02-28T00:00:00Z"} {
		if _, ok := ParseTimestamp([]byte(in)); !ok {
			t.Errorf("%s should parse", in)
		}
	}
	for _, in := range []string{"1900-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-00T00:00:00Z"} {
		if _, ok := ParseTimestamp([]byte(in)); ok {
			t.Errorf("%s should not parse", in)
		}
	}
}

func TestTimestampBeforeEpochTruncatesFractionTowardEarlier(t *testing.T) {
	// 1969-12-31T23:59:59.9999999Z is 100 ns before the epoch; truncating
	// the fraction to micros gives -1 µs (the fraction is always added to
	// the whole second below it).
	got, ok := ParseTimestamp([]byte("1969-12-31T23:59:59.9999999Z"))
	if !ok || got != -1 {
		t.Errorf("got %d, %v; want -1", got, ok)
	}
}

func TestMalformedErrorMessageNamesFieldAndValue(t *testing.T) {
	d := NewDecoder([]Field{{Name: "event_time", Kind: Timestamp}})
	_, err := decodeBoth(t, d, []byte(`{"event_time":"01/02/2026"}`), nil)
	if err == nil {
		t.Fatal("want error")
	}
	msg := err.Error()
	for _, part := range []string{"event_time", "01/02/2026", "as Spark casts a string"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %q", msg, part)
		}
	}
}

func TestDecodeTileAllocatesOnlyItsStrings(t *testing.T) {
	d := NewDecoder(tileFields())
	data := []byte(tileEvent)
	dst := make(Row, 0, 4)
	allocs := testing.AllocsPerRun(1000, func() {
		var err error
		dst, err = d.Decode(data, dst)
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Errorf("Decode allocates %.1f times per tile event, want at most 3 (one per string)", allocs)
	}
}

func BenchmarkDecodeTile(b *testing.B) {
	d := NewDecoder(tileFields())
	data := []byte(tileEvent)
	dst := make(Row, 0, 4)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		dst, err = d.Decode(data, dst)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeTileWindowed adds what the map task does next: the
// tumbling 5-minute window start of the event time.
func BenchmarkDecodeTileWindowed(b *testing.B) {
	d := NewDecoder(tileFields())
	data := []byte(tileEvent)
	dst := make(Row, 0, 4)
	const size = int64(5 * time.Minute / time.Microsecond)
	var sink int64
	b.ReportAllocs()
	for b.Loop() {
		var err error
		dst, err = d.Decode(data, dst)
		if err != nil {
			b.Fatal(err)
		}
		ts := dst[3].I
		start := ts - ts%size
		if ts%size < 0 {
			start -= size
		}
		sink += start
	}
	_ = sink
}

// An unused field is still checked, so a record is malformed whatever the
// query reads, but its value is left null.
func TestUnusedFieldIsCheckedButNotKept(t *testing.T) {
	d := NewDecoder([]Field{
		{Name: "id", Kind: String, Unused: true},
		{Name: "n", Kind: Long, Unused: true},
		{Name: "k", Kind: String},
	})
	r, err := decodeBoth(t, d, []byte(`{"id":"x","n":3,"k":"y"}`), nil)
	if err != nil || r[0].Kind != Null || r[1].Kind != Null || r[2].S != "y" {
		t.Fatalf("got %v %v, want null, null, y", r, err)
	}
	for _, bad := range []string{`{"id":[nan],"n":3,"k":"y"}`, `{"id":"x","n":"3","k":"y"}`} {
		if _, err := decodeBoth(t, d, []byte(bad), nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: an unused field of the wrong type must still make the record malformed, got %v", bad, err)
		}
	}
	d = NewDecoder([]Field{{Name: "id", Kind: String, Unused: true}})
	if _, err := decodeBoth(t, d, []byte(`{}`), nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("a missing non-nullable unused field must still be malformed, got %v", err)
	}
}

// tileQueryFields are the tile query's decoder fields as the map tasks
// build them (executor.ValueFields): the columns it never reads unused.
func tileQueryFields() []Field {
	f := tileFields()
	f[0].Unused, f[2].Unused = true, true
	return f
}

// BenchmarkDecodeTileQuery is the map tasks' decode of a tile event with
// the tile query's fields.
func BenchmarkDecodeTileQuery(b *testing.B) {
	d := NewDecoder(tileQueryFields())
	data := []byte(tileEvent)
	dst := make(Row, 0, 4)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		dst, err = d.Decode(data, dst)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeTileBare is the bare loop's parse of the same event
// (bench/bare.go): fastjson, GetStringBytes and time.Parse, the floor
// BenchmarkDecodeTileQuery is compared with.
func BenchmarkDecodeTileBare(b *testing.B) {
	var p fastjson.Parser
	data := []byte(tileEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var sink int
	for b.Loop() {
		v, err := p.ParseBytes(data)
		if err != nil {
			b.Fatal(err)
		}
		course := v.GetStringBytes("course_id")
		t, err := time.Parse(time.RFC3339Nano, string(v.GetStringBytes("event_time")))
		if err != nil {
			b.Fatal(err)
		}
		sink += len(course) + int(t.UnixMicro()&1)
	}
	_ = sink
}
