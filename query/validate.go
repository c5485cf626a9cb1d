package query

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/row"
)

// Problem is one thing wrong with a spec: the field (a path such as
// "aggregate.measures[0].fn"), the offending value as written (empty when
// the field is missing) and the rule with how to fix it.
type Problem struct {
	Field string
	Value string
	Rule  string
	// Line and Column locate a problem inside the field's text (the SQL of
	// sql:), 1-based; zero when it is about the field as a whole. Value is
	// then the construct as written.
	Line, Column int
}

// String renders the problem as `field: "value" rule` (or `field: rule` when
// there is no value). Numbers, booleans and JSON values are not quoted. A
// problem inside the field's text renders as `field:line:column: construct:
// rule`.
func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s: %s", p.Field, p.Line, p.Column, p.Value, p.Rule)
	}
	if p.Value == "" {
		return p.Field + ": " + p.Rule
	}
	return p.Field + ": " + quoteValue(p.Value) + " " + p.Rule
}

func quoteValue(v string) string {
	if _, err := strconv.ParseFloat(v, 64); err == nil || v == "true" || v == "false" ||
		strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
		return v
	}
	return strconv.Quote(v)
}

// ValidationError lists every problem Validate found, in the order of the
// spec's fields.
type ValidationError struct {
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Measure function names users write for an exact distinct count
// (refused, with a pointer to approx_count_distinct), normalized by normalizeFn.
var distinctFns = map[string]bool{
	"countdistinct": true, "distinct": true, "distinctcount": true,
	"exactcountdistinct": true, "count(distinct)": true, "uniq": true, "uniqexact": true,
}

func normalizeFn(fn string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(fn)), "_", "")
}

var validFns = []string{FnCount, FnSum, FnMin, FnMax, FnAvg, FnApproxCountDistinct}

const (
	maxShufflePartitions = 1024
	// Partitioning value for the Parquet sink: the UTC date of window_start.
	PartitionByWindowDate = "window_date"
)

var (
	nameRE = regexp.MustCompile(`^[a-z0-9-]+$`)
)

// Sources is what Validate needs of the source kinds, which live in
// packages that import this one; package source/catalog implements it
// (catalog.Validate is Validate with it).
type Sources interface {
	// Check returns the problems of the spec's source section: exactly one
	// kind set, and that kind's own options (each kind checks them once).
	Check(s *Spec) []Problem
	// FixedSchema returns the name of src's kind and the columns it emits
	// itself (the generator's), nil when the query declares the schema.
	FixedSchema(src *Source) (kind string, schema []Field)
	// MetaColumn returns the type of the record metadata column name (a
	// schema entry's from:) for src, or the rule it breaks.
	MetaColumn(src *Source, name string) (typ, problem string)
}

// Validate checks the whole spec once, with defaults applied (WithDefaults),
// and returns nil or a *ValidationError listing every problem: required
// fields, value ranges, columns that do not exist or have the wrong type,
// the source's own options (through src), and the combinations Spark's
// unsupported-operation checker refuses (docs/semantics.md, "Watermark" and
// "Emit and evict per output mode": a negative delay, append without a
// watermarked window, complete without an aggregation, the Parquet sink
// outside append, exact distinct counts, a bad watermark column). It does
// not change s.
func (s *Spec) Validate(src Sources) error {
	d := s.WithDefaults()
	v := &validator{s: &d, src: src, cols: map[string]row.Kind{}, badCols: map[string]bool{}}
	v.name()
	v.source()
	v.watermark()
	v.dedup()
	v.join()
	v.aggregate()
	v.sql()
	v.outputMode()
	v.sink()
	v.rest()
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.problems}
}

type validator struct {
	s        *Spec
	src      Sources
	problems []Problem
	// cols holds the well-formed schema columns; badCols the declared ones
	// whose type is wrong (already reported, so not reported again).
	cols     map[string]row.Kind
	colOrder []string
	badCols  map[string]bool
	// wmOK is set when the watermark names an existing timestamp column.
	wmOK bool
	// plan is the compiled sql: (nil without sql: or when it is refused).
	plan *Plan
}

