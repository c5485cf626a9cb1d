package row

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	_ "time/tzdata" // region zone IDs (Europe/Paris) resolve on any host, as in Spark's JVM
)

// Timestamp strings are read as Spark 3.5 reads them in a JSON source
// with the default options (no timestampFormat): its CAST rules,
// DateTimeUtils.stringToTimestamp, then, when that fails, once more with
// every "GMT" removed (JacksonParser's legacy fallback). After trimming
// spaces and control characters:
//
//	[+-]yyyy[y[y]][-[m]m[-[d]d]][(T| )[h]h[:[m]m[:[s]s[.fraction][zone]]]]
//
// A year has 4 to 6 digits, other fields 1 or 2; missing fields are 1
// (month, day) or 0; a fraction has any number of digits, those past
// microseconds dropped. The zone is what follows the seconds or the
// fraction, trimmed, read as java.time.ZoneId.of with SHORT_IDS (after
// Spark's padding of +h:mm and +hh:m): Z, +h, +hh, +hhmm, +hh:mm,
// +hhmmss, +hh:mm:ss (within ±18:00), UTC, GMT, UT alone or followed by
// such an offset, a region such as Europe/Paris, or a short ID such as
// PST or EST. A string without a zone is in the session time zone (UTC
// unless the query sets sessionTimeZone). Local times in a region zone's
// gap move forward by the gap and in an overlap take the earlier offset,
// as java.time does.
//
// One thing Spark accepts is set aside on purpose: a time without a date
// (10:00:00, T10:00:00), which Spark places on the current day, so the
// rows would depend on when they are read
// (docs/spark-differences.md#time-without-date).

// Zone is a time zone as Spark's ZoneId: a fixed offset or a region.
type Zone struct {
	name   string
	offset int            // seconds east of UTC, when loc is nil
	loc    *time.Location // a region with rules
}

// UTC is the default session time zone.
var UTC = &Zone{name: "UTC"}

// String returns the zone's ID as given.
func (z *Zone) String() string { return z.name }

// Location returns the zone as a *time.Location.
func (z *Zone) Location() *time.Location {
	if z.loc != nil {
		return z.loc
	}
	if z.offset == 0 {
		return time.UTC
	}
	return time.FixedZone(z.name, z.offset)
}

// ErrZone matches the error LoadZone returns for an ID Spark would refuse.
var ErrZone = errors.New("invalid time zone ID")

// LoadZone reads a time zone ID as Spark's DateTimeUtils.getZoneId does
// (the values spark.sql.session.timeZone takes): a region such as
// America/Los_Angeles, a short ID such as PST, or an offset such as
// +01:00, Z, UTC or GMT+1.
func LoadZone(id string) (*Zone, error) {
	z, ok := parseZone([]byte(id), nil)
	if !ok {
		return nil, fmt.Errorf("%w %q: want a region such as Europe/Paris, or an offset such as +01:00 or UTC", ErrZone, id)
	}
	z.name = id
	return &z, nil
}

// shortIDs is java.time.ZoneId.SHORT_IDS, which Spark passes to ZoneId.of.
var shortIDs = map[string]string{
	"ACT": "Australia/Darwin", "AET": "Australia/Sydney", "AGT": "America/Argentina/Buenos_Aires",
	"ART": "Africa/Cairo", "AST": "America/Anchorage", "BET": "America/Sao_Paulo",
	"BST": "Asia/Dhaka", "CAT": "Africa/Harare", "CNT": "America/St_Johns",
	"CST": "America/Chicago", "CTT": "Asia/Shanghai", "EAT": "Africa/Addis_Ababa",
	"ECT": "Europe/Paris", "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata",
	"JST": "Asia/Tokyo", "MIT": "Pacific/Apia", "NET": "Asia/Yerevan",
	"NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix",
	"PRT": "America/Puerto_Rico", "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal",
	"VST": "Asia/Ho_Chi_Minh", "EST": "-05:00", "MST": "-07:00", "HST": "-10:00",
}

// zoneCacheMax bounds a Decoder's cache of region zones by name.
const zoneCacheMax = 64

