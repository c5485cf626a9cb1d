package generator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Defaults for unset options.
const (
	DefaultCourses   = 100
	DefaultStartTime = "2026-01-01T00:00:00Z"
	// Lessons is how many lessons each course has (l-0 … l-19).
	Lessons = 20
	// LateDelay is how much older than its place in the stream a late row's
	// event time is (on top of its jitter): far beyond any usual watermark
	// delay, so the row is dropped once the watermark has moved past it.
	LateDelay = 2 * time.Hour
	// SplitRows is the most rows one split holds.
	SplitRows = 25_000
)

// Part is the Record.Part of every generated record; Record.Offset is the
// row number.
const Part = "generator"

// Offset is the generator's position.
type Offset struct {
	// Row is the number of rows planned so far: the next row's index.
	Row int64 `json:"row"`
	// StartedAtMs is the wall-clock start of the query in milliseconds
	// since the epoch; 0 until the first Latest.
	StartedAtMs int64 `json:"startedAtMs"`
}

// Marshal returns the canonical JSON form of o.
func (o Offset) Marshal() source.Offset {
	return fmt.Appendf(nil, `{"row":%d,"startedAtMs":%d}`, o.Row, o.StartedAtMs)
}

// ParseOffset reads an offset written by Marshal.
func ParseOffset(b source.Offset) (Offset, error) {
	var o Offset
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return Offset{}, fmt.Errorf("parse generator offset %s: %w", b, err)
	}
	if o.Row < 0 {
		return Offset{}, fmt.Errorf("parse generator offset %s: negative row", b)
	}
	return o, nil
}

// splitDesc is a Split's Desc: rows [From, To).
type splitDesc struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Validate reports every option that is out of range, naming the field,
// the value and the rule, as a *query.ValidationError. It is the one check
// of these options: the query validator gets the same problems through
// Kind.
func Validate(opts query.GeneratorSource) error {
	if problems := check(opts); len(problems) > 0 {
		return &query.ValidationError{Problems: problems}
	}
	return nil
}

func check(g query.GeneratorSource) []query.Problem {
	const p = "source.generator."
	var problems []query.Problem
	add := func(field, value, rule string) {
		problems = append(problems, query.Problem{Field: p + field, Value: value, Rule: rule})
	}
	if g.RowsPerSecond <= 0 {
		add("rowsPerSecond", strconv.FormatInt(g.RowsPerSecond, 10), "must be > 0")
	}
	if g.Rows < 0 {
		add("rows", strconv.FormatInt(g.Rows, 10), "must be >= 0 (0 means unbounded)")
	}
	if g.Courses < 0 {
		add("courses", strconv.Itoa(g.Courses), "must be >= 0")
	}
	if math.IsNaN(g.LateFraction) || g.LateFraction < 0 || g.LateFraction > 1 {
		add("lateFraction", strconv.FormatFloat(g.LateFraction, 'g', -1, 64), "must be between 0 and 1")
	}
	if g.Jitter < 0 {
		add("jitter", g.Jitter.D().String(), "must not be negative")
	}
	if g.StartTime != "" {
		if _, err := time.Parse(time.RFC3339Nano, g.StartTime); err != nil {
			add("startTime", g.StartTime, "is not an RFC 3339 time, e.g. 2026-01-01T00:00:00Z")
		}
	}
	if g.EventTimePerRow < 0 {
		add("eventTimePerRow", g.EventTimePerRow.D().String(), "must not be negative")
	}
	if g.MaxRowsPerTrigger < 0 {
		add("maxRowsPerTrigger", strconv.FormatInt(g.MaxRowsPerTrigger, 10), "must be >= 0 (0 means no cap)")
	}
	return problems
}

// Source generates course events. It is safe for concurrent use.
type Source struct {
	opts query.GeneratorSource
	err  error // from Validate; every method returns it

	seedKey  uint64
	startUs  int64
	perRowUs int64 // event time per row when set; else derived from the rate
	jitterUs uint64
	lateUs   int64
	courses  float64
	seedText []byte // "e-<seed>-"

	mu sync.Mutex
	// startedAtMs is the clock start this process chose for a query whose
	// offsets carry none yet.
	startedAtMs int64
}

var _ source.Source = (*Source)(nil)

