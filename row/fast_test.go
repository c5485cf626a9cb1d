package row

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// decodeBoth decodes data with Decode and checks it against both paths:
// the full path (fastjson) gives the same row or the same error, and the
// fast path, when it answers, gives the full path's row. Every conversion
// table of this package decodes through it.
func decodeBoth(t testing.TB, d *Decoder, data []byte, dst Row) (Row, error) {
	t.Helper()
	full, ferr := d.decodeFull(data, nil)
	fullCopy := append(Row(nil), full...)
	fast, ok := d.decodeFast(data, nil)
	if ok {
		if ferr != nil {
			t.Errorf("%s: the fast path gave %v, the full path refused it: %v", data, fast, ferr)
		} else if !sameRow(fast, fullCopy) {
			t.Errorf("%s: the fast path gave %#v, the full path %#v", data, fast, fullCopy)
		}
	}
	got, err := d.Decode(data, dst)
	switch {
	case (err == nil) != (ferr == nil) || err != nil && err.Error() != ferr.Error():
		t.Errorf("%s: Decode gave error %v, the full path %v", data, err, ferr)
	case err == nil && !sameRow(got, fullCopy):
		t.Errorf("%s: Decode gave %#v, the full path %#v", data, got, fullCopy)
	}
	return got, err
}

// sameRow compares rows value by value, a NaN equal to a NaN.
func sameRow(a, b Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.I != y.I || x.S != y.S || !(x.F == y.F || math.IsNaN(x.F) && math.IsNaN(y.F)) ||
			math.Signbit(x.F) != math.Signbit(y.F) {
			return false
		}
	}
	return true
}

// The fast path answers the common shapes (so the hot path does not go
// through fastjson) and declines what it cannot read exactly as the full
// path does. Both lists are checked against the full path too.
func TestFastPathAnswersTheCommonShapesAndDeclinesTheRest(t *testing.T) {
	d := NewDecoder([]Field{
		{Name: "s", Kind: String, Nullable: true},
		{Name: "l", Kind: Long, Nullable: true},
		{Name: "f", Kind: Double, Nullable: true},
		{Name: "b", Kind: Bool, Nullable: true},
		{Name: "t", Kind: Timestamp, Nullable: true},
		{Name: "u", Kind: String, Nullable: true, Unused: true},
	})
	answered := []string{
		`{"s":"x","l":1,"f":1.5,"b":true,"t":"2026-01-01T00:00:00Z","u":"y"}`,
		` { "s" : "x" , "l" : -12 , "f" : 1e3 ,"b":false,"t":1767225600} ` + "\n",
		"{\t\"s\":\"caf\u00e9\",\r\n\"t\":\"2026-01-01 00:00:00.123456789\"}",
		`{}`,
		`{"s":null,"l":null,"t":"2026-03-02T09:01:00+05:30"}`,
		`{"s":12345,"u":1.50,"f":"NaN"}`,
		`{"s":"a","s":"b","x":"ignored","y":3}`,
		`{"t":"2026-03-02 09:01:00 Europe/Paris"}`,
		`{"s":"raw` + "\x01\xff" + ` bytes"}`,
	}
	declined := []string{
		`{"s":"a\"b"}`,        // an escape in a string
		`{"s\u00e9":"x"}`,     // an escape in a key
		`{"s":{"a":1}}`,       // an object
		`{"u":[1,2]}`,         // an array
		`{"f":nan}`,           // fastjson's nan
		`{"f":-inf}`,          // fastjson's inf
		`{"f":-}`,             // a lone sign
		`{"l":1.5}`,           // malformed: the full path gives the error
		`{"t":"yesterday"}`,   // malformed
		`{"s":"x"}garbage`,    // invalid JSON
		`{"s":"x",}`,          // invalid JSON
		`{"s":"x"`,            // unclosed
		`{"l":1`,              // a number that runs to the end
		`[{"s":"x"}]`,         // not an object
		"\v{}",                // not fastjson's whitespace
		`{"s":"x"} {"s":"y"}`, // two values
	}
	for _, in := range answered {
		if _, ok := d.decodeFast([]byte(in), nil); !ok {
			t.Errorf("the fast path declined %s", in)
		}
		decodeBoth(t, d, []byte(in), nil)
	}
	for _, in := range declined {
		if r, ok := d.decodeFast([]byte(in), nil); ok {
			t.Errorf("the fast path answered %s with %v", in, r)
		}
		decodeBoth(t, d, []byte(in), nil)
	}
}