// parseZone reads a zone ID (ZoneId.of after Spark's getZoneId padding).
// cache, if not nil, keeps regions already loaded (and unknown names). A
// Zone is returned by value: an offset costs no allocation.
func parseZone(b []byte, cache map[string]*Zone) (Zone, bool) {
	// Java's String.trim: every char <= ' ' at both ends.
	for len(b) > 0 && b[0] <= ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] <= ' ' {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return Zone{}, false
	}
	// Fast paths: Z and ±hh:mm need no padding and no lookup.
	if len(b) == 1 {
		return Zone{}, b[0] == 'Z'
	}
	if b[0] == '+' || b[0] == '-' {
		if off, ok := zoneOffset(b); ok {
			return Zone{offset: off}, true
		}
	}
	z, ok := cache[string(b)]
	if !ok {
		z = parseZoneSlow(string(b))
		if cache != nil && len(cache) < zoneCacheMax {
			cache[string(b)] = z
		}
	}
	if z == nil {
		return Zone{}, false
	}
	return *z, true
}

func parseZoneSlow(id string) *Zone {
	id = padZone(id)
	if s, ok := shortIDs[id]; ok {
		id = s
	}
	if len(id) <= 1 || id[0] == '+' || id[0] == '-' {
		if id == "Z" {
			return UTC
		}
		if off, ok := zoneOffset([]byte(id)); ok {
			return &Zone{name: id, offset: off}
		}
		return nil
	}
	for _, prefix := range []string{"UTC", "GMT", "UT"} {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		rest := id[len(prefix):]
		if rest == "" {
			return &Zone{name: id}
		}
		if rest[0] == '+' || rest[0] == '-' {
			if off, ok := zoneOffset([]byte(rest)); ok {
				return &Zone{name: id, offset: off}
			}
			return nil
		}
		break // a region ID that starts like a prefix (UTC is handled above)
	}
	if !isRegionID(id) {
		return nil
	}
	loc, err := time.LoadLocation(id)
	if err != nil {
		return nil
	}
	return &Zone{name: id, loc: loc}
}

// padZone applies Spark's getZoneId rewrites: the first "(+|-)d:" gets a
// leading zero on the hour, and a trailing "(+|-)dd:d" one on the minute.
func padZone(id string) string {
	for i := 0; i+2 < len(id); i++ {
		if (id[i] == '+' || id[i] == '-') && isDigit(id[i+1]) && id[i+2] == ':' {
			id = id[:i+1] + "0" + id[i+1:]
			break
		}
	}
	if n := len(id); n >= 5 && (id[n-5] == '+' || id[n-5] == '-') && isDigit(id[n-4]) && isDigit(id[n-3]) && id[n-2] == ':' && isDigit(id[n-1]) {
		id = id[:n-1] + "0" + id[n-1:]
	}
	return id
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isRegionID is java.time's ZoneRegion pattern [A-Za-z][A-Za-z0-9~/._+-]+
// (which also keeps Go-only names such as "Local" out: Java has no such
// zone, and LoadLocation reads it as the host's zone).
func isRegionID(id string) bool {
	if len(id) < 2 || id == "Local" {
		return false
	}
	c := id[0]
	if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
		return false
	}
	for i := 1; i < len(id); i++ {
		c := id[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || isDigit(c) || strings.IndexByte("~/._+-", c) >= 0) {
			return false
		}
	}
	return true
}

// zoneOffset is java.time.ZoneOffset.of for a signed ID: +h, +hh, +hhmm,
// +hh:mm, +hhmmss, +hh:mm:ss, within ±18:00.
func zoneOffset(b []byte) (int, bool) {
	if len(b) < 2 || (b[0] != '+' && b[0] != '-') {
		return 0, false
	}
	num := func(i int) (int, bool) {
		if i+1 >= len(b) || !isDigit(b[i]) || !isDigit(b[i+1]) {
			return 0, false
		}
		return int(b[i]-'0')*10 + int(b[i+1]-'0'), true
	}
	var h, m, s int
	ok := true
	switch len(b) {
	case 2:
		if !isDigit(b[1]) {
			return 0, false
		}
		h = int(b[1] - '0')
	case 3:
		h, ok = num(1)
	case 5:
		var ok2 bool
		h, ok = num(1)
		m, ok2 = num(3)
		ok = ok && ok2
	case 6:
		var ok2 bool
		h, ok = num(1)
		m, ok2 = num(4)
		ok = ok && ok2 && b[3] == ':'
	case 7:
		var ok2, ok3 bool
		h, ok = num(1)
		m, ok2 = num(3)
		s, ok3 = num(5)
		ok = ok && ok2 && ok3
	case 9:
		var ok2, ok3 bool
		h, ok = num(1)
		m, ok2 = num(4)
		s, ok3 = num(7)
		ok = ok && ok2 && ok3 && b[3] == ':' && b[6] == ':'
	default:
		return 0, false
	}
	if !ok || h > 18 || m > 59 || s > 59 || (h == 18 && (m > 0 || s > 0)) {
		return 0, false
	}
	off := h*3600 + m*60 + s
	if b[0] == '-' {
		off = -off
	}
	return off, true
}