// New returns a generator for opts. Options that fail Validate make every
// method return that error.
func New(opts query.GeneratorSource) *Source {
	s := &Source{opts: opts, err: Validate(opts)}
	start := DefaultStartTime
	if opts.StartTime != "" {
		start = opts.StartTime
	}
	if t, err := time.Parse(time.RFC3339Nano, start); err == nil {
		s.startUs = t.UnixMicro()
	}
	s.seedKey = mix(uint64(opts.Seed) ^ 0x5155_4943_4547_454e)
	s.perRowUs = opts.EventTimePerRow.Micros()
	s.jitterUs = uint64(max(opts.Jitter.Micros(), 0))
	s.lateUs = LateDelay.Microseconds()
	s.courses = DefaultCourses
	if opts.Courses > 0 {
		s.courses = float64(opts.Courses)
	}
	s.seedText = strconv.AppendInt([]byte("e-"), opts.Seed, 10)
	s.seedText = append(s.seedText, '-')
	return s
}

// Initial returns {"row":0,"startedAtMs":0}.
func (s *Source) Initial(ctx context.Context) (source.Offset, error) {
	if s.err != nil {
		return nil, s.err
	}
	return Offset{}.Marshal(), nil
}

// Latest returns all Rows when Rows is set; otherwise the rows due at
// rowsPerSecond since the query's start, which is start's startedAtMs or,
// when that is 0, the first now this Source saw. It returns start itself
// when no row is due beyond it.
func (s *Source) Latest(ctx context.Context, start source.Offset, now time.Time) (source.Offset, error) {
	if s.err != nil {
		return nil, s.err
	}
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	started := st.StartedAtMs
	if started == 0 {
		started = s.clockStart(now)
	}
	var due int64
	if s.opts.Rows > 0 {
		due = s.opts.Rows
	} else {
		elapsed := max(now.UnixMilli()-started, 0)
		rps := s.opts.RowsPerSecond
		due = elapsed/1000*rps + (elapsed%1000)*rps/1000
	}
	if due <= st.Row {
		return clone(start), nil
	}
	return Offset{Row: due, StartedAtMs: started}.Marshal(), nil
}

// clockStart returns the clock start this process uses for offsets that
// have none, fixing it at now the first time.
func (s *Source) clockStart(now time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.startedAtMs == 0 {
		s.startedAtMs = max(now.UnixMilli(), 1)
	}
	return s.startedAtMs
}

// Next returns start plus at most maxRowsPerTrigger rows, no further than
// limit (and Rows), carrying limit's startedAtMs. It returns start when no
// row remains.
func (s *Source) Next(ctx context.Context, start, limit source.Offset) (source.Offset, error) {
	if s.err != nil {
		return nil, s.err
	}
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	lim, err := ParseOffset(limit)
	if err != nil {
		return nil, err
	}
	end := lim.Row
	if s.opts.Rows > 0 {
		end = min(end, s.opts.Rows)
	}
	if c := s.opts.MaxRowsPerTrigger; c > 0 && end-st.Row > c {
		end = st.Row + c
	}
	if end <= st.Row {
		return clone(start), nil
	}
	started := lim.StartedAtMs
	if started == 0 {
		started = st.StartedAtMs
	}
	return Offset{Row: end, StartedAtMs: started}.Marshal(), nil
}

// Splits cuts rows [start.row, end.row) into splits of at most SplitRows.
func (s *Source) Splits(ctx context.Context, start, end source.Offset) ([]source.Split, error) {
	if s.err != nil {
		return nil, s.err
	}
	st, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	en, err := ParseOffset(end)
	if err != nil {
		return nil, err
	}
	var splits []source.Split
	for from := st.Row; from < en.Row; from += SplitRows {
		to := min(from+SplitRows, en.Row)
		splits = append(splits, source.Split{
			ID:   fmt.Sprintf("rows-%d-%d", from, to),
			Desc: fmt.Appendf(nil, `{"from":%d,"to":%d}`, from, to),
		})
	}
	return splits, nil
}

// Read generates the split's rows in order. The record's Value is one JSON
// line (no newline), Part is "generator" and Offset the row number.
func (s *Source) Read(ctx context.Context, split source.Split, fn func(*source.Record) error) error {
	if s.err != nil {
		return s.err
	}
	var d splitDesc
	if err := json.Unmarshal(split.Desc, &d); err != nil || d.From < 0 || d.To < d.From {
		return fmt.Errorf("read generator split %s: bad description %s", split.ID, split.Desc)
	}
	buf := make([]byte, 0, 160)
	rec := source.Record{Part: Part}
	for i := d.From; i < d.To; i++ {
		if (i-d.From)%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("read generator split %s: %w", split.ID, err)
			}
		}
		buf = s.AppendLine(buf[:0], i)
		rec.Value = buf
		rec.Offset = i
		if err := fn(&rec); err != nil {
			return err
		}
	}
	return nil
}

// Close does nothing.
func (s *Source) Close() error { return nil }