// The tile event takes the fast path and allocates only the strings the
// query keeps: with the tile query's fields (event_id and lesson_id
// unused), one string, course_id.
func TestTileQueryDecodeAllocatesOnlyCourseID(t *testing.T) {
	d := NewDecoder(tileQueryFields())
	data := []byte(tileEvent)
	if _, ok := d.decodeFast(data, nil); !ok {
		t.Fatal("the fast path declined the tile event")
	}
	dst := make(Row, 0, 4)
	allocs := testing.AllocsPerRun(1000, func() {
		var err error
		if dst, err = d.Decode(data, dst); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Decode allocates %.1f times per tile event, want 1 (course_id)", allocs)
	}
}

// randomSchema is a schema of every kind, nullable or not, used or not,
// under names that the records use, escape or repeat.
func randomSchema(rng *rand.Rand) []Field {
	kinds := []Kind{String, Long, Double, Bool, Timestamp}
	var fields []Field
	for i := range 1 + rng.IntN(6) {
		fields = append(fields, Field{
			Name:     fieldNames[i],
			Kind:     kinds[rng.IntN(len(kinds))],
			Nullable: rng.IntN(3) > 0,
			Unused:   rng.IntN(4) == 0,
		})
	}
	return fields
}

var fieldNames = []string{"event_id", "course_id", "event_time", "n", "ratio", "ok", "extra"}

// randomValue is a JSON value, mostly of the shapes producers write,
// sometimes one that breaks a rule or that only the full path reads.
func randomValue(rng *rand.Rand) string {
	switch rng.IntN(22) {
	case 0, 1, 2:
		return strconv.Quote(fmt.Sprintf("c-%03d", rng.IntN(1000)))
	case 3, 4, 5:
		tm := time.Unix(rng.Int64N(1<<34)-1<<32, rng.Int64N(1e9)).UTC()
		layouts := []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02 15:04:05", "2006-01-02T15:04:05.999999-07:00", "2006-01-02", "2006-01-02T15:04Z07:00"}
		loc := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("", -8*3600)}[rng.IntN(3)]
		return `"` + tm.In(loc).Format(layouts[rng.IntN(len(layouts))]) + `"`
	case 6, 7:
		return strconv.FormatInt(rng.Int64N(1<<40)-1<<39, 10)
	case 8:
		return strconv.FormatFloat(rng.NormFloat64()*1e3, 'g', -1, 64)
	case 9:
		return []string{"true", "false", "null"}[rng.IntN(3)]
	case 10:
		return []string{"1e400", "-0", "-0.0", "9223372036854775808", "1.0", "01", "1-2", "+1", ".5", "1e", "NaN", "+INF", "-INF", "-Infinity", "nan", "inf", "-", "1.5E-7"}[rng.IntN(18)]
	case 11:
		return []string{`"NaN"`, `"Infinity"`, `"-INF"`, `"true"`, `"42"`, `""`, `"   "`}[rng.IntN(7)]
	case 12:
		return `"a\"b\\c\u00e9\n"`
	case 13:
		return `{"a":[1,2.50,{"b":null}],"c":"d"}`
	case 14:
		return `[1,"x",true]`
	case 15:
		return `"2026-03-02T09:01:00 ` + []string{"Europe/Paris", "UTC", "PST", "GMT+1", "Mars/Olympus"}[rng.IntN(5)] + `"`
	case 16:
		return `"` + []string{"09:01:00", "T09:01", "2026-02-30", "2026-13-01", "2026-3-2T9:1:0Z", "2026-03-02T24:00:00Z", "+12026-01-01", "2026-03-02T09:01:00.1234567891Z"}[rng.IntN(8)] + `"`
	case 17:
		return strconv.FormatInt(rng.Int64N(2e9), 10)
	case 18:
		b := []byte(`"` + fmt.Sprintf("e-%08d", rng.IntN(1e8)) + `"`)
		b[1+rng.IntN(len(b)-2)] = "\x00\x1f\xc3\xff \t"[rng.IntN(6)]
		return string(b)
	}
	return strconv.Quote(fmt.Sprintf("l-%d", rng.IntN(50)))
}

var jsonSpaces = []string{"", "", "", " ", "\t", "\n", "\r\n", "  "}

// typedValue is a value of the shape a producer writes for kind k.
func typedValue(rng *rand.Rand, k Kind) string {
	switch k {
	case Long:
		return strconv.FormatInt(rng.Int64N(1<<40)-1<<39, 10)
	case Double:
		return strconv.FormatFloat(rng.NormFloat64()*1e3, 'g', -1, 64)
	case Bool:
		return []string{"true", "false"}[rng.IntN(2)]
	case Timestamp:
		if rng.IntN(10) == 0 {
			return strconv.FormatInt(rng.Int64N(2e9), 10)
		}
		tm := time.Unix(rng.Int64N(1<<34)-1<<32, rng.Int64N(1e9)).UTC()
		layouts := []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02 15:04:05", "2006-01-02T15:04:05.999999-07:00"}
		loc := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("", -8*3600)}[rng.IntN(3)]
		return `"` + tm.In(loc).Format(layouts[rng.IntN(len(layouts))]) + `"`
	}
	return strconv.Quote(fmt.Sprintf("c-%03d", rng.IntN(1000)))
}

