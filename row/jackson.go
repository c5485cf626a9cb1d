package row

import (
	"math"
	"strconv"

	"github.com/valyala/fastjson"
)

// A JSON value that is not a string, in a string column, keeps its text as
// Spark's JacksonParser keeps it: the value copied through a Jackson
// generator (copyCurrentStructure), which writes it compactly: integers
// as their value, other numbers as Java's Double.toString, true, false,
// objects and arrays with no spaces and strings re-escaped as Jackson
// escapes them.

// appendJackson appends v as a Jackson generator writes it. It reports
// false when v holds a number token Spark's parser would not read (see
// numberToken), which makes the whole record corrupt in Spark.
func appendJackson(dst []byte, v *fastjson.Value) ([]byte, bool) {
	switch v.Type() {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return appendJacksonString(dst, b), true
	case fastjson.TypeNumber:
		return appendJacksonNumber(dst, v)
	case fastjson.TypeTrue:
		return append(dst, "true"...), true
	case fastjson.TypeFalse:
		return append(dst, "false"...), true
	case fastjson.TypeNull:
		return append(dst, "null"...), true
	case fastjson.TypeArray:
		a, _ := v.Array()
		dst = append(dst, '[')
		for i, e := range a {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendJackson(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case fastjson.TypeObject:
		o, _ := v.Object()
		dst = append(dst, '{')
		first, ok := true, true
		o.Visit(func(k []byte, e *fastjson.Value) {
			if !ok {
				return
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJacksonString(dst, k)
			dst = append(dst, ':')
			dst, ok = appendJackson(dst, e)
		})
		return append(dst, '}'), ok
	}
	return dst, false
}

// Kinds of number token, as Spark's Jackson parser (with its default
// allowNonNumericNumbers) sees them.
const (
	tokenBad        = iota // not a number Spark reads: the record is corrupt
	tokenInt               // VALUE_NUMBER_INT
	tokenFloat             // VALUE_NUMBER_FLOAT
	tokenNonNumeric        // NaN, +INF, -INF: VALUE_NUMBER_FLOAT too
)

// numberToken classifies the text of a number fastjson parsed. fastjson
// also takes nan and inf in any case, which Jackson refuses (tokenBad);
// Jackson also takes Infinity, +Infinity and -Infinity unquoted, which
// fastjson refuses as invalid JSON
// (docs/spark-differences.md#non-numeric-tokens).
func numberToken(b []byte) (int, float64) {
	switch string(b) {
	case "NaN":
		return tokenNonNumeric, math.NaN()
	case "+INF":
		return tokenNonNumeric, math.Inf(1)
	case "-INF":
		return tokenNonNumeric, math.Inf(-1)
	}
	if isJSONInt(b) {
		return tokenInt, 0
	}
	if isJSONNumber(b) {
		return tokenFloat, 0
	}
	return tokenBad, 0
}

// appendJacksonNumber writes a number value (see appendJacksonToken).
func appendJacksonNumber(dst []byte, v *fastjson.Value) ([]byte, bool) {
	start := len(dst)
	dst = v.MarshalTo(dst)
	return appendJacksonToken(dst[:start], dst[start:])
}

// appendJacksonToken writes a number token: an integer literal as its
// value (so -0 is 0; integers past the long range keep their digits, as
// BigInteger), any other number as the double it parses to, in Java's
// Double.toString form.
// A double that is not finite (a NaN or INF token, or a number past the
// double range) Jackson writes as a string (QUOTE_NON_NUMERIC_NUMBERS):
// "NaN", "Infinity", "-Infinity" with the quotes. text may be the bytes
// just past dst's length (appendJacksonNumber): it is read before dst is
// written.
func appendJacksonToken(dst, text []byte) ([]byte, bool) {
	kind, f := numberToken(text)
	switch kind {
	case tokenInt:
		if string(text) == "-0" {
			return append(dst, '0'), true
		}
		return append(dst, text...), true
	case tokenFloat, tokenNonNumeric:
		if kind == tokenFloat {
			f, _ = strconv.ParseFloat(string(text), 64) // ±Inf past the double range, as Java
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			dst = append(dst, '"')
			return append(appendJavaDouble(dst, f), '"'), true
		}
		return appendJavaDouble(dst, f), true
	}
	return dst, false
}

// isJSONInt reports whether b is -?(0|[1-9][0-9]*).
func isJSONInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// appendJavaDouble appends f as java.lang.Double.toString writes it
// (JDK 19 and later, which print the shortest digits that read back as
// f): NaN, Infinity, -Infinity; plain notation with at least one fraction
// digit for 1e-3 <= |f| < 1e7 (100.0, 0.001); otherwise d.dddE[-]n
// (1.0E7, 1.234E-5). JDKs before 19, which Spark 3.5 runs on, print a
// few values with more digits (docs/spark-differences.md#double-text).
func appendJavaDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest digits d1 d2 ... dn and exponent e: f = 0.d1...dn × 10^e.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±XX
	var dbuf [24]byte
	digits := dbuf[:0]
	i := 0
	for ; i < len(e) && e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits = append(digits, e[i])
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	exp++ // now f = 0.d1d2... × 10^exp
	if f >= 1e-3 && f < 1e7 {
		if exp <= 0 {
			dst = append(dst, '0', '.')
			for k := 0; k < -exp; k++ {
				dst = append(dst, '0')
			}
			return append(dst, digits...)
		}
		for k := 0; k < exp; k++ {
			if k < len(digits) {
				dst = append(dst, digits[k])
			} else {
				dst = append(dst, '0')
			}
		}
		dst = append(dst, '.')
		if exp >= len(digits) {
			return append(dst, '0')
		}
		return append(dst, digits[exp:]...)
	}
	dst = append(dst, digits[0], '.')
	if len(digits) == 1 {
		dst = append(dst, '0')
	} else {
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(exp-1), 10)
}

// appendJacksonString appends s quoted as Jackson's generator writes it:
// " and \ escaped, control characters as \b \t \n \f \r or \u00XX
// (upper-case hex), everything else (non-ASCII too) as it is.
func appendJacksonString(dst, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(dst, '"')
}