// event is row i's content in numbers.
type event struct {
	course, lesson int
	timeMs         int64 // event time, milliseconds since the epoch
}

// row computes row i's content from the seed and i alone.
func (s *Source) row(i int64) event {
	h := mix(s.seedKey + uint64(i)*0x9e3779b97f4a7c15)
	// Course: u³ skews toward low course numbers (c-000 takes about
	// courses^(-1/3) of the rows: 22% of 100).
	u := float64(h>>11) * (1.0 / (1 << 53))
	course := int(u * u * u * s.courses)
	h2 := mix(h ^ 0x6a09e667f3bcc909)
	lesson := int((h2 >> 32) % Lessons)
	var jitter int64
	if s.jitterUs > 0 {
		jitter = int64(mix(h^0x3c6ef372fe94f82b) % (s.jitterUs + 1))
	}
	h4 := mix(h + 0xbb67ae8584caa73b)
	late := float64(h4>>11)*(1.0/(1<<53)) < s.opts.LateFraction

	t := s.startUs + s.offsetUs(i) - jitter
	if late {
		t -= s.lateUs
	}
	return event{course: course, lesson: lesson, timeMs: floorDiv(t, 1000)}
}

// offsetUs is how far row i's event time is from the start, before jitter.
func (s *Source) offsetUs(i int64) int64 {
	if s.perRowUs > 0 {
		return i * s.perRowUs
	}
	rps := s.opts.RowsPerSecond
	return i/rps*1_000_000 + i%rps*1_000_000/rps
}

// Event returns row i's fields as the JSON line has them; the event time
// is in microseconds (a whole number of milliseconds).
func (s *Source) Event(i int64) (eventID, courseID, lessonID string, eventTimeMicros int64) {
	e := s.row(i)
	return string(strconv.AppendInt(append([]byte(nil), s.seedText...), i, 10)),
		string(appendCourse([]byte("c-"), e.course)),
		"l-" + strconv.Itoa(e.lesson),
		e.timeMs * 1000
}

// AppendLine appends row i as one JSON object, without a newline:
// {"event_id":"e-<seed>-<i>","course_id":"c-<kkk>","lesson_id":"l-<m>","event_time":"<RFC 3339 ms>Z"}.
func (s *Source) AppendLine(dst []byte, i int64) []byte {
	e := s.row(i)
	dst = append(dst, `{"event_id":"`...)
	dst = append(dst, s.seedText...)
	dst = strconv.AppendInt(dst, i, 10)
	dst = append(dst, `","course_id":"c-`...)
	dst = appendCourse(dst, e.course)
	dst = append(dst, `","lesson_id":"l-`...)
	dst = strconv.AppendInt(dst, int64(e.lesson), 10)
	dst = append(dst, `","event_time":"`...)
	dst = appendTimeMs(dst, e.timeMs)
	dst = append(dst, `"}`...)
	return dst
}

// appendCourse appends k with at least three digits.
func appendCourse(dst []byte, k int) []byte {
	if k < 100 {
		dst = append(dst, '0')
		if k < 10 {
			dst = append(dst, '0')
		}
	}
	return strconv.AppendInt(dst, int64(k), 10)
}

// appendTimeMs appends ms since the epoch as YYYY-MM-DDTHH:MM:SS.mmmZ.
func appendTimeMs(dst []byte, ms int64) []byte {
	days := floorDiv(ms, 86_400_000)
	rem := ms - days*86_400_000
	y, m, d := civilFromDays(days)
	if y < 0 || y > 9999 {
		return time.UnixMilli(ms).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	}
	sec := rem / 1000
	dst = append4(dst, y)
	dst = append(dst, '-')
	dst = append2(dst, m)
	dst = append(dst, '-')
	dst = append2(dst, d)
	dst = append(dst, 'T')
	dst = append2(dst, int(sec/3600))
	dst = append(dst, ':')
	dst = append2(dst, int(sec/60%60))
	dst = append(dst, ':')
	dst = append2(dst, int(sec%60))
	dst = append(dst, '.')
	msPart := int(rem % 1000)
	dst = append(dst, byte('0'+msPart/100), byte('0'+msPart/10%10), byte('0'+msPart%10))
	return append(dst, 'Z')
}

func append2(dst []byte, v int) []byte { return append(dst, byte('0'+v/10), byte('0'+v%10)) }

func append4(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// date (Howard Hinnant's algorithm).
func civilFromDays(z int64) (year, month, day int) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return int(y), int(m), int(d)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// mix is splitmix64's finalizer.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func clone(b source.Offset) source.Offset { return append(source.Offset(nil), b...) }
