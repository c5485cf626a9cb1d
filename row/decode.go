package row

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/valyala/fastjson"
)

// Field is one column of a declared input schema. An Unused field is
// checked exactly like the others (presence, nullability, type), so a
// record is malformed or not whatever the query reads, but its value is
// left null and a string is not copied: the query never reads it.
type Field struct {
	Name     string
	Kind     Kind
	Nullable bool
	Unused   bool
}

// ErrMalformed matches every error Decode returns for a record that does
// not fit the schema (errors.Is(err, ErrMalformed)). The details are in a
// *MalformedError.
var ErrMalformed = errors.New("malformed record")

// MalformedError says why a record was rejected. Field is empty when the
// record as a whole is bad (invalid JSON, not an object).
type MalformedError struct {
	Field  string
	Reason string
}

func (e *MalformedError) Error() string {
	if e.Field == "" {
		return "malformed record: " + e.Reason
	}
	return "malformed record: field " + e.Field + ": " + e.Reason
}

// Is makes a *MalformedError match ErrMalformed.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// Decoder turns one JSON document into a Row against a declared schema,
// converting each value as Spark 3.5's JacksonParser does with the default
// JSON options (allowNonNumericNumbers on, no timestampFormat). Where
// Spark gives a null field and keeps the row (PERMISSIVE mode), the record
// is set aside as malformed with the reason
// (docs/spark-differences.md#malformed-records-set-aside); where Sluice is stricter than
// Spark on purpose, the reason says so and names the entry of
// docs/spark-differences.md.
//
// Type rules (a value that breaks them makes the record malformed):
//   - string: a JSON string; any other value keeps its JSON text as
//     Spark's parser writes it (12345 gives "12345", true "true", 1.50
//     "1.5", 1e7 "1.0E7", an object or array compactly).
//   - long: a JSON integer literal within int64 (no fraction, no exponent).
//   - double: a JSON number; NaN, +INF, -INF unquoted; or the strings
//     "NaN", "Infinity", "+Infinity", "+INF", "-Infinity", "-INF".
//   - boolean: true or false.
//   - timestamp: a string as Spark's CAST reads it (see timestamp.go; no
//     zone means the session time zone), truncated to microseconds; or a
//     JSON integer, read as seconds since the epoch. A fractional number is
//     refused, as in Spark.
//
// A missing key or a JSON null gives a null value when the field is
// nullable and a malformed record otherwise. Keys not in the schema are
// ignored; when a key repeats, the last occurrence wins.
//
// A Decoder reuses one parser and is not safe for concurrent use: use one
// per goroutine.
type Decoder struct {
	fields []Field
	p      fastjson.Parser
	// slots[i] is the JSON value of fields[i] in the record being decoded.
	slots   []*fastjson.Value
	index   map[string]int // for wide schemas; nil when fields are few
	visit   func(key []byte, v *fastjson.Value)
	num     []byte           // scratch for JSON text
	tok     []byte           // scratch for a number token
	fast    fastState        // the fast path's (fast.go)
	session *Zone            // nil: UTC
	zones   map[string]*Zone // region zones met in timestamps, by name
}

// SetSessionTimeZone sets the zone of timestamp strings without one
// (Spark's spark.sql.session.timeZone); nil means UTC, the default.
func (d *Decoder) SetSessionTimeZone(z *Zone) { d.session = z }

// linearLookupMax is the schema width up to which keys are matched by a
// linear scan rather than a map lookup.
const linearLookupMax = 12