// randomRecord is a record over the schema's names and others, in a
// random order, with random whitespace, keys missing or repeated, values
// mostly of their field's kind, and now and then a change that makes it
// invalid JSON.
func randomRecord(rng *rand.Rand, fields []Field) []byte {
	ws := func() string { return jsonSpaces[rng.IntN(len(jsonSpaces))] }
	kind := map[string]Kind{}
	var keys []string
	for _, f := range fields {
		kind[f.Name] = f.Kind
		if rng.IntN(10) > 0 {
			keys = append(keys, f.Name)
		}
	}
	for range rng.IntN(3) {
		keys = append(keys, fieldNames[rng.IntN(len(fieldNames))])
	}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	var b strings.Builder
	b.WriteString(ws() + "{")
	for k, name := range keys {
		if k > 0 {
			b.WriteString(ws() + ",")
		}
		v := randomValue(rng)
		if kd, ok := kind[name]; ok && rng.IntN(8) > 0 {
			v = typedValue(rng, kd)
		}
		if rng.IntN(30) == 0 {
			name = `event\u005fid` // an escaped key equal to event_id
		}
		b.WriteString(ws() + `"` + name + `"` + ws() + ":" + ws() + v)
	}
	b.WriteString(ws() + "}" + ws())
	rec := []byte(b.String())
	if rng.IntN(40) == 0 && len(rec) > 0 {
		i := rng.IntN(len(rec))
		switch rng.IntN(3) {
		case 0:
			rec = append(rec[:i], rec[i+1:]...)
		case 1:
			rec[i] = `{}[]":,\ x0`[rng.IntN(11)]
		default:
			rec = rec[:i]
		}
	}
	return rec
}

// The fast and the full path agree on random records: 1 M of them (20 000
// with -short), over random schemas, in the shapes producers write and
// with the values and mistakes that take the full path.
func TestFastAndFullPathsAgreeOnRandomRecords(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 20_000
	}
	rng := rand.New(rand.NewPCG(32, 1))
	paris, err := LoadZone("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	var d *Decoder
	answered, malformed := 0, 0
	for i := range n {
		if i%1000 == 0 {
			d = NewDecoder(randomSchema(rng))
			if rng.IntN(4) == 0 {
				d.SetSessionTimeZone(paris)
			}
		}
		rec := randomRecord(rng, d.fields)
		full, ferr := d.decodeFull(rec, nil)
		if ferr != nil {
			malformed++
		}
		fast, ok := d.decodeFast(rec, nil)
		if !ok {
			continue
		}
		answered++
		if ferr != nil || !sameRow(fast, full) {
			t.Fatalf("schema %+v, record %q: fast path %#v, full path %#v, %v", d.fields, rec, fast, full, ferr)
		}
	}
	// Both paths must have been exercised.
	if answered < n/3 || malformed < n/10 || n-answered < n/5 {
		t.Errorf("of %d records the fast path answered %d, %d were malformed: the sample does not exercise both paths", n, answered, malformed)
	}
	t.Logf("%d records: the fast path answered %d, the full path found %d malformed", n, answered, malformed)
}

// fuzzSchemas are the schemas FuzzDecodeFastAgreesWithFull decodes each
// input with.
func fuzzSchemas() []*Decoder {
	paris, _ := LoadZone("Europe/Paris")
	var ds []*Decoder
	for _, kinds := range [][]Kind{
		{String, String, String, Timestamp},
		{Long, Double, Bool, Timestamp},
		{Timestamp, Long, String, Double},
	} {
		for _, mode := range []int{0, 1, 2} {
			var fields []Field
			for i, k := range kinds {
				fields = append(fields, Field{Name: fieldNames[i], Kind: k, Nullable: mode != 1 || i%2 == 0, Unused: mode == 2 && i%2 == 1})
			}
			d := NewDecoder(fields)
			if mode == 2 {
				d.SetSessionTimeZone(paris)
			}
			ds = append(ds, d)
		}
	}
	return ds
}

// FuzzDecodeFastAgreesWithFull: whenever the fast path answers, the full
// path gives the same row and no error; Decode always gives the full
// path's row or error. The seed corpus is in
// testdata/fuzz/FuzzDecodeFastAgreesWithFull; `go test` runs it,
// `go test -fuzz FuzzDecodeFastAgreesWithFull ./row` looks for more.
func FuzzDecodeFastAgreesWithFull(f *testing.F) {
	f.Add([]byte(tileEvent))
	rng := rand.New(rand.NewPCG(7, 7))
	ds := fuzzSchemas()
	for i := range 60 {
		f.Add(randomRecord(rng, ds[i%len(ds)].fields))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range ds {
			full, ferr := d.decodeFull(data, nil)
			full = append(Row(nil), full...)
			if fast, ok := d.decodeFast(data, nil); ok && (ferr != nil || !sameRow(fast, full)) {
				t.Fatalf("schema %+v: fast path %#v, full path %#v, %v", d.fields, fast, full, ferr)
			}
			got, err := d.Decode(data, nil)
			if (err == nil) != (ferr == nil) || err != nil && err.Error() != ferr.Error() || err == nil && !sameRow(got, full) {
				t.Fatalf("schema %+v: Decode %#v, %v; full path %#v, %v", d.fields, got, err, full, ferr)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
		}
	})
}