func (v *validator) add(field, value, rule string, args ...any) {
	v.problems = append(v.problems, Problem{Field: field, Value: value, Rule: fmt.Sprintf(rule, args...)})
}

// column resolves a column a field refers to. A missing column is reported
// unless the schema itself is missing (already reported); a column whose
// declared type is wrong resolves silently to false.
func (v *validator) column(field, name string) (row.Kind, bool) {
	if k, ok := v.cols[name]; ok {
		return k, true
	}
	if v.badCols[name] || (len(v.cols) == 0 && len(v.badCols) == 0) {
		return row.Null, false
	}
	v.add(field, name, "is not a column of source.schema (columns: %s)", strings.Join(v.colOrder, ", "))
	return row.Null, false
}

// firstTimestamp names a timestamp column for examples in messages.
func (v *validator) firstTimestamp() string {
	for _, c := range v.colOrder {
		if v.cols[c] == row.Timestamp {
			return c
		}
	}
	return "event_time"
}

func dur(d Duration) string { return time.Duration(d).String() }

func (v *validator) name() {
	s := v.s
	switch {
	case s.Name == "":
		v.add("name", "", "required: lowercase letters, digits and dashes, e.g. course-activity-tile")
	case !nameRE.MatchString(s.Name):
		v.add("name", s.Name, "must match [a-z0-9-]+ (lowercase letters, digits and dashes)")
	}
	if s.Environment != Lab && s.Environment != Production {
		v.add("environment", string(s.Environment), "is not an environment: use lab or production")
	}
}

func (v *validator) source() {
	v.problems = append(v.problems, v.src.Check(v.s)...)
	if src := v.s.Source; src.Format != DefaultFormat {
		v.add("source.format", src.Format, "is not supported: Sluice reads JSON lines only; use format json")
	}
	v.schema()
}

func (v *validator) schema() {
	src := v.s.Source
	if len(src.Schema) == 0 {
		v.add("source.schema", "", "required: list the columns, e.g. - {name: event_time, type: timestamp}")
		return
	}
	kind, fixed := v.src.FixedSchema(&src)
	var gen map[string]string
	if fixed != nil {
		gen = map[string]string{}
		for _, f := range fixed {
			gen[f.Name] = f.Type
		}
	}
	declared := map[string]int{}
	for i, f := range src.Schema {
		p := fmt.Sprintf("source.schema[%d]", i)
		if f.Name == "" {
			v.add(p+".name", "", "required")
			continue
		}
		if j, dup := declared[f.Name]; dup {
			v.add(p+".name", f.Name, "is declared twice (also source.schema[%d]): column names must be unique", j)
			continue
		}
		declared[f.Name] = i
		k, ok := row.ParseKind(f.Type)
		if !ok {
			if f.Type == "" {
				v.add(p+".type", "", "required for column %s: string, long, double, boolean or timestamp", f.Name)
			} else {
				v.add(p+".type", f.Type, "is not a type: use string, long, double, boolean or timestamp%s", typeHint(f.Type))
			}
			v.badCols[f.Name] = true
			continue
		}
		if f.From != "" {
			want, problem := v.src.MetaColumn(&src, f.From)
			switch {
			case problem != "":
				v.add(p+".from", f.From, "%s", problem)
				v.badCols[f.Name] = true
				continue
			case want != f.Type:
				v.add(p+".type", f.Type, "does not match from %s: that column is a %s", f.From, want)
				v.badCols[f.Name] = true
				continue
			}
		}
		if gen != nil {
			gt, isGen := gen[f.Name]
			switch {
			case !isGen:
				v.add(p+".name", f.Name, "is not a column the %s emits: it emits %s (omit source.schema to take them all)", kind, columnNames(fixed))
				v.badCols[f.Name] = true
				continue
			case gt != f.Type:
				v.add(p+".type", f.Type, "does not match the %s: it emits %s as %s", kind, f.Name, gt)
				v.badCols[f.Name] = true
				continue
			}
		}
		v.cols[f.Name] = k
		v.colOrder = append(v.colOrder, f.Name)
	}
}