// NewDecoder returns a Decoder for the fields, which must have distinct
// names and kinds other than Null (the query's validation guarantees both).
func NewDecoder(fields []Field) *Decoder {
	d := &Decoder{
		fields: append([]Field(nil), fields...),
		slots:  make([]*fastjson.Value, len(fields)),
	}
	d.fast.init(fields)
	for _, f := range fields {
		if f.Kind == Null || f.Kind > Timestamp {
			panic(fmt.Sprintf("row.NewDecoder: field %s has unsupported kind %v", f.Name, f.Kind))
		}
	}
	if len(fields) > linearLookupMax {
		d.index = make(map[string]int, len(fields))
		for i, f := range fields {
			d.index[f.Name] = i
		}
		d.visit = func(key []byte, v *fastjson.Value) {
			if i, ok := d.index[string(key)]; ok {
				d.slots[i] = v
			}
		}
	} else {
		d.visit = func(key []byte, v *fastjson.Value) {
			for i := range d.fields {
				if d.fields[i].Name == string(key) {
					d.slots[i] = v
					return
				}
			}
		}
	}
	return d
}

// Fields returns the schema the Decoder decodes.
func (d *Decoder) Fields() []Field { return d.fields }

// Decode parses data and fills dst, reusing its capacity, with one value
// per field in schema order. Strings in the result are copies: they stay
// valid after data changes. On error the returned row is empty and the
// error matches ErrMalformed.
//
// A record of the common shape (a flat object, keys and strings without
// escapes; see decodeFast) is read in one pass without building a tree;
// anything else, and every record that is malformed, goes through
// fastjson and gives the same row or the same error (fast_test.go and
// FuzzDecodeFastAgreesWithFull check that the two agree).
func (d *Decoder) Decode(data []byte, dst Row) (Row, error) {
	if r, ok := d.decodeFast(data, dst); ok {
		return r, nil
	}
	return d.decodeFull(data, dst)
}

// decodeFull decodes data through fastjson's tree: every record the fast
// path declines.
func (d *Decoder) decodeFull(data []byte, dst Row) (Row, error) {
	dst = dst[:0]
	v, err := d.p.ParseBytes(data)
	if err != nil {
		// fastjson's JSON is not quite Jackson's with Spark's options
		// (docs/spark-differences.md#json-syntax).
		return dst, &MalformedError{Reason: "invalid JSON: " + err.Error()}
	}
	if t := v.Type(); t != fastjson.TypeObject {
		reason := "not a JSON object: got " + t.String()
		if t == fastjson.TypeArray {
			reason += " (Spark reads an array of objects as one row each; Sluice sets it aside: docs/spark-differences.md#top-level-array)"
		}
		return dst, &MalformedError{Reason: reason}
	}
	o, _ := v.Object()
	clear(d.slots)
	o.Visit(d.visit)

	n := len(d.fields)
	if cap(dst) < n {
		dst = make(Row, n)
	} else {
		dst = dst[:n]
	}
	for i := range d.fields {
		f := &d.fields[i]
		jv := d.slots[i]
		var (
			t    fastjson.Type
			text []byte
		)
		if jv != nil {
			switch t = jv.Type(); t {
			case fastjson.TypeString:
				text, _ = jv.StringBytes()
			case fastjson.TypeNumber:
				d.tok = jv.MarshalTo(d.tok[:0])
				text = d.tok
			}
		}
		val, reason := d.value(f, jv != nil, t, text, jv)
		if reason != "" {
			return dst[:0], &MalformedError{Field: f.Name, Reason: reason}
		}
		dst[i] = val
	}
	return dst, nil
}

