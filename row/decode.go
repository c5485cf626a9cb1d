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

// Decoder turns one JSON document into a Row against a declared schema.
//
// Type rules (a value that breaks them makes the record malformed):
//   - string: a JSON string.
//   - long: a JSON integer literal within int64 (no fraction, no exponent).
//   - double: a JSON number, or the strings "NaN", "Infinity", "-Infinity"
//     (as Spark's JSON reader accepts).
//   - boolean: true or false.
//   - timestamp: an RFC 3339 string with 0 to 9 fraction digits and 'Z' or
//     a ±HH:MM offset (a space instead of 'T' is accepted, and a missing
//     zone means UTC), truncated to microseconds; or a JSON number, read as
//     milliseconds since the epoch.
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
	slots []*fastjson.Value
	index map[string]int // for wide schemas; nil when fields are few
	visit func(key []byte, v *fastjson.Value)
	num   []byte // scratch for number text
}

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
		return dst, &MalformedError{Reason: "invalid JSON: " + err.Error()}
	}
	if t := v.Type(); t != fastjson.TypeObject {
		return dst, &MalformedError{Reason: "not a JSON object: got " + t.String()}
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
			if t := jv.Type(); t != fastjson.TypeString {
				return dst[:0], &MalformedError{Field: f.Name, Reason: "want a string, got a JSON " + t.String()}
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
		if t != fastjson.TypeString {
			return Value{}, "want a string, got a JSON " + t.String()
		}
		b, _ := jv.StringBytes()
		return Value{Kind: String, S: string(b)}, ""

	case Long:
		if t != fastjson.TypeNumber {
			return Value{}, "want an integer, got a JSON " + t.String()
		}
		d.num = jv.MarshalTo(d.num[:0])
		n, ok := parseJSONInt(d.num)
		if !ok {
			if isJSONNumber(d.num) {
				return Value{}, "want an integer within the long range, got " + string(d.num)
			}
			return Value{}, "invalid number " + strconv.Quote(string(d.num))
		}
		return Value{Kind: Long, I: n}, ""

	case Double:
		switch t {
		case fastjson.TypeNumber:
			d.num = jv.MarshalTo(d.num[:0])
			if !isJSONNumber(d.num) {
				return Value{}, "invalid number " + strconv.Quote(string(d.num))
			}
			f, err := strconv.ParseFloat(string(d.num), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return Value{}, "invalid number " + strconv.Quote(string(d.num))
			}
			return Value{Kind: Double, F: f}, ""
		case fastjson.TypeString:
			b, _ := jv.StringBytes()
			switch string(b) {
			case "NaN":
				return Value{Kind: Double, F: math.NaN()}, ""
			case "Infinity", "+Infinity", "+INF", "INF":
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
			if us, ok := ParseTimestamp(b); ok {
				return Value{Kind: Timestamp, I: us}, ""
			}
			return Value{}, "want an RFC 3339 timestamp such as 2026-01-01T00:00:00.123Z, got " + strconv.Quote(string(b))
		case fastjson.TypeNumber:
			d.num = jv.MarshalTo(d.num[:0])
			us, reason := epochMillisToMicros(d.num)
			if reason != "" {
				return Value{}, reason
			}
			return Value{Kind: Timestamp, I: us}, ""
		}
		return Value{}, "want an RFC 3339 string or epoch milliseconds, got a JSON " + t.String()
	}
	return Value{}, "unsupported kind " + k.String()
}

// epochMillisToMicros reads a JSON number of milliseconds since the epoch.
func epochMillisToMicros(b []byte) (int64, string) {
	const maxMillis = math.MaxInt64 / 1000
	if ms, ok := parseJSONInt(b); ok {
		if ms > maxMillis || ms < -maxMillis {
			return 0, "epoch milliseconds " + string(b) + " out of range"
		}
		return ms * 1000, ""
	}
	if !isJSONNumber(b) {
		return 0, "invalid number " + strconv.Quote(string(b))
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || f > maxMillis || f < -maxMillis {
		return 0, "epoch milliseconds " + string(b) + " out of range"
	}
	return int64(math.Floor(f * 1000)), ""
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

// ParseTimestamp reads an RFC 3339 timestamp into microseconds since the
// epoch, truncating digits beyond microseconds. It accepts
// YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|±HH:MM|nothing), with 1 to 9
// fraction digits; a missing zone means UTC.
func ParseTimestamp(b []byte) (int64, bool) {
	// A hand-written parser rather than time.Parse: it is several times
	// faster, and it is also stricter where time.Parse is lax (time.Parse
	// takes offsets such as +24:00 and +23:60 and more than 9 fraction
	// digits), so no fallback: what is accepted does not depend on which
	// path ran. The tests check it against time.Parse on valid input.
	return parseTimestampFast(b)
}

func digits2(b []byte, i int) (int, bool) {
	c0, c1 := b[i]-'0', b[i+1]-'0'
	if c0 > 9 || c1 > 9 {
		return 0, false
	}
	return int(c0)*10 + int(c1), true
}

func parseTimestampFast(b []byte) (int64, bool) {
	// 2026-01-01T00:00:01 is 19 bytes.
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	if c := b[10]; c != 'T' && c != 't' && c != ' ' {
		return 0, false
	}
	y1, ok1 := digits2(b, 0)
	y2, ok2 := digits2(b, 2)
	mo, ok3 := digits2(b, 5)
	dd, ok4 := digits2(b, 8)
	hh, ok5 := digits2(b, 11)
	mi, ok6 := digits2(b, 14)
	ss, ok7 := digits2(b, 17)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) {
		return 0, false
	}
	year := y1*100 + y2
	if mo < 1 || mo > 12 || dd < 1 || dd > daysIn(year, mo) || hh > 23 || mi > 59 || ss > 59 {
		return 0, false
	}
	i := 19
	var frac int64 // microseconds
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		scale := int64(100_000)
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			frac += int64(b[i]-'0') * scale
			scale /= 10
			i++
		}
		if n := i - start; n == 0 || n > 9 {
			return 0, false
		}
	}
	var offset int64 // seconds east of UTC
	switch {
	case i == len(b):
		// No zone: UTC.
	case b[i] == 'Z' || b[i] == 'z':
		i++
	case b[i] == '+' || b[i] == '-':
		if len(b)-i != 6 || b[i+3] != ':' {
			return 0, false
		}
		oh, okh := digits2(b, i+1)
		om, okm := digits2(b, i+4)
		if !okh || !okm || oh > 23 || om > 59 {
			return 0, false
		}
		offset = int64(oh*3600 + om*60)
		if b[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return 0, false
	}
	if i != len(b) {
		return 0, false
	}
	secs := daysFromCivil(year, mo, dd)*86400 + int64(hh*3600+mi*60+ss) - offset
	return secs*1_000_000 + frac, true
}

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