func typeHint(t string) string {
	switch strings.ToLower(t) {
	case "int", "integer", "bigint", "int64", "int32", "smallint", "tinyint":
		return " (for whole numbers write long)"
	case "float", "real", "float64", "decimal":
		return " (for floating point write double)"
	case "bool":
		return " (write boolean)"
	case "datetime", "date", "timestamp_ntz", "timestamp_ltz":
		return " (write timestamp)"
	case "varchar", "text", "str":
		return " (write string)"
	}
	return ""
}

// watermark checks the watermark: a column that exists and is a timestamp,
// declared once, and a delay that is not negative.
func (v *validator) watermark() {
	w := v.s.Watermark
	if w == nil {
		return
	}
	if w.Column == "" {
		v.add("watermark.column", "", "required: the event-time column, e.g. %s", v.firstTimestamp())
	} else if k, ok := v.column("watermark.column", w.Column); ok {
		if k != row.Timestamp {
			v.add("watermark.column", w.Column, "is a %s column: a watermark needs a timestamp column", k)
		} else {
			v.wmOK = true
		}
	}
	if w.Delay < 0 {
		v.add("watermark.delay", dur(w.Delay), "is negative: the delay is how late a row may arrive; use 0s or more")
	}
	if w.MaxEventTimeAhead < 0 {
		v.add("watermark.maxEventTimeAhead", dur(w.MaxEventTimeAhead), "is negative: it is how far ahead of the batch's processing time an event time may be; omit it to keep every row")
	}
	if w.MaxJump < 0 {
		v.add("watermark.maxJump", dur(w.MaxJump), "is negative: it is how far the watermark may move in one batch before it is reported; omit it for the default %s", dur(DefaultWatermarkMaxJump))
	}
}

func (v *validator) aggregate() {
	a := v.s.Aggregate
	if a == nil {
		return
	}
	if w := a.Window; w != nil {
		v.window(w)
	}
	if w := a.SessionWindow; w != nil {
		v.sessionWindow(a, w)
	}
	groups := map[string]bool{}
	for i, g := range a.GroupBy {
		p := fmt.Sprintf("aggregate.groupBy[%d]", i)
		switch {
		case g == "":
			v.add(p, "", "required: a column name")
		case groups[g]:
			v.add(p, g, "is listed twice")
		case a.Window != nil && (g == WindowStart || g == WindowEnd):
			v.add(p, g, "clashes with the window's output column %s: rename the source column", g)
		case a.SessionWindow != nil && (g == SessionWindowStart || g == SessionWindowEnd):
			v.add(p, g, "clashes with the session window's output column %s: rename the source column", g)
		default:
			v.column(p, g)
		}
		groups[g] = true
	}
	if len(a.Measures) == 0 {
		v.add("aggregate.measures", "", "required: at least one measure, e.g. - {name: event_count, fn: count}")
	}
	names := map[string]int{}
	for i, m := range a.Measures {
		v.measure(i, m, groups, names)
	}
}