// tsStatus says why a timestamp string was not read.
type tsStatus uint8

const (
	tsOK tsStatus = iota
	tsInvalid
	tsTimeOnly
)

// parseSparkTimestamp reads b as Spark's stringToTimestamp in the session
// zone (nil: UTC), then, if that fails and b holds "GMT", without it.
func parseSparkTimestamp(b []byte, session *Zone, cache map[string]*Zone) (int64, tsStatus) {
	if us, ok := fastTimestamp(b, session); ok {
		return us, tsOK
	}
	us, st := stringToTimestamp(b, session, cache)
	if st == tsInvalid && bytes.Contains(b, []byte("GMT")) {
		// JacksonParser's fallback: DateTimeUtils.cleanLegacyTimestampStr.
		return stringToTimestamp([]byte(strings.ReplaceAll(string(b), "GMT", "")), session, cache)
	}
	return us, st
}

func isTrimmed(c byte) bool { return c <= ' ' || c == 0x7f }

// stringToTimestamp ports Spark 3.5's DateTimeUtils.parseTimestampString
// and stringToTimestamp (see the comment at the top of this file).
func stringToTimestamp(b []byte, session *Zone, cache map[string]*Zone) (int64, tsStatus) {
	start, end := 0, len(b)
	for start < end && isTrimmed(b[start]) {
		start++
	}
	for end > start && isTrimmed(b[end-1]) {
		end--
	}
	if start == end {
		return 0, tsInvalid
	}
	validDigits := func(segment, digits int) bool {
		return segment == 6 || (segment == 0 && digits >= 4 && digits <= 6) ||
			(segment == 7 && digits <= 2) ||
			(segment != 0 && segment != 6 && segment != 7 && digits > 0 && digits <= 2)
	}
	seg := [9]int{1, 1, 1, 0, 0, 0, 0, 0, 0}
	i, val, digits, digitsMilli := 0, 0, 0, 0
	justTime := false
	yearSign := 0
	var tz []byte
	j := start
	if b[j] == '-' || b[j] == '+' {
		yearSign = 1
		if b[j] == '-' {
			yearSign = -1
		}
		j++
	}
	next := func() { // close the current segment and start the next
		seg[i] = val
		val, digits = 0, 0
		i++
	}
	for ; j < end; j++ {
		c := b[j]
		if !isDigit(c) {
			switch {
			case j == start && c == 'T':
				justTime = true
				i += 3
			case i < 2:
				switch {
				case c == '-':
					if !validDigits(i, digits) {
						return 0, tsInvalid
					}
					next()
				case i == 0 && c == ':' && yearSign == 0:
					justTime = true
					if !validDigits(3, digits) {
						return 0, tsInvalid
					}
					seg[3] = val
					val, digits = 0, 0
					i = 4
				default:
					return 0, tsInvalid
				}
			case i == 2:
				if c != ' ' && c != 'T' || !validDigits(i, digits) {
					return 0, tsInvalid
				}
				next()
			case i == 3 || i == 4:
				if c != ':' || !validDigits(i, digits) {
					return 0, tsInvalid
				}
				next()
			case i == 5 || i == 6:
				if !validDigits(i, digits) {
					return 0, tsInvalid
				}
				if c == '.' && i == 5 {
					next()
				} else {
					next()
					tz = b[j:end]
					j = end - 1
				}
				if i == 6 && c != '.' {
					i++
				}
			default:
				if i < len(seg) && (c == ':' || c == ' ') && validDigits(i, digits) {
					next()
				} else {
					return 0, tsInvalid
				}
			}
			continue
		}
		if i == 6 {
			digitsMilli++
		}
		if i != 6 || digits < 6 {
			val = val*10 + int(c-'0')
		}
		digits++
	}
	if i >= len(seg) || !validDigits(i, digits) {
		return 0, tsInvalid
	}
	seg[i] = val
	for ; digitsMilli < 6; digitsMilli++ {
		seg[6] *= 10
	}
	var zone Zone
	if session != nil {
		zone = *session
	}
	if tz != nil {
		z, ok := parseZone(tz, cache)
		if !ok {
			return 0, tsInvalid
		}
		zone = z
	}
	if justTime {
		return 0, tsTimeOnly
	}
	if yearSign != 0 {
		seg[0] *= yearSign
	}
	year, month, day, hour, minute, sec := seg[0], seg[1], seg[2], seg[3], seg[4], seg[5]
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || sec > 59 {
		return 0, tsInvalid
	}
	local := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	secs := local
	switch {
	case zone.loc != nil:
		secs = zone.instant(local)
	default:
		secs -= int64(zone.offset)
	}
	// Spark's instantToMicros: multiplyExact and addExact fail on overflow.
	if secs > math.MaxInt64/1_000_000 || secs < math.MinInt64/1_000_000 {
		return 0, tsInvalid
	}
	us := secs * 1_000_000
	if us > math.MaxInt64-int64(seg[6]) {
		return 0, tsInvalid
	}
	return us + int64(seg[6]), tsOK
}

