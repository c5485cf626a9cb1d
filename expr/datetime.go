package expr

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Datetime patterns as Spark 3.5 takes them (its "Datetime Patterns for
// Formatting and Parsing" page, java.time.format.DateTimeFormatter
// letters): G y M L d D Q q E a H k K h m s S z Z X x V, text in single
// quotes ('' is a quote), any other non-letter as it is. Week-based
// letters (Y w W u e c) are refused with Spark's message, and so are the
// letters Spark refuses (A n N p) and optional sections ([ ]), which
// Sluice does not take.

type dtToken struct {
	letter byte // 0: literal
	count  int
	text   string
}

type dtPattern struct {
	src  string
	toks []dtToken
}

var monthShort = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// compilePattern reads a datetime pattern; parsing says it will be used to
// parse (Spark refuses E, F, q, Q there).
func compilePattern(p string, parsing bool) (*dtPattern, error) {
	out := &dtPattern{src: p}
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\'':
			j := i + 1
			var lit strings.Builder
			for {
				if j >= len(p) {
					return nil, fmt.Errorf("the datetime pattern '%s' has an unterminated quote", p)
				}
				if p[j] == '\'' {
					if j+1 < len(p) && p[j+1] == '\'' {
						lit.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				lit.WriteByte(p[j])
				j++
			}
			if j == i+1 {
				out.toks = append(out.toks, dtToken{text: "'"})
			} else {
				out.toks = append(out.toks, dtToken{text: lit.String()})
			}
			i = j + 1
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(p) && p[j] == c {
				j++
			}
			n := j - i
			switch {
			case strings.IndexByte("YWwuec", c) >= 0:
				return nil, fmt.Errorf("all week-based patterns are unsupported since Spark 3.0, detected: %c, Please use the SQL function EXTRACT instead", c)
			case strings.IndexByte("AnNpB", c) >= 0:
				return nil, fmt.Errorf("illegal pattern character: %c (in the datetime pattern '%s')", c, p)
			case parsing && strings.IndexByte("EFqQ", c) >= 0:
				return nil, fmt.Errorf("the datetime pattern '%s': the symbol %c can only be used for formatting, not parsing", p, c)
			case strings.IndexByte("GyMLdDQqEaHkKhmsSzZXxVF", c) < 0:
				return nil, fmt.Errorf("unknown pattern letter: %c (in the datetime pattern '%s')", c, p)
			case c == 'V' && n != 2:
				return nil, fmt.Errorf("the datetime pattern '%s': pattern letter count must be 2: V", p)
			case (c == 'S' && n > 9) || (c != 'S' && c != 'y' && n > 5) || (c == 'y' && n > 10):
				return nil, fmt.Errorf("too many pattern letters: %c (in the datetime pattern '%s')", c, p)
			}
			out.toks = append(out.toks, dtToken{letter: c, count: n})
			i = j
		case c == '[' || c == ']' || c == '{' || c == '}' || c == '#':
			return nil, fmt.Errorf("the datetime pattern '%s': %c (optional sections and reserved characters) is not supported", p, c)
		default:
			out.toks = append(out.toks, dtToken{text: string(c)})
			i++
		}
	}
	return out, nil
}

func pad(b []byte, n, width int) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	return appendPadded(b, n, width)
}

func offsetText(off int, colon, zForZero bool, short bool) string {
	if off == 0 && zForZero {
		return "Z"
	}
	sign := byte('+')
	if off < 0 {
		sign = '-'
		off = -off
	}
	h, m := off/3600, off%3600/60
	b := []byte{sign}
	b = appendPadded(b, h, 2)
	if short && m == 0 {
		return string(b)
	}
	if colon {
		b = append(b, ':')
	}
	return string(appendPadded(b, m, 2))
}