// value converts field f's JSON value, shared by both paths: present
// says whether the record has the key, t is the value's type, text its
// string content (unescaped) or its number token, and jv the fastjson
// value, needed only for an object or array (nil on the fast path, which
// declines those). A reason makes the record malformed.
func (d *Decoder) value(f *Field, present bool, t fastjson.Type, text []byte, jv *fastjson.Value) (Value, string) {
	if !present || t == fastjson.TypeNull {
		// Spark reads every column as nullable; Sluice holds a
		// non-nullable column to it
		// (docs/spark-differences.md#non-nullable-columns).
		if !f.Nullable {
			if !present {
				return Value{}, "missing non-nullable field"
			}
			return Value{}, "null in non-nullable field"
		}
		return Value{}, ""
	}
	if f.Unused && f.Kind == String {
		// Any value fits a string column; only its number tokens can
		// make the record corrupt. No string is made: the query never
		// reads it.
		if t != fastjson.TypeString && t != fastjson.TypeTrue && t != fastjson.TypeFalse {
			if _, reason := d.appendText(t, text, jv); reason != "" {
				return Value{}, reason
			}
		}
		return Value{}, ""
	}
	val, reason := d.convert(f.Kind, t, text, jv)
	if reason != "" {
		return Value{}, reason
	}
	if f.Unused {
		val = Value{}
	}
	return val, ""
}

// convert turns one non-null JSON value (see value for t, text and jv)
// into a Value of kind k, or returns why it cannot.
func (d *Decoder) convert(k Kind, t fastjson.Type, text []byte, jv *fastjson.Value) (Value, string) {
	switch k {
	case String:
		switch t {
		case fastjson.TypeString:
			return Value{Kind: String, S: string(text)}, ""
		case fastjson.TypeTrue:
			return Value{Kind: String, S: "true"}, ""
		case fastjson.TypeFalse:
			return Value{Kind: String, S: "false"}, ""
		}
		b, reason := d.appendText(t, text, jv)
		if reason != "" {
			return Value{}, reason
		}
		return Value{Kind: String, S: string(b)}, ""

	case Long:
		if t != fastjson.TypeNumber {
			return Value{}, "want an integer, got a JSON " + t.String()
		}
		n, ok := parseJSONInt(text)
		if !ok {
			switch kind, _ := numberToken(text); kind {
			case tokenInt:
				return Value{}, "want an integer within the long range, got " + string(text) +
					" (Spark's parser fails on it too: a null field in PERMISSIVE mode)"
			case tokenBad:
				return Value{}, badToken(text)
			}
			return Value{}, "want an integer, got " + string(text)
		}
		return Value{Kind: Long, I: n}, ""

	case Double:
		switch t {
		case fastjson.TypeNumber:
			kind, f := numberToken(text)
			switch kind {
			case tokenBad:
				return Value{}, badToken(text)
			case tokenNonNumeric:
				return Value{Kind: Double, F: f}, ""
			}
			f, err := strconv.ParseFloat(string(text), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return Value{}, badToken(text)
			}
			return Value{Kind: Double, F: f}, "" // ±Inf past the double range, as Java's parseDouble
		case fastjson.TypeString:
			switch string(text) {
			case "NaN":
				return Value{Kind: Double, F: math.NaN()}, ""
			case "Infinity", "+Infinity", "+INF":
				return Value{Kind: Double, F: math.Inf(1)}, ""
			case "-Infinity", "-INF":
				return Value{Kind: Double, F: math.Inf(-1)}, ""
			}
			return Value{}, "want a number, got the string " + strconv.Quote(string(text))
		}
		return Value{}, "want a number, got a JSON " + t.String()

	case Bool:
		switch t {
		case fastjson.TypeTrue:
			return Value{Kind: Bool, I: 1}, ""
		case fastjson.TypeFalse:
			return Value{Kind: Bool}, ""
		}
		return Value{}, "want true or false, got a JSON " + t.String()

	case Timestamp:
		switch t {
		case fastjson.TypeString:
			us, st := parseSparkTimestamp(text, d.session, d.zoneCache())
			switch st {
			case tsOK:
				return Value{Kind: Timestamp, I: us}, ""
			case tsTimeOnly:
				return Value{}, "a time without a date, " + strconv.Quote(string(text)) +
					": Spark puts it on the current day; Sluice is stricter than Spark so that rows do not depend on when they are read (docs/spark-differences.md#time-without-date)"
			}
			return Value{}, "want a timestamp such as 2026-01-01T00:00:00.123Z (as Spark casts a string), got " + strconv.Quote(string(text))
		case fastjson.TypeNumber:
			us, reason := epochSecondsToMicros(text)
			if reason != "" {
				return Value{}, reason
			}
			return Value{Kind: Timestamp, I: us}, ""
		}
		return Value{}, "want a timestamp string or epoch seconds, got a JSON " + t.String()
	}
	return Value{}, "unsupported kind " + k.String()
}

