package row

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// timestampSeeds are timestamp strings of the shapes the fuzz targets
// below start from: RFC 3339 in UTC and with offsets, Spark's other
// shapes, and near misses.
var timestampSeeds = []string{
	"2026-01-01T00:00:01.123Z", "2026-03-02T09:01:00Z", "2026-03-02T09:01:00.123456789+05:30",
	"2026-03-02T09:01:00-08:00", "2026-03-02 09:01:00", "2026-03-02T09:01:00", "2026-03-02",
	"2026-03-02 09:01:00.5+01:00", "1969-12-31T23:59:59.9999999Z", "0001-01-01T00:00:00Z",
	"9999-12-31T23:59:59.999999999Z", "2024-02-29T12:00:00Z", "2026-02-29T12:00:00Z",
	"2026-04-31T00:00:00Z", "2026-03-02T24:00:00Z", "2026-03-02T09:60:00Z", "2026-03-02T09:01:60Z",
	"2026-03-02T09:01:00+18:00", "2026-03-02T09:01:00+18:30", "2026-03-02T09:01:00-23:59",
	"2026-03-02T09:01:00.Z", "2026-03-02T09:01:00,5Z", "2026-03-02t09:01:00z", "2026-3-2T9:1:0Z",
	"2026-03-02T09:01:00 Europe/Paris", "2026-03-02T09:01:00+0530", "+2026-03-02T09:01:00Z",
	"2026-03-02T09:01:00.1234567891234Z", " 2026-03-02T09:01:00Z ", "2026-03-02T09:01Z",
}

// agreedShape is where Spark's CAST and time.Parse must give the same
// instant: yyyy-MM-dd, optionally with (T| )HH:mm:ss, a '.' fraction and
// Z or ±HH:mm. Groups: separator, fraction, zone, offset hours and
// minutes.
var agreedShape = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(?:([T ])\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-](\d{2}):(\d{2}))?)?$`)

// FuzzTimestampAgreesWithTimeParse: on the shapes both read (see
// agreedShape), ParseTimestamp accepts a string exactly when time.Parse
// does (a string without a zone in UTC) and gives its instant truncated
// to microseconds; an offset beyond ±18:00 or with 60 minutes, which
// time.Parse takes, Spark refuses (java.time's ZoneOffset).
func FuzzTimestampAgreesWithTimeParse(f *testing.F) {
	for _, s := range timestampSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseTimestamp([]byte(s)) // never panics, whatever s is
		m := agreedShape.FindStringSubmatch(s)
		if m == nil {
			return
		}
		sep, zone := m[1], m[3]
		layout := "2006-01-02"
		if sep != "" {
			layout += sep + "15:04:05"
			if zone != "" {
				layout += "Z07:00"
			}
		}
		tm, err := time.Parse(layout, s)
		if zone != "" && zone != "Z" {
			h, _ := strconv.Atoi(m[4])
			mi, _ := strconv.Atoi(m[5])
			if err == nil && (h > 18 || h == 18 && mi > 0 || mi > 59) {
				if ok {
					t.Fatalf("ParseTimestamp(%q) = %d: an offset beyond ±18:00 or with minutes past 59 must be refused", s, got)
				}
				return
			}
		}
		if (err == nil) != ok {
			t.Fatalf("ParseTimestamp(%q) ok=%v, time.Parse: %v", s, ok, err)
		}
		if want := tm.Unix()*1_000_000 + int64(tm.Nanosecond()/1000); ok && got != want {
			t.Fatalf("ParseTimestamp(%q) = %d (%s), time.Parse gives %d (%s)", s, got, FormatTimestamp(got), want, tm.Format(time.RFC3339Nano))
		}
	})
}

// FuzzFastTimestampAgreesWithStringToTimestamp: the timestamp fast path,
// whenever it answers, gives stringToTimestamp's instant (the port of
// Spark's rules), in UTC, a fixed session zone and a region one.
func FuzzFastTimestampAgreesWithStringToTimestamp(f *testing.F) {
	for _, s := range timestampSeeds {
		f.Add(s)
	}
	paris, err := LoadZone("Europe/Paris")
	if err != nil {
		f.Fatal(err)
	}
	fixed, err := LoadZone("-03:30")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		for _, session := range []*Zone{nil, fixed, paris} {
			fast, ok := fastTimestamp(b, session)
			if !ok {
				continue
			}
			slow, st := stringToTimestamp(b, session, nil)
			if st != tsOK || slow != fast {
				t.Fatalf("%q (session %v): fast path %d, stringToTimestamp %d (status %d)", s, session, fast, slow, st)
			}
		}
	})
}