// format writes us (microseconds since the epoch) in loc by the pattern.
func (p *dtPattern) format(us int64, loc *time.Location, zoneID string) string {
	t := localTime(us, loc)
	var b []byte
	for _, tk := range p.toks {
		if tk.letter == 0 {
			b = append(b, tk.text...)
			continue
		}
		n := tk.count
		switch tk.letter {
		case 'G':
			if t.Year() > 0 {
				b = append(b, "AD"...)
			} else {
				b = append(b, "BC"...)
			}
		case 'y':
			y := t.Year()
			if y <= 0 {
				y = 1 - y // year of era
			}
			switch {
			case n == 2:
				b = pad(b, y%100, 2)
			case n >= 4 && y > 9999:
				b = append(b, '+')
				b = pad(b, y, n)
			default:
				b = pad(b, y, n)
			}
		case 'M', 'L':
			m := int(t.Month())
			switch {
			case n <= 2:
				b = pad(b, m, n)
			case n == 3:
				b = append(b, monthShort[m-1]...)
			case n == 4:
				b = append(b, t.Month().String()...)
			default:
				b = append(b, t.Month().String()[0])
			}
		case 'd':
			b = pad(b, t.Day(), n)
		case 'D':
			b = pad(b, t.YearDay(), n)
		case 'Q', 'q':
			q := (int(t.Month())-1)/3 + 1
			switch {
			case n <= 2:
				b = pad(b, q, n)
			case n == 3:
				b = append(b, 'Q')
				b = strconv.AppendInt(b, int64(q), 10)
			default:
				b = append(b, [...]string{"1st", "2nd", "3rd", "4th"}[q-1]+" quarter"...)
			}
		case 'E':
			switch {
			case n <= 3:
				b = append(b, t.Weekday().String()[:3]...)
			case n == 4:
				b = append(b, t.Weekday().String()...)
			default:
				b = append(b, t.Weekday().String()[0])
			}
		case 'F':
			b = pad(b, (t.Day()-1)/7+1, n)
		case 'a':
			if t.Hour() < 12 {
				b = append(b, "AM"...)
			} else {
				b = append(b, "PM"...)
			}
		case 'H':
			b = pad(b, t.Hour(), n)
		case 'k':
			h := t.Hour()
			if h == 0 {
				h = 24
			}
			b = pad(b, h, n)
		case 'K':
			b = pad(b, t.Hour()%12, n)
		case 'h':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			b = pad(b, h, n)
		case 'm':
			b = pad(b, t.Minute(), n)
		case 's':
			b = pad(b, t.Second(), n)
		case 'S':
			frac := strconv.Itoa(1000000000 + t.Nanosecond())[1:]
			b = append(b, frac[:n]...)
		case 'z':
			name, _ := t.Zone()
			b = append(b, name...)
		case 'V':
			b = append(b, zoneID...)
		case 'Z':
			_, off := t.Zone()
			switch {
			case n <= 3:
				b = append(b, offsetText(off, false, false, false)...)
			case n == 4:
				if off == 0 {
					b = append(b, "GMT"...)
				} else {
					b = append(b, "GMT"+offsetText(off, true, false, false)...)
				}
			default:
				b = append(b, offsetText(off, true, true, false)...)
			}
		case 'X', 'x':
			_, off := t.Zone()
			z := tk.letter == 'X'
			switch n {
			case 1:
				b = append(b, offsetText(off, false, z, true)...)
			case 2, 4:
				b = append(b, offsetText(off, false, z, false)...)
			default:
				b = append(b, offsetText(off, true, z, false)...)
			}
		}
	}
	return string(b)
}

// parsed holds the fields a pattern read.
type parsed struct {
	year, month, day, hour, minute, second, nanos int
	pm, hasAMPM, hour12                           bool
	offset                                        int
	hasOffset                                     bool
}

// numWidth is the fixed width of a numeric field, 0 when variable.
func numWidth(tk dtToken) int {
	switch tk.letter {
	case 'y':
		if tk.count == 2 {
			return 2
		}
		return 0
	case 'M', 'L':
		if tk.count == 2 {
			return 2
		}
		if tk.count == 1 {
			return 0
		}
		return -1
	case 'd', 'H', 'k', 'K', 'h', 'm', 's', 'D':
		if tk.count >= 2 {
			return tk.count
		}
		return 0
	case 'S':
		return tk.count
	}
	return -1
}