func (v *validator) window(w *Window) {
	const p = "aggregate.window."
	if w.Column == "" {
		v.add(p+"column", "", "required: the event-time column, e.g. %s", v.firstTimestamp())
	} else if k, ok := v.column(p+"column", w.Column); ok && k != row.Timestamp {
		v.add(p+"column", w.Column, "is a %s column: a window needs a timestamp column", k)
	}
	sizeOK := true
	if w.Size <= 0 {
		v.add(p+"size", dur(w.Size), "must be > 0, e.g. 5m")
		sizeOK = false
	} else if !wholeMicros(w.Size) {
		v.add(p+"size", dur(w.Size), "is not a whole number of microseconds: timestamps have microsecond precision")
		sizeOK = false
	}
	slideOK := true
	if w.Slide != 0 {
		switch {
		case w.Slide < 0:
			v.add(p+"slide", dur(w.Slide), "must be > 0 (omit it for a tumbling window)")
			slideOK = false
		case !wholeMicros(w.Slide):
			v.add(p+"slide", dur(w.Slide), "is not a whole number of microseconds: timestamps have microsecond precision")
			slideOK = false
		case sizeOK && w.Slide > w.Size:
			v.add(p+"slide", dur(w.Slide), "is longer than the size %s: slide must be <= size, or rows would fall between windows", dur(w.Size))
			slideOK = false
		case sizeOK && eventtime.WindowsPerRow(w.Size.Micros(), w.Slide.Micros()) > eventtime.MaxWindowsPerRow:
			v.add(p+"slide", dur(w.Slide), "puts each row into %d windows (size %s / slide %s): at most %d are allowed; use a longer slide or a shorter size",
				eventtime.WindowsPerRow(w.Size.Micros(), w.Slide.Micros()), dur(w.Size), dur(w.Slide), eventtime.MaxWindowsPerRow)
			slideOK = false
		}
	}
	switch {
	case w.StartTime < 0:
		v.add(p+"startTime", dur(w.StartTime), "must be >= 0 (the offset of window starts from the epoch)")
	case !wholeMicros(w.StartTime):
		v.add(p+"startTime", dur(w.StartTime), "is not a whole number of microseconds: timestamps have microsecond precision")
	case sizeOK && slideOK && w.StartTime >= w.SlideOrSize():
		v.add(p+"startTime", dur(w.StartTime), "must be less than the slide %s", dur(w.SlideOrSize()))
	}
}

// sessionWindow checks a session window: a timestamp column, a gap > 0 in
// whole microseconds, not beside a time window, and a groupBy column
// (Spark refuses a global aggregation with a session window on a stream).
func (v *validator) sessionWindow(a *Aggregate, w *SessionWindow) {
	const p = "aggregate.sessionWindow."
	if a.Window != nil {
		v.add("aggregate.sessionWindow", "", "is set with aggregate.window: an aggregation groups by one window; keep either window or sessionWindow")
	}
	if w.Column == "" {
		v.add(p+"column", "", "required: the event-time column, e.g. %s", v.firstTimestamp())
	} else if k, ok := v.column(p+"column", w.Column); ok && k != row.Timestamp {
		v.add(p+"column", w.Column, "is a %s column: a session window needs a timestamp column", k)
	}
	switch {
	case w.Gap <= 0: // spark-differences.md#session-gap-not-positive
		v.add(p+"gap", dur(w.Gap), "must be > 0, e.g. 10m: a session closes after this long without an event (Spark drops every row of a session window whose gap is not positive)")
	case !wholeMicros(w.Gap):
		v.add(p+"gap", dur(w.Gap), "is not a whole number of microseconds: timestamps have microsecond precision")
	}
	if len(a.GroupBy) == 0 {
		v.add("aggregate.groupBy", "", "required with aggregate.sessionWindow: sessions are kept per key, e.g. groupBy: [user_id] "+
			"(Spark refuses a global aggregation with a session window on a stream)")
	}
}

