package query

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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
}

// String renders the problem as `field: "value" rule` (or `field: rule` when
// there is no value). Numbers, booleans and JSON values are not quoted.
func (p Problem) String() string {
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
// (SEMANTICS rule 17), normalized by normalizeFn.
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
	nameRE  = regexp.MustCompile(`^[a-z0-9-]+$`)
	topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
)

// Validate checks the whole spec once, with defaults applied (WithDefaults),
// and returns nil or a *ValidationError listing every problem: required
// fields, value ranges, columns that do not exist or have the wrong type,
// and the combinations Spark's unsupported-operation checker refuses
// (SEMANTICS.md rules 4 and 14-18). It does not change s.
func (s *Spec) Validate() error {
	d := s.WithDefaults()
	v := &validator{s: &d, cols: map[string]row.Kind{}, badCols: map[string]bool{}}
	v.name()
	v.source()
	v.watermark()
	v.join()
	v.aggregate()
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
	problems []Problem
	// cols holds the well-formed schema columns; badCols the declared ones
	// whose type is wrong (already reported, so not reported again).
	cols     map[string]row.Kind
	colOrder []string
	badCols  map[string]bool
	// wmOK is set when the watermark names an existing timestamp column.
	wmOK bool
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
	src := v.s.Source
	var set []string
	if src.Kafka != nil {
		set = append(set, "kafka")
	}
	if src.File != nil {
		set = append(set, "file")
	}
	if src.Generator != nil {
		set = append(set, "generator")
	}
	switch len(set) {
	case 0:
		v.add("source", "", "required: set exactly one of kafka, file or generator")
	case 1:
	default:
		v.add("source", strings.Join(set, ", "), "sets more than one source: set exactly one of kafka, file or generator")
	}
	if src.Kafka != nil {
		v.kafka(src.Kafka)
	}
	if f := src.File; f != nil {
		if f.Path == "" {
			v.add("source.file.path", "", "required: the directory (or URI) the JSON-lines files land in")
		}
		if f.MaxFilesPerTrigger < 0 {
			v.add("source.file.maxFilesPerTrigger", strconv.Itoa(f.MaxFilesPerTrigger), "must be >= 0 (0 means no cap)")
		}
		if f.MaxFileAge < 0 {
			v.add("source.file.maxFileAge", f.MaxFileAge.D().String(), "must be positive (default 7d): files older than this, relative to the newest file, are ignored")
		}
		switch {
		case f.FullListingInterval < 0:
			v.add("source.file.fullListingInterval", f.FullListingInterval.D().String(), "must be positive (0, the default, lists the whole directory at every trigger)")
		case f.FullListingInterval > 0 && !(f.LatestFirst && f.MaxFilesPerTrigger > 0) && f.FullListingInterval.D() >= f.FileAge():
			v.add("source.file.fullListingInterval", f.FullListingInterval.D().String(), "must be less than maxFileAge (%s): a late file in an older directory is found only at the next full listing, and must still be within maxFileAge then", f.FileAge())
		}
		switch f.CleanSource {
		case "", CleanSourceOff, CleanSourceDelete:
			if f.SourceArchiveDir != "" {
				v.add("source.file.sourceArchiveDir", f.SourceArchiveDir, "is only used with cleanSource: archive")
			}
		case CleanSourceArchive:
			switch {
			case f.SourceArchiveDir == "":
				v.add("source.file.sourceArchiveDir", "", "required with cleanSource: archive: the directory consumed files are moved to")
			case f.Path != "" && underDir(f.SourceArchiveDir, f.Path):
				v.add("source.file.sourceArchiveDir", f.SourceArchiveDir, "must not be inside source.file.path %q: archived files would be read again", f.Path)
			}
		default:
			v.add("source.file.cleanSource", f.CleanSource, "must be off, delete or archive")
		}
	}
	if src.Generator != nil {
		v.generator(src.Generator)
	}
	if src.Format != DefaultFormat {
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
	var gen map[string]string
	if src.Generator != nil {
		gen = map[string]string{}
		for _, f := range GeneratorSchema() {
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
			want, known := KafkaColumnTypes[f.From]
			switch {
			case !known:
				v.add(p+".from", f.From, "is not a record column: use kafka.key, kafka.topic, kafka.partition, kafka.offset or kafka.timestamp, or omit it to read the JSON value")
				v.badCols[f.Name] = true
				continue
			case src.Kafka == nil:
				v.add(p+".from", f.From, "needs source.kafka: only Kafka records have these columns")
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
				v.add(p+".name", f.Name, "is not a column the generator emits: it emits event_id, course_id, lesson_id and event_time (omit source.schema to take them all)")
				v.badCols[f.Name] = true
				continue
			case gt != f.Type:
				v.add(p+".type", f.Type, "does not match the generator: it emits %s as %s", f.Name, gt)
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

func (v *validator) kafka(k *KafkaSource) {
	const p = "source.kafka."
	if strings.TrimSpace(k.BootstrapServers) == "" {
		v.add(p+"bootstrapServers", "", "required: host:port of the brokers, comma-separated")
	} else {
		for _, b := range strings.Split(k.BootstrapServers, ",") {
			if strings.TrimSpace(b) == "" {
				v.add(p+"bootstrapServers", k.BootstrapServers, "has an empty entry: write host:port[,host:port...]")
				break
			}
		}
	}
	var subs []string
	if k.Subscribe != "" {
		subs = append(subs, "subscribe")
	}
	if k.SubscribePattern != "" {
		subs = append(subs, "subscribePattern")
	}
	if k.Assign != "" {
		subs = append(subs, "assign")
	}
	switch len(subs) {
	case 0:
		v.add("source.kafka", "", "names no topics: set exactly one of subscribe, subscribePattern or assign")
	case 1:
	default:
		v.add("source.kafka", strings.Join(subs, ", "), "sets more than one subscription: set exactly one of subscribe, subscribePattern or assign")
	}
	var topics map[string]bool
	if k.Subscribe != "" {
		topics = map[string]bool{}
		for _, t := range strings.Split(k.Subscribe, ",") {
			t = strings.TrimSpace(t)
			if !topicRE.MatchString(t) {
				v.add(p+"subscribe", k.Subscribe, "has an invalid topic name %q: a topic name is 1-249 of a-z A-Z 0-9 . _ -; separate topics with commas", t)
				continue
			}
			topics[t] = true
		}
	}
	var pattern *regexp.Regexp
	if k.SubscribePattern != "" {
		re, err := regexp.Compile(k.SubscribePattern)
		if err != nil {
			v.add(p+"subscribePattern", k.SubscribePattern, "is not a valid regular expression: %v", err)
		} else {
			pattern = re
		}
	}
	var assigned map[string][]int64
	if k.Assign != "" {
		if err := json.Unmarshal([]byte(k.Assign), &assigned); err != nil || len(assigned) == 0 {
			v.add(p+"assign", k.Assign, `is not a JSON map of topic to partitions, e.g. {"learning.progress":[0,1]}`)
			assigned = nil
		}
		for _, t := range sortedKeysOf(assigned) {
			if !topicRE.MatchString(t) {
				v.add(p+"assign", k.Assign, "has an invalid topic name %q", t)
			}
			for _, part := range assigned[t] {
				if part < 0 || part > math.MaxInt32 {
					v.add(p+"assign", k.Assign, "has partition %d of topic %s: partitions are 0 or more", part, t)
				}
			}
		}
	}
	v.startingOffsets(k, topics, pattern, assigned)
	if k.MaxOffsetsPerTrigger < 0 {
		v.add(p+"maxOffsetsPerTrigger", strconv.FormatInt(k.MaxOffsetsPerTrigger, 10), "must be >= 0 (0 means no cap)")
	}
	if k.MinPartitions < 0 {
		v.add(p+"minPartitions", strconv.Itoa(k.MinPartitions), "must be >= 0 (0 means one task per topic-partition)")
	}
	if k.MinOffsetsPerTask < 0 {
		v.add(p+"minOffsetsPerTask", strconv.FormatInt(k.MinOffsetsPerTask, 10), "must be >= 0 (0 means 65536, 1 one task per topic-partition)")
	}
	for _, name := range sortedKeysOf(k.Options) {
		field := p + kafkaOptionPrefix + name
		switch name {
		case "auto.offset.reset":
			v.add(field, k.Options[name], "is not used: set startingOffsets (it applies only when the checkpoint has no offsets)")
		case "enable.auto.commit":
			v.add(field, k.Options[name], "is not used: the checkpoint is the query's cursor and offsets are never committed to Kafka as one (commitOffsetsToGroup publishes them for display)")
		case "key.deserializer", "value.deserializer":
			v.add(field, k.Options[name], "is not used: records are read as bytes and decoded with source.format and source.schema")
		case "interceptor.classes":
			v.add(field, k.Options[name], "is not supported")
		}
	}
}

func (v *validator) startingOffsets(k *KafkaSource, topics map[string]bool, pattern *regexp.Regexp, assigned map[string][]int64) {
	const field = "source.kafka.startingOffsets"
	so := k.StartingOffsets
	if so == "" || so == "earliest" || so == "latest" {
		return
	}
	var m map[string]map[string]int64
	if err := json.Unmarshal([]byte(so), &m); err != nil || len(m) == 0 {
		v.add(field, so, `is not earliest, latest or a JSON map of topic to partition to offset, e.g. {"learning.progress":{"0":42}}`)
		return
	}
	for _, t := range sortedKeysOf(m) {
		switch {
		case topics != nil && !topics[t]:
			v.add(field, so, "names topic %s, which subscribe does not list", t)
		case pattern != nil && !pattern.MatchString(t):
			v.add(field, so, "names topic %s, which subscribePattern does not match", t)
		case assigned != nil && assigned[t] == nil:
			v.add(field, so, "names topic %s, which assign does not list", t)
		}
		for _, ps := range sortedKeysOf(m[t]) {
			part, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || part < 0 {
				v.add(field, so, "has partition %q of topic %s: partitions are whole numbers, 0 or more", ps, t)
				continue
			}
			if off := m[t][ps]; off < -2 {
				v.add(field, so, "has offset %d for %s-%s: offsets are 0 or more, or -2 (earliest) or -1 (latest)", off, t, ps)
			}
		}
	}
}

func (v *validator) generator(g *GeneratorSource) {
	const p = "source.generator."
	if g.RowsPerSecond <= 0 {
		v.add(p+"rowsPerSecond", strconv.FormatInt(g.RowsPerSecond, 10), "must be > 0")
	}
	if g.Rows < 0 {
		v.add(p+"rows", strconv.FormatInt(g.Rows, 10), "must be >= 0 (0 means unbounded)")
	}
	if g.Courses < 0 {
		v.add(p+"courses", strconv.Itoa(g.Courses), "must be >= 0")
	}
	if math.IsNaN(g.LateFraction) || g.LateFraction < 0 || g.LateFraction > 1 {
		v.add(p+"lateFraction", strconv.FormatFloat(g.LateFraction, 'g', -1, 64), "must be between 0 and 1")
	}
	if g.Jitter < 0 {
		v.add(p+"jitter", dur(g.Jitter), "must not be negative")
	}
	if g.StartTime != "" {
		if _, err := time.Parse(time.RFC3339Nano, g.StartTime); err != nil {
			v.add(p+"startTime", g.StartTime, "is not an RFC 3339 time, e.g. 2026-01-01T00:00:00Z")
		}
	}
	if g.EventTimePerRow < 0 {
		v.add(p+"eventTimePerRow", dur(g.EventTimePerRow), "must not be negative")
	}
	if g.MaxRowsPerTrigger < 0 {
		v.add(p+"maxRowsPerTrigger", strconv.FormatInt(g.MaxRowsPerTrigger, 10), "must be >= 0 (0 means no cap)")
	}
}

// watermark checks SEMANTICS rules 4 and 18.
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

// outputMode checks the output mode and SEMANTICS rules 14-16.
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
	if s.OutputMode == Complete && a == nil {
		v.add("outputMode", "complete", "needs an aggregation: complete mode re-emits the whole result table of an aggregate after every batch; "+
			"without one use outputMode append")
	}
	if s.OutputMode == Append && a != nil {
		v.appendNeedsWatermark(a)
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

// appendNeedsWatermark is SEMANTICS rule 14: in append mode an aggregation
// emits a group only once the watermark passes its event-time bound, so the
// grouping must use a watermarked event-time column (the window's column,
// or a raw column in groupBy when there is no window).
func (v *validator) appendNeedsWatermark(a *Aggregate) {
	wm := v.s.Watermark
	const howto = "or use outputMode update"
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
	if v.s.Aggregate == nil {
		v.add("stateBudget", b.String(), "the query keeps no state (it has no aggregate): remove stateBudget")
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

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// underDir reports whether path is dir or inside it, comparing cleaned
// slash paths (URIs compare as strings).
func underDir(path, dir string) bool {
	p := strings.TrimSuffix(strings.TrimPrefix(path, "file://"), "/") + "/"
	d := strings.TrimSuffix(strings.TrimPrefix(dir, "file://"), "/") + "/"
	if !strings.Contains(p, "://") {
		p = filepath.ToSlash(filepath.Clean(p)) + "/"
		d = filepath.ToSlash(filepath.Clean(d)) + "/"
	}
	return strings.HasPrefix(p, d)
}