// appendText is the text of a number, object or array in a string column
// (see appendJackson), in d.num, or why the record is corrupt.
func (d *Decoder) appendText(t fastjson.Type, text []byte, jv *fastjson.Value) ([]byte, string) {
	var ok bool
	if t == fastjson.TypeNumber {
		d.num, ok = appendJacksonToken(d.num[:0], text)
		if !ok {
			return nil, "a number token Spark's JSON parser does not read, in " + strconv.Quote(string(text))
		}
		return d.num, ""
	}
	d.num, ok = appendJackson(d.num[:0], jv)
	if !ok {
		return nil, "a number token Spark's JSON parser does not read, in " + strconv.Quote(string(jv.MarshalTo(nil)))
	}
	return d.num, ""
}

func (d *Decoder) zoneCache() map[string]*Zone {
	if d.zones == nil {
		d.zones = make(map[string]*Zone)
	}
	return d.zones
}

// badToken is the reason for a number token Jackson would not read.
func badToken(b []byte) string {
	return "invalid number " + strconv.Quote(string(b)) + " (Spark's JSON parser reads only JSON numbers, NaN, +INF and -INF)"
}

// epochSecondsToMicros reads a JSON number in a timestamp column as
// Spark does: an integer is seconds since the epoch (getLongValue *
// 1000000); any other number is refused.
func epochSecondsToMicros(b []byte) (int64, string) {
	const maxSecs = math.MaxInt64 / 1_000_000
	kind, _ := numberToken(b)
	switch kind {
	case tokenBad:
		return 0, badToken(b)
	case tokenFloat, tokenNonNumeric:
		return 0, "want whole epoch seconds, got " + string(b) + " (Spark takes no fractional number in a timestamp column)"
	}
	secs, ok := parseJSONInt(b)
	if !ok {
		return 0, "epoch seconds " + string(b) + " out of the long range (Spark's parser fails on it too)"
	}
	if secs > maxSecs || secs < -maxSecs {
		return 0, "epoch seconds " + string(b) + " out of the timestamp range: Spark's multiplication by 1,000,000 overflows silently; Sluice is stricter than Spark here (docs/spark-differences.md#epoch-seconds-overflow)"
	}
	return secs * 1_000_000, ""
}

// parseJSONInt parses a JSON integer literal (-?(0|[1-9][0-9]*)) that fits
// an int64.
func parseJSONInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// isJSONNumber reports whether b follows the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func isJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(b)
}

// ParseTimestamp reads a timestamp string as Spark's CAST does, with UTC
// for a string without a zone (see timestamp.go), into microseconds since
// the epoch, truncating digits beyond microseconds. A time without a date
// is refused.
func ParseTimestamp(b []byte) (int64, bool) {
	us, st := parseSparkTimestamp(b, nil, nil)
	return us, st == tsOK
}

// ParseTimestampIn is ParseTimestamp with the session time zone zone (nil:
// UTC) for a string without a zone, as Spark's CAST(s AS TIMESTAMP) reads
// it. It reports timeOnly for a time without a date, which Spark places
// on the current day and Sluice refuses
// (docs/spark-differences.md#time-without-date).
func ParseTimestampIn(b []byte, zone *Zone) (us int64, ok, timeOnly bool) {
	us, st := stringToTimestamp(b, zone, nil)
	return us, st == tsOK, st == tsTimeOnly
}

// DaysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date.
func DaysFromCivil(y, m, d int) int64 { return daysFromCivil(y, m, d) }

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