// dedup checks dedup: key columns of source.schema, listed once, and a
// watermark (Spark refuses dropDuplicatesWithinWatermark without one: its
// state would never be evicted).
func (v *validator) dedup() {
	d := v.s.Dedup
	if d == nil {
		return
	}
	if len(d.Keys) == 0 {
		v.add("dedup.keys", "", "required: the columns that identify a duplicate, e.g. [event_id]")
	}
	seen := map[string]bool{}
	for i, k := range d.Keys {
		p := fmt.Sprintf("dedup.keys[%d]", i)
		switch {
		case k == "":
			v.add(p, "", "required: a column name")
		case seen[k]:
			v.add(p, k, "is listed twice")
		default:
			v.column(p, k)
		}
		seen[k] = true
	}
	if v.s.SQL != "" {
		v.add("dedup", strings.Join(d.Keys, ", "), "is set with sql: write the deduplication in the SQL, as FROM %s(TABLE(%s), %s)",
			DedupFunction, v.s.ViewName(), strings.Join(d.Keys, ", "))
	}
	if v.s.Aggregate != nil {
		v.add("dedup", strings.Join(d.Keys, ", "), "%s", ReasonDedupAggregate)
	}
	if v.s.Watermark == nil {
		c := v.firstTimestamp()
		v.add("watermark", "", "required with dedup, as Spark's dropDuplicatesWithinWatermark requires it: a key is kept for the watermark delay "+
			"after its row's event time, then forgotten; add watermark {column: %s, delay: ...}", c)
	}
}

func wholeMicros(d Duration) bool { return time.Duration(d)%time.Microsecond == 0 }

func (v *validator) measure(i int, m Measure, groups map[string]bool, names map[string]int) {
	p := fmt.Sprintf("aggregate.measures[%d]", i)
	switch {
	case m.Name == "":
		v.add(p+".name", "", "required: the output column name")
	case names[m.Name] > 0:
		v.add(p+".name", m.Name, "is used twice (also aggregate.measures[%d]): output columns need distinct names", names[m.Name]-1)
	case groups[m.Name]:
		v.add(p+".name", m.Name, "clashes with groupBy column %s: output columns need distinct names", m.Name)
	case m.Name == WindowStart || m.Name == WindowEnd:
		v.add(p+".name", m.Name, "is reserved for the window's output column: choose another name")
	case m.Name == SessionWindowStart || m.Name == SessionWindowEnd:
		v.add(p+".name", m.Name, "is reserved for the session window's output column: choose another name")
	}
	if m.Name != "" && names[m.Name] == 0 {
		names[m.Name] = i + 1
	}
	fnOK := false
	switch {
	case m.Fn == "":
		v.add(p+".fn", "", "required: one of %s", strings.Join(validFns, ", "))
	case slices.Contains(validFns, m.Fn):
		fnOK = true
	case distinctFns[normalizeFn(m.Fn)]:
		v.add(p+".fn", m.Fn, "is refused: an exact distinct count keeps every distinct value in state for as long as the window is open; "+
			"use fn approx_count_distinct (HyperLogLog, about 1%% error) and label the measure as approximate")
	default:
		hint := ""
		for _, f := range validFns {
			if normalizeFn(f) == normalizeFn(m.Fn) {
				hint = fmt.Sprintf(" (did you mean %s?)", f)
			}
		}
		v.add(p+".fn", m.Fn, "is not a measure function: use one of %s%s", strings.Join(validFns, ", "), hint)
	}
	if m.Column == "" {
		if fnOK && m.Fn != FnCount {
			v.add(p+".column", "", "required: %s needs a column", m.Fn)
		}
		return
	}
	k, ok := v.column(p+".column", m.Column)
	if !ok || !fnOK {
		return
	}
	if (m.Fn == FnSum || m.Fn == FnAvg) && k != row.Long && k != row.Double {
		v.add(p+".column", m.Column, "is a %s column: %s needs a long or double column", k, m.Fn)
	}
}