// instant returns the epoch second of a local time (seconds since
// 1970-01-01T00:00 local) in a region zone, as java.time's
// ZonedDateTime.of: in a gap the time moves forward by the gap (the offset
// before it applies), in an overlap the earlier offset applies.
func (z *Zone) instant(local int64) int64 {
	offAt := func(u int64) int64 {
		_, off := time.Unix(u, 0).In(z.loc).Zone()
		return int64(off)
	}
	before, after := offAt(local-86400), offAt(local+86400)
	valid := func(o int64) bool { return offAt(local-o) == o }
	vb, va := valid(before), valid(after)
	switch {
	case vb && va:
		return local - max(before, after) // overlap (or no change): the earlier instant
	case vb:
		return local - before
	case va:
		return local - after
	}
	if o := offAt(local); valid(o) {
		return local - o
	}
	return local - min(before, after) // a gap: the offset before it
}

func digits2(b []byte, i int) (int, bool) {
	c0, c1 := b[i]-'0', b[i+1]-'0'
	if c0 > 9 || c1 > 9 {
		return 0, false
	}
	return int(c0)*10 + int(c1), true
}

// fastTimestamp reads the common shape yyyy-MM-dd(T| )HH:mm:ss[.f{1,9}]
// followed by nothing, Z or ±HH:mm, with stringToTimestamp's result. It
// reports false for anything else (stringToTimestamp then decides), so it
// only saves time: the decoding hot path meets this shape almost always.
func fastTimestamp(b []byte, session *Zone) (int64, bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[13] != ':' || b[16] != ':' || (b[10] != 'T' && b[10] != ' ') {
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
		for i < len(b) && isDigit(b[i]) {
			frac += int64(b[i]-'0') * scale
			scale /= 10
			i++
		}
		if n := i - start; n == 0 || n > 9 {
			return 0, false
		}
	}
	local := daysFromCivil(year, mo, dd)*86400 + int64(hh*3600+mi*60+ss)
	var secs int64
	switch rest := b[i:]; {
	case len(rest) == 0:
		switch {
		case session == nil:
			secs = local
		case session.loc != nil:
			secs = session.instant(local)
		default:
			secs = local - int64(session.offset)
		}
	case len(rest) == 1 && rest[0] == 'Z':
		secs = local
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-'):
		off, ok := zoneOffset(rest)
		if !ok {
			return 0, false
		}
		secs = local - int64(off)
	default:
		return 0, false
	}
	return secs*1_000_000 + frac, true
}