// parse reads s by the pattern (java.time's strict parsing: a field of n
// >= 2 letters takes exactly n digits, of one letter one or more, the
// whole string must be read, and the date must exist). lenient takes
// fewer digits than the letters too, as Spark's legacy parser does.
func (p *dtPattern) parse(s string, lenient bool) (parsed, bool) {
	r := parsed{year: 1970, month: 1, day: 1}
	pos := 0
	for i, tk := range p.toks {
		if tk.letter == 0 {
			if !strings.HasPrefix(s[pos:], tk.text) {
				return r, false
			}
			pos += len(tk.text)
			continue
		}
		w := numWidth(tk)
		if w >= 0 {
			// digits available
			end := pos
			for end < len(s) && s[end] >= '0' && s[end] <= '9' {
				end++
			}
			avail := end - pos
			take := w
			if w == 0 || lenient {
				// Variable width: leave the digits the adjacent fixed
				// fields after it need.
				reserve := 0
				for _, nx := range p.toks[i+1:] {
					nw := numWidth(nx)
					if nx.letter == 0 || nw <= 0 {
						break
					}
					reserve += nw
				}
				maxTake := 10
				if w > 0 {
					maxTake = w
				}
				take = min(avail-reserve, maxTake)
				if w == 0 && tk.letter == 'y' && tk.count > 1 && take < tk.count && !lenient {
					return r, false
				}
				if take < 1 {
					return r, false
				}
			}
			if avail < take || take == 0 {
				return r, false
			}
			n, _ := strconv.Atoi(s[pos : pos+take])
			digits := s[pos : pos+take]
			pos += take
			switch tk.letter {
			case 'y':
				if tk.count == 2 && !lenient {
					n += 2000
				}
				r.year = n
			case 'M', 'L':
				r.month = n
			case 'd':
				r.day = n
			case 'D':
				// day of year: resolved below with the year
				r.day, r.month = n, 0
			case 'H':
				r.hour = n
			case 'k':
				r.hour = n % 24
			case 'K', 'h':
				r.hour, r.hour12 = n, true
			case 'm':
				r.minute = n
			case 's':
				r.second = n
			case 'S':
				f := (digits + "000000000")[:9]
				r.nanos, _ = strconv.Atoi(f)
			}
			continue
		}
		switch tk.letter {
		case 'M', 'L':
			ok := false
			for m, name := range monthShort {
				full := time.Month(m + 1).String()
				if tk.count >= 4 && strings.HasPrefix(s[pos:], full) {
					r.month, pos, ok = m+1, pos+len(full), true
					break
				}
				if tk.count == 3 && strings.HasPrefix(s[pos:], name) {
					r.month, pos, ok = m+1, pos+3, true
					break
				}
			}
			if !ok {
				return r, false
			}
		case 'a':
			switch {
			case strings.HasPrefix(s[pos:], "AM"):
				r.hasAMPM = true
			case strings.HasPrefix(s[pos:], "PM"):
				r.hasAMPM, r.pm = true, true
			default:
				return r, false
			}
			pos += 2
		case 'G':
			if !strings.HasPrefix(s[pos:], "AD") {
				return r, false
			}
			pos += 2
		case 'X', 'x', 'Z':
			if tk.letter == 'X' && strings.HasPrefix(s[pos:], "Z") {
				pos++
				r.hasOffset = true
				continue
			}
			off, n, ok := parseOffset(s[pos:])
			if !ok {
				return r, false
			}
			r.offset, r.hasOffset = off, true
			pos += n
		default:
			return r, false
		}
	}
	if pos != len(s) {
		return r, false
	}
	if r.hour12 {
		if r.hour < 0 || r.hour > 12 {
			return r, false
		}
		if r.pm {
			r.hour = r.hour%12 + 12
		} else if r.hour == 12 {
			r.hour = 0
		}
	}
	if r.month == 0 { // day of year
		if r.day < 1 || r.day > 365+boolInt(daysInMonth(r.year, 2) == 29, 1, 0) {
			return r, false
		}
		t := time.Date(r.year, 1, r.day, 0, 0, 0, 0, time.UTC)
		r.month, r.day = int(t.Month()), t.Day()
	}
	if r.month < 1 || r.month > 12 || r.day < 1 || r.day > daysInMonth(r.year, r.month) ||
		r.hour > 23 || r.minute > 59 || r.second > 59 {
		return r, false
	}
	return r, true
}

func parseOffset(s string) (int, int, bool) {
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') {
		return 0, 0, false
	}
	sign := 1
	if s[0] == '-' {
		sign = -1
	}
	h, err := strconv.Atoi(s[1:3])
	if err != nil {
		return 0, 0, false
	}
	n, m := 3, 0
	rest := s[3:]
	if strings.HasPrefix(rest, ":") {
		rest = rest[1:]
		n++
	}
	if len(rest) >= 2 && rest[0] >= '0' && rest[0] <= '9' && rest[1] >= '0' && rest[1] <= '9' {
		m, _ = strconv.Atoi(rest[:2])
		n += 2
	} else if n == 4 {
		return 0, 0, false
	}
	return sign * (h*3600 + m*60), n, true
}

// micros converts parsed fields to microseconds since the epoch (in loc
// unless the string had an offset).
func (r parsed) micros(loc *time.Location) int64 {
	if r.hasOffset {
		loc = time.FixedZone("", r.offset)
	}
	return time.Date(r.year, time.Month(r.month), r.day, r.hour, r.minute, r.second, r.nanos, loc).UnixMicro()
}

// upgradeError is the SparkUpgradeException Spark 3.5 raises (with
// spark.sql.legacy.timeParserPolicy EXCEPTION, its default) when the new
// parser fails on a string the legacy parser would read.
func upgradeError(s string) string {
	return fmt.Sprintf("[INCONSISTENT_BEHAVIOR_CROSS_VERSION.PARSE_DATETIME_BY_NEW_PARSER] You may get a different result due to the upgrading to Spark >= 3.0: Fail to parse '%s' in the new parser. You can set \"spark.sql.legacy.timeParserPolicy\" to \"LEGACY\" to restore the behavior before Spark 3.0, or set to \"CORRECTED\" and treat it as an invalid datetime string.", s)
}