// outputMode checks the output mode: append needs a watermarked event-time
// grouping, complete needs an aggregation, the Parquet sink takes append only.
func (v *validator) outputMode() {
	s := v.s
	switch s.OutputMode {
	case "":
		v.add("outputMode", "", "required: append, update or complete")
		return
	case Append, Update, Complete:
	default:
		v.add("outputMode", string(s.OutputMode), "is not an output mode: use append, update or complete")
		return
	}
	a := s.Aggregate
	if s.OutputMode == Complete && a == nil && s.SQL == "" {
		v.add("outputMode", "complete", "needs an aggregation: complete mode re-emits the whole result table of an aggregate after every batch; "+
			"without one use outputMode append")
	}
	if s.OutputMode == Append && a != nil {
		v.appendNeedsWatermark(a)
	}
	if s.OutputMode == Update && a != nil && a.SessionWindow != nil {
		v.add("outputMode", "update", "with aggregate.sessionWindow is refused, as Spark refuses it (\"Update output mode not supported for session window\"): "+
			"a session that grows or merges with another would need its earlier rows retracted from the sink; "+
			"use outputMode append (each session written once, when the watermark passes its end) or complete")
	}
	if s.Sink.Parquet != nil {
		switch s.OutputMode {
		case Update:
			v.add("outputMode", "update", "with sink.parquet: the Parquet file sink takes append only; use outputMode append or the jsonBatches sink")
		case Complete:
			v.add("outputMode", "complete", "with sink.parquet: the Parquet file sink takes append only, and complete mode can never drop state; "+
				"use outputMode append with a watermark, or the jsonBatches sink")
		}
	}
}

// appendNeedsWatermark: in append mode an aggregation
// emits a group only once the watermark passes its event-time bound, so the
// grouping must use a watermarked event-time column (the window's column,
// or a raw column in groupBy when there is no window).
func (v *validator) appendNeedsWatermark(a *Aggregate) {
	wm := v.s.Watermark
	const howto = "or use outputMode update"
	if w := a.SessionWindow; w != nil && a.Window == nil {
		if w.Column == "" {
			return // reported by sessionWindow()
		}
		switch {
		case wm == nil:
			v.add("watermark", "", "outputMode append with a session window needs a watermark on its column %s (a session is written once the watermark passes its end): "+
				"add watermark {column: %s, delay: ...} or use outputMode complete", w.Column, w.Column)
		case v.wmOK && wm.Column != w.Column && v.cols[w.Column] == row.Timestamp:
			v.add("watermark.column", wm.Column, "is not the session window column %s: outputMode append with a session window needs a watermark on its column; "+
				"watermark %s instead or use outputMode complete", w.Column, w.Column)
		}
		return
	}
	if w := a.Window; w != nil {
		if w.Column == "" {
			return // reported by window()
		}
		switch {
		case wm == nil:
			v.add("watermark", "", "outputMode append with an aggregation needs a watermark on the window column %s: "+
				"add watermark {column: %s, delay: ...} %s", w.Column, w.Column, howto)
		case v.wmOK && wm.Column != w.Column && v.cols[w.Column] == row.Timestamp:
			v.add("watermark.column", wm.Column, "is not the window column %s: outputMode append with an aggregation needs a watermark on the window column; "+
				"watermark %s instead %s", w.Column, w.Column, howto)
		}
		return
	}
	var tsGroups []string
	inGroups := false
	for _, g := range a.GroupBy {
		if v.cols[g] == row.Timestamp {
			tsGroups = append(tsGroups, g)
		}
		if wm != nil && g == wm.Column {
			inGroups = true
		}
	}
	switch {
	case wm == nil && len(tsGroups) > 0:
		v.add("watermark", "", "outputMode append with an aggregation needs a watermark on an event-time column of groupBy (%s): "+
			"add watermark {column: %s, delay: ...} %s", strings.Join(tsGroups, ", "), tsGroups[0], howto)
	case wm == nil:
		c := v.firstTimestamp()
		v.add("aggregate", "", "outputMode append with an aggregation needs an event-time window (or an event-time column in groupBy) with a watermark on it: "+
			"add window {column: %s, size: ...} and watermark {column: %s, delay: ...}, or use outputMode update or complete", c, c)
	case v.wmOK && !inGroups:
		v.add("watermark.column", wm.Column, "is not used by the aggregation: outputMode append with an aggregation needs a watermark on its event-time column; "+
			"add window {column: %s, size: ...} or put %s in groupBy, %s", wm.Column, wm.Column, howto)
	}
}

