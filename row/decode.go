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
	num     []byte           // scratch for number text and JSON text
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
func (d *Decoder) Decode(data []byte, dst Row) (Row, error) {
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
		if jv == nil || jv.Type() == fastjson.TypeNull {
			// Spark reads every column as nullable; Sluice holds a
			// non-nullable column to it
			// (docs/spark-differences.md#non-nullable-columns).
			if !f.Nullable {
				if jv == nil {
					return dst[:0], &MalformedError{Field: f.Name, Reason: "missing non-nullable field"}
				}
				return dst[:0], &MalformedError{Field: f.Name, Reason: "null in non-nullable field"}
			}
			dst[i] = Value{}
			continue
		}
		if f.Unused && f.Kind == String {
			// Any value fits a string column; only its number tokens can
			// make the record corrupt.
			if jv.Type() != fastjson.TypeString {
				if _, reason := d.toText(jv); reason != "" {
					return dst[:0], &MalformedError{Field: f.Name, Reason: reason}
				}
			}
			dst[i] = Value{}
			continue
		}
		val, reason := d.convert(f.Kind, jv)
		if reason != "" {
			return dst[:0], &MalformedError{Field: f.Name, Reason: reason}
		}
		if f.Unused {
			val = Value{}
		}
		dst[i] = val
	}
	return dst, nil
}

// convert turns one non-null JSON value into a Value of kind k, or returns
// why it cannot.
func (d *Decoder) convert(k Kind, jv *fastjson.Value) (Value, string) {
	t := jv.Type()
	switch k {
	case String:
		if t == fastjson.TypeString {
			b, _ := jv.StringBytes()
			return Value{Kind: String, S: string(b)}, ""
		}
		return d.toText(jv)

	case Long:
		if t != fastjson.TypeNumber {
			return Value{}, "want an integer, got a JSON " + t.String()
		}
		d.num = jv.MarshalTo(d.num[:0])
		n, ok := parseJSONInt(d.num)
		if !ok {
			switch kind, _ := numberToken(d.num); kind {
			case tokenInt:
				return Value{}, "want an integer within the long range, got " + string(d.num) +
					" (Spark's parser fails on it too: a null field in PERMISSIVE mode)"
			case tokenBad:
				return Value{}, badToken(d.num)
			}
			return Value{}, "want an integer, got " + string(d.num)
		}
		return Value{Kind: Long, I: n}, ""

	case Double:
		switch t {
		case fastjson.TypeNumber:
			d.num = jv.MarshalTo(d.num[:0])
			kind, f := numberToken(d.num)
			switch kind {
			case tokenBad:
				return Value{}, badToken(d.num)
			case tokenNonNumeric:
				return Value{Kind: Double, F: f}, ""
			}
			f, err := strconv.ParseFloat(string(d.num), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return Value{}, badToken(d.num)
			}
			return Value{Kind: Double, F: f}, "" // ±Inf past the double range, as Java's parseDouble
		case fastjson.TypeString:
			b, _ := jv.StringBytes()
			switch string(b) {
			case "NaN":
				return Value{Kind: Double, F: math.NaN()}, ""
			case "Infinity", "+Infinity", "+INF":
				return Value{Kind: Double, F: math.Inf(1)}, ""
			case "-Infinity", "-INF":
				return Value{Kind: Double, F: math.Inf(-1)}, ""
			}
			return Value{}, "want a number, got the string " + strconv.Quote(string(b))
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
			b, _ := jv.StringBytes()
			us, st := parseSparkTimestamp(b, d.session, d.zoneCache())
			switch st {
			case tsOK:
				return Value{Kind: Timestamp, I: us}, ""
			case tsTimeOnly:
				return Value{}, "a time without a date, " + strconv.Quote(string(b)) +
					": Spark puts it on the current day; Sluice is stricter than Spark so that rows do not depend on when they are read (docs/spark-differences.md#time-without-date)"
			}
			return Value{}, "want a timestamp such as 2026-01-01T00:00:00.123Z (as Spark casts a string), got " + strconv.Quote(string(b))
		case fastjson.TypeNumber:
			d.num = jv.MarshalTo(d.num[:0])
			us, reason := epochSecondsToMicros(d.num)
			if reason != "" {
				return Value{}, reason
			}
			return Value{Kind: Timestamp, I: us}, ""
		}
		return Value{}, "want a timestamp string or epoch seconds, got a JSON " + t.String()
	}
	return Value{}, "unsupported kind " + k.String()
}

// toText is a non-string value's text in a string column (see
// appendJackson).
func (d *Decoder) toText(jv *fastjson.Value) (Value, string) {
	switch jv.Type() {
	case fastjson.TypeTrue:
		return Value{Kind: String, S: "true"}, ""
	case fastjson.TypeFalse:
		return Value{Kind: String, S: "false"}, ""
	}
	var ok bool
	d.num, ok = appendJackson(d.num[:0], jv)
	if !ok {
		return Value{}, "a number token Spark's JSON parser does not read, in " + strconv.Quote(string(jv.MarshalTo(nil)))
	}
	return Value{Kind: String, S: string(d.num)}, ""
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