func (v *validator) sink() {
	k := v.s.Sink
	var set []string
	if k.Parquet != nil {
		set = append(set, "parquet")
	}
	if k.JSONBatches != nil {
		set = append(set, "jsonBatches")
	}
	if k.Console != nil {
		set = append(set, "console")
	}
	switch len(set) {
	case 0:
		v.add("sink", "", "required: set exactly one of parquet, jsonBatches or console")
	case 1:
	default:
		v.add("sink", strings.Join(set, ", "), "sets more than one sink: set exactly one of parquet, jsonBatches or console")
	}
	if pq := k.Parquet; pq != nil {
		if pq.Path == "" {
			v.add("sink.parquet.path", "", "required: the directory (or URI) the Parquet files go to")
		}
		a := v.s.Aggregate
		switch {
		case pq.PartitionBy == "":
		case pq.PartitionBy == PartitionByWindowDate && v.s.SQL != "":
			if v.plan != nil && !hasWindowStart(v.plan) {
				v.add("sink.parquet.partitionBy", pq.PartitionBy, "needs an output column window_start of type timestamp: window_date is its UTC date; select window.start AS window_start")
			}
		case pq.PartitionBy == PartitionByWindowDate:
			if a == nil || a.Window == nil {
				v.add("sink.parquet.partitionBy", pq.PartitionBy, "needs aggregate.window: window_date is the UTC date of window_start")
			}
		case a != nil && slices.Contains(a.GroupBy, pq.PartitionBy):
			v.add("sink.parquet.partitionBy", pq.PartitionBy, "is a grouping key: never partition a streaming file sink by the grouping key "+
				"(every batch would write a small file per key); use partitionBy window_date or leave it empty")
		default:
			v.add("sink.parquet.partitionBy", pq.PartitionBy, "is not supported: use window_date or leave it empty")
		}
		if pq.CompactClosedDates && pq.PartitionBy != PartitionByWindowDate {
			v.add("sink.parquet.compactClosedDates", "true", "needs partitionBy window_date: it compacts window_date= partitions")
		}
		if pq.CompactInterval < 0 {
			v.add("sink.parquet.compactInterval", strconv.Itoa(pq.CompactInterval), "must be >= 1 (0 or absent means the default, 10)")
		}
	}
	if jb := k.JSONBatches; jb != nil && jb.Path == "" {
		v.add("sink.jsonBatches.path", "", "required: the directory (or URI) batch_id=N/ directories go to")
	}
}

func (v *validator) stateBudget() {
	b := v.s.StateBudget
	if b == nil {
		return
	}
	if v.s.Aggregate == nil && v.s.Dedup == nil && (v.s.SQL == "" || (v.plan != nil && v.plan.Aggregate == nil && v.plan.Dedup == nil)) {
		v.add("stateBudget", b.String(), "the query keeps no state (it has no aggregate and no dedup): remove stateBudget")
	}
	if b.MaxRows < 0 {
		v.add("stateBudget.maxRows", strconv.FormatInt(b.MaxRows, 10), "must not be negative (0: no bound on rows)")
	}
	if b.MaxBytes < 0 {
		v.add("stateBudget.maxBytes", strconv.FormatInt(b.MaxBytes, 10), "must not be negative (0: no bound on bytes)")
	}
	if b.MaxRows <= 0 && b.MaxBytes <= 0 {
		v.add("stateBudget", b.String(), "sets no bound: set maxRows, maxBytes or both above 0")
	}
	switch b.OnExceed {
	case "", OnExceedFlag, OnExceedStop:
	default:
		v.add("stateBudget.onExceed", b.OnExceed, "must be flag (mark the query and keep running) or stop (stop after the batch that passed the budget commits)")
	}
}

func (v *validator) rest() {
	v.stateBudget()
	s := v.s
	if s.CheckpointLocation == "" {
		v.add("checkpointLocation", "", "required: a directory (or URI) on durable storage, one per query")
	}
	t := s.Trigger
	var set []string
	if t.ProcessingTime != 0 {
		set = append(set, "processingTime")
	}
	if t.AvailableNow {
		set = append(set, "availableNow")
	}
	if t.Once {
		set = append(set, "once")
	}
	if len(set) > 1 {
		v.add("trigger", strings.Join(set, ", "), "sets more than one trigger: set one of processingTime, availableNow or once")
	}
	if t.ProcessingTime < 0 {
		v.add("trigger.processingTime", dur(t.ProcessingTime), "must not be negative")
	}
	if t.NoDataBatchesAtOnce {
		switch {
		case t.ProcessingTime <= 0:
			v.add("trigger.noDataBatchesAtOnce", "true", "needs trigger.processingTime: without an interval the next batch runs at once anyway")
		case !s.NoDataBatches():
			v.add("trigger.noDataBatchesAtOnce", "true", "needs noDataMicroBatches: it says when no-data batches run, and they are off")
		}
	}
	if t.Continuous != 0 {
		v.add("trigger.continuous", dur(t.Continuous), "is refused: continuous processing is not supported: Sluice runs micro-batches; "+
			"continuous mode is at-least-once and experimental in Spark; use processingTime")
	}
	if s.ShufflePartitions < 1 || s.ShufflePartitions > maxShufflePartitions {
		v.add("shufflePartitions", strconv.Itoa(s.ShufflePartitions), "must be between 1 and %d (0 means the default, %d)", maxShufflePartitions, DefaultShufflePartitions)
	}
	switch s.StateStore {
	case "memory", "pebble":
	case "rocksdb", "RocksDB":
		v.add("stateStore", s.StateStore, "is not a state store: use memory or pebble (pebble is the on-disk store, Sluice's RocksDB)")
	default:
		v.add("stateStore", s.StateStore, "is not a state store: use memory or pebble")
	}
	if s.SessionTimeZone != "" {
		if _, err := row.LoadZone(s.SessionTimeZone); err != nil {
			v.add("sessionTimeZone", s.SessionTimeZone, "is not a time zone Spark's spark.sql.session.timeZone takes: use a region such as Europe/Paris or America/Los_Angeles, or an offset such as +01:00 or UTC")
		}
	}
	if s.MinBatchesToRetain < 1 {
		v.add("minBatchesToRetain", strconv.Itoa(s.MinBatchesToRetain), "must be >= 1 (0 means the default, %d)", DefaultMinBatchesToRetain)
	}
	if s.SnapshotInterval < 1 {
		v.add("stateSnapshotInterval", strconv.Itoa(s.SnapshotInterval), "must be >= 1 (0 means the default, %d)", DefaultSnapshotInterval)
	}
}

// columnNames lists the names of fs as "a, b and c".
func columnNames(fs []Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// sql checks sql: (exactly one of aggregate and sql) by compiling it into
// its plan; its problems carry their line and column in the SQL.
func (v *validator) sql() {
	s := v.s
	if s.SQL == "" {
		return
	}
	if s.Aggregate != nil {
		v.add("sql", "", "is set with aggregate: set exactly one of them (the aggregate in SQL is GROUP BY ... with the measures in the SELECT list)")
		return
	}
	if len(v.cols) == 0 || len(v.badCols) > 0 {
		return // the schema's problems are reported; the SQL cannot be resolved against it
	}
	p, problems := analyzeSQL(s)
	v.problems = append(v.problems, problems...)
	v.plan = p
}

func hasWindowStart(p *Plan) bool {
	for _, c := range p.Output {
		if c.Name == WindowStart && c.Type.Kind == row.Timestamp {
			return true
		}
	}
	return false
}
