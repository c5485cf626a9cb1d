package query

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/row"
)

// Spec is a streaming query as submitted: declarative data that any process
// can run without shipping code. Field names follow Spark's option names.
// Build one from Go or load it with Parse; call Validate before running it.
type Spec struct {
	Name        string      `json:"name"`
	Environment Environment `json:"environment,omitempty"`
	Source      Source      `json:"source"`
	Watermark   *Watermark  `json:"watermark,omitempty"`
	Dedup       *Dedup      `json:"dedup,omitempty"`
	Aggregate   *Aggregate  `json:"aggregate,omitempty"`
	// SQL is the query as one Spark SQL SELECT over the source's view
	// (Source.View), instead of Aggregate; see docs/sql.md.
	SQL                string     `json:"sql,omitempty"`
	OutputMode         OutputMode `json:"outputMode"`
	NoDataMicroBatches *bool      `json:"noDataMicroBatches,omitempty"`
	Sink               Sink       `json:"sink"`
	CheckpointLocation string     `json:"checkpointLocation"`
	Trigger            Trigger    `json:"trigger,omitempty"`
	// ShufflePartitions is the number of state partitions; frozen in the
	// checkpoint. Zero means DefaultShufflePartitions.
	ShufflePartitions int `json:"shufflePartitions,omitempty"`
	// SessionTimeZone is Spark's spark.sql.session.timeZone: the zone of
	// timestamp strings without one (a region such as Europe/Paris, or an
	// offset such as +01:00). Empty means UTC, where Spark takes the JVM's
	// zone (docs/spark-differences.md#session-time-zone-default).
	SessionTimeZone string `json:"sessionTimeZone,omitempty"`
	// StateStore is the state provider: "memory" (default) or "pebble";
	// frozen in the checkpoint.
	StateStore string `json:"stateStore,omitempty"`
	// BadRecordsPath receives malformed records; empty means
	// <checkpoint>/bad_records.
	BadRecordsPath string `json:"badRecordsPath,omitempty"`
	// MinBatchesToRetain is how many committed versions of log and state are
	// kept; zero means DefaultMinBatchesToRetain (Spark's default, 100).
	MinBatchesToRetain int `json:"minBatchesToRetain,omitempty"`
	// SnapshotInterval is how many deltas a state partition writes between
	// snapshots; zero means DefaultSnapshotInterval (Spark's
	// minDeltasForSnapshot, 10).
	SnapshotInterval int `json:"stateSnapshotInterval,omitempty"`
	// StateBudget bounds the query's state: past it, the batch still
	// commits and the query is flagged (onExceed: flag) or stopped after
	// that commit (onExceed: stop).
	StateBudget *StateBudget `json:"stateBudget,omitempty"`
	// Join, if set, joins each event row to a static dimension before the
	// aggregation (see join.go).
	Join *Join `json:"join,omitempty"`
}

// StateBudget is a bound on a stateful query's state, checked after each
// batch commits against the state operators' numRowsTotal and
// memoryUsedBytes.
type StateBudget struct {
	// MaxRows bounds the state rows (0: no bound on rows).
	MaxRows int64 `json:"maxRows,omitempty"`
	// MaxBytes bounds the state's memory in bytes (0: no bound on bytes).
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// OnExceed is OnExceedFlag (default) or OnExceedStop.
	OnExceed string `json:"onExceed,omitempty"`
}

// StateBudget.OnExceed values.
const (
	OnExceedFlag = "flag"
	OnExceedStop = "stop"
)

// Stops reports whether passing the budget stops the query.
func (b *StateBudget) Stops() bool { return b != nil && b.OnExceed == OnExceedStop }

// Exceeded reports whether rows or bytes pass the budget.
func (b *StateBudget) Exceeded(rows, bytes int64) bool {
	return b != nil && ((b.MaxRows > 0 && rows > b.MaxRows) || (b.MaxBytes > 0 && bytes > b.MaxBytes))
}

// String is "maxRows N, maxBytes B, onExceed stop" (the bounds set).
func (b *StateBudget) String() string {
	var parts []string
	if b.MaxRows > 0 {
		parts = append(parts, fmt.Sprintf("maxRows %d", b.MaxRows))
	}
	if b.MaxBytes > 0 {
		parts = append(parts, fmt.Sprintf("maxBytes %d", b.MaxBytes))
	}
	on := b.OnExceed
	if on == "" {
		on = OnExceedFlag
	}
	return strings.Join(append(parts, "onExceed "+on), ", ")
}

// Defaults applied by Spec.WithDefaults.
const (
	DefaultShufflePartitions  = 8
	DefaultMinBatchesToRetain = 100
	DefaultSnapshotInterval   = 10
	DefaultStateStore         = "memory"
	DefaultFormat             = "json"
)

// Environment marks a query as a lab or production query.
type Environment string

const (
	Lab        Environment = "lab"
	Production Environment = "production"
)

// OutputMode is Spark's output mode.
type OutputMode string

const (
	Append   OutputMode = "append"
	Update   OutputMode = "update"
	Complete OutputMode = "complete"
)

// Source: exactly one of Kafka, File, Generator.
type Source struct {
	Kafka     *KafkaSource     `json:"kafka,omitempty"`
	File      *FileSource      `json:"file,omitempty"`
	Generator *GeneratorSource `json:"generator,omitempty"`
	Format    string           `json:"format,omitempty"`
	Schema    []Field          `json:"schema,omitempty"`
	// View names the source in the SQL of sql: (Spark's
	// createOrReplaceTempView); empty means DefaultView.
	View string `json:"view,omitempty"`
}

// DefaultView is the source's view name when source.view is not set.
const DefaultView = "events"

// ViewName returns source.view, or DefaultView.
func (s *Spec) ViewName() string {
	if s.Source.View == "" {
		return DefaultView
	}
	return s.Source.View
}

// Field is one column of the declared schema. Nullable defaults to true.
// From says where the value comes from: empty for a key of the record's
// JSON value, or the name of one of the record's metadata columns its
// source kind offers (source.Kind.MetaColumns: kafka.key, kafka.topic,
// kafka.partition, kafka.offset, kafka.timestamp, as Spark's Kafka source
// exposes them).
type Field struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable *bool  `json:"nullable,omitempty"`
	From     string `json:"from,omitempty"`
}

// IsNullable reports the field's nullability (default true).
func (f Field) IsNullable() bool { return f.Nullable == nil || *f.Nullable }

// KafkaSource holds Spark's Kafka source options.
type KafkaSource struct {
	BootstrapServers string `json:"bootstrapServers"`
	Subscribe        string `json:"subscribe,omitempty"`
	SubscribePattern string `json:"subscribePattern,omitempty"`
	// Assign is a JSON map of topic to partitions, as in Spark.
	Assign string `json:"assign,omitempty"`
	// StartingOffsets is "earliest", "latest" or a JSON map
	// topic -> partition -> offset (-2 earliest, -1 latest).
	StartingOffsets      string `json:"startingOffsets,omitempty"`
	FailOnDataLoss       *bool  `json:"failOnDataLoss,omitempty"`
	MaxOffsetsPerTrigger int64  `json:"maxOffsetsPerTrigger,omitempty"`
	MinPartitions        int    `json:"minPartitions,omitempty"`
	// MinOffsetsPerTask is how many offsets a read task should carry at
	// least: partitions with fewer offsets in a batch share a task (and
	// one fetch per broker). Zero means 65536; 1 gives one task per
	// partition, as Spark does.
	MinOffsetsPerTask    int64  `json:"minOffsetsPerTask,omitempty"`
	CommitOffsetsToGroup string `json:"commitOffsetsToGroup,omitempty"`
	// Options holds the "kafka."-prefixed client options, prefix removed.
	Options map[string]string `json:"options,omitempty"`
}

// FailsOnDataLoss reports failOnDataLoss (default true).
func (k KafkaSource) FailsOnDataLoss() bool { return k.FailOnDataLoss == nil || *k.FailOnDataLoss }

// FileSource reads JSON-lines files from a directory: every file not yet
// taken, oldest modification time first (Spark's file source rules).
type FileSource struct {
	Path               string `json:"path"`
	MaxFilesPerTrigger int    `json:"maxFilesPerTrigger,omitempty"`
	// LatestFirst takes the newest files first (useful with a cap and a
	// backlog).
	LatestFirst bool `json:"latestFirst,omitempty"`
	// MaxFileAge: a file older than this, relative to the newest file
	// seen, is ignored (except in the first batch); it also bounds the
	// set of names kept in the checkpoint. Zero means 7 days. Ignored
	// when latestFirst is set with maxFilesPerTrigger, as in Spark.
	MaxFileAge Duration `json:"maxFileAge,omitempty"`
	// CleanSource is off (default), delete or archive: what happens to a
	// batch's files once it has committed.
	CleanSource string `json:"cleanSource,omitempty"`
	// SourceArchiveDir receives archived files (cleanSource: archive),
	// under their path relative to the source directory.
	SourceArchiveDir string `json:"sourceArchiveDir,omitempty"`
	// FullListingInterval, when set, lists the whole directory only this
	// often; triggers between list only the keys from the directory of
	// the newest file taken onwards. Zero (default) lists the whole
	// directory at every trigger.
	FullListingInterval Duration `json:"fullListingInterval,omitempty"`
	// MinPartitions is about how many read tasks a batch's files are cut
	// into (byte ranges of at least 4 MiB, at most 128 MiB); zero means 16.
	MinPartitions int `json:"minPartitions,omitempty"`
}

// DefaultMaxFileAge is Spark's maxFileAge default.
const DefaultMaxFileAge = 7 * 24 * time.Hour

// FileAge returns maxFileAge, or its default.
func (f FileSource) FileAge() time.Duration {
	if f.MaxFileAge <= 0 {
		return DefaultMaxFileAge
	}
	return f.MaxFileAge.D()
}

// CleanSource values.
const (
	CleanSourceOff     = "off"
	CleanSourceDelete  = "delete"
	CleanSourceArchive = "archive"
)

// GeneratorSource produces synthetic course events, deterministic from Seed.
type GeneratorSource struct {
	RowsPerSecond int64 `json:"rowsPerSecond"`
	// Rows bounds the total number of rows; zero means unbounded.
	Rows    int64 `json:"rows,omitempty"`
	Courses int   `json:"courses,omitempty"`
	// LateFraction of the events get an event time older than the current
	// watermark delay would accept.
	LateFraction float64  `json:"lateFraction,omitempty"`
	Jitter       Duration `json:"jitter,omitempty"`
	Seed         int64    `json:"seed,omitempty"`
	// StartTime is the event time of the first row (RFC 3339); default
	// 2026-01-01T00:00:00Z.
	StartTime string `json:"startTime,omitempty"`
	// EventTimePerRow is how far event time advances per row; default
	// 1s/rowsPerSecond (event time follows wall time).
	EventTimePerRow Duration `json:"eventTimePerRow,omitempty"`
	// MaxRowsPerTrigger caps a batch; zero means no cap.
	MaxRowsPerTrigger int64 `json:"maxRowsPerTrigger,omitempty"`
}

// Watermark declares event-time lateness: rows older than
// max(event_time) - Delay are late.
type Watermark struct {
	Column string   `json:"column"`
	Delay  Duration `json:"delay"`
	// MaxEventTimeAhead, when set, sets aside as malformed every row whose
	// event time is more than this ahead of its batch's processing time, so
	// one bad clock cannot move the watermark past every later row. Zero
	// (the default, as in Spark) keeps every row.
	MaxEventTimeAhead Duration `json:"maxEventTimeAhead,omitempty"`
	// MaxJump: a batch that moves the watermark by more than this is
	// logged and counted in its progress (numWatermarkJumps). Zero means
	// DefaultWatermarkMaxJump; a negative value is refused.
	MaxJump Duration `json:"maxJump,omitempty"`
}

// DefaultWatermarkMaxJump is watermark.maxJump's default: a day.
const DefaultWatermarkMaxJump = Duration(24 * time.Hour)

// MaxJumpOrDefault returns maxJump, or its default when unset.
func (w Watermark) MaxJumpOrDefault() Duration {
	if w.MaxJump == 0 {
		return DefaultWatermarkMaxJump
	}
	return w.MaxJump
}

// Dedup is Spark's dropDuplicatesWithinWatermark(keys), applied to the
// source rows before the join and the aggregate (docs/semantics.md,
// "Deduplication within the watermark"): a row whose keys were seen within the watermark delay is dropped.
// It needs a watermark.
type Dedup struct {
	Keys []string `json:"keys"`
}

// Aggregate is a grouped aggregation, optionally over an event-time window
// or a session window (at most one of them).
type Aggregate struct {
	Window *Window `json:"window,omitempty"`
	// SessionWindow groups by Spark's session_window(column, gap).
	SessionWindow *SessionWindow `json:"sessionWindow,omitempty"`
	GroupBy       []string       `json:"groupBy,omitempty"`
	Measures      []Measure      `json:"measures,omitempty"`
}

// Window is Spark's window(column, size, slide, startTime).
type Window struct {
	Column    string   `json:"column"`
	Size      Duration `json:"size"`
	Slide     Duration `json:"slide,omitempty"`
	StartTime Duration `json:"startTime,omitempty"`
}

// SessionWindow is Spark's session_window(column, gapDuration) with a
// constant gap: a row opens [t, t+gap); sessions of a key that overlap or
// touch merge (docs/semantics.md, "Session windows").
type SessionWindow struct {
	Column string   `json:"column"`
	Gap    Duration `json:"gap"`
}

// SlideOrSize returns the slide, or the size for a tumbling window.
func (w Window) SlideOrSize() Duration {
	if w.Slide == 0 {
		return w.Size
	}
	return w.Slide
}

// Measure is one aggregate output column.
type Measure struct {
	Name   string `json:"name"`
	Fn     string `json:"fn"`
	Column string `json:"column,omitempty"`
}

// Measure functions.
const (
	FnCount               = "count"
	FnSum                 = "sum"
	FnMin                 = "min"
	FnMax                 = "max"
	FnAvg                 = "avg"
	FnApproxCountDistinct = "approx_count_distinct"
)

// Sink: exactly one of Parquet, JSONBatches, Console.
type Sink struct {
	Parquet     *ParquetSink     `json:"parquet,omitempty"`
	JSONBatches *JSONBatchesSink `json:"jsonBatches,omitempty"`
	Console     *ConsoleSink     `json:"console,omitempty"`
}

// ParquetSink is the exactly-once file sink (append only).
type ParquetSink struct {
	Path        string `json:"path"`
	PartitionBy string `json:"partitionBy,omitempty"`
	// CompactInterval is how many batches make one compacted sink log
	// entry (Spark's spark.sql.streaming.fileSink.log.compactInterval);
	// zero means 10.
	CompactInterval int `json:"compactInterval,omitempty"`
	// CompactClosedDates makes the driver rewrite each window_date=
	// partition into few files once all its windows are emitted, in the
	// background (what driver compact does by hand).
	CompactClosedDates bool `json:"compactClosedDates,omitempty"`
}

// JSONBatchesSink is the idempotent per-batch directory writer.
type JSONBatchesSink struct {
	Path string `json:"path"`
}

// ConsoleSink prints rows for labs.
type ConsoleSink struct{}

// Trigger: one of ProcessingTime, AvailableNow, Once. A zero Trigger runs
// batches back to back (Spark's default trigger). Continuous is parsed only
// so it can be refused with a reason.
type Trigger struct {
	ProcessingTime Duration `json:"processingTime,omitempty"`
	AvailableNow   bool     `json:"availableNow,omitempty"`
	Once           bool     `json:"once,omitempty"`
	Continuous     Duration `json:"continuous,omitempty"`
	// NoDataBatchesAtOnce runs the no-data batch a commit makes due (the
	// watermark rose) at once instead of at the next processingTime
	// trigger: closed windows are written a trigger sooner. Off by
	// default (Spark waits for the trigger); see docs/query.md.
	NoDataBatchesAtOnce bool `json:"noDataBatchesAtOnce,omitempty"`
}

// BadRecordsDir is where batch's malformed records go: badRecordsPath, or
// <checkpointLocation>/bad_records when it is empty, then batch_id=N/.
func (s *Spec) BadRecordsDir(batch ids.BatchID) string {
	base := s.BadRecordsPath
	if base == "" {
		base = strings.TrimSuffix(s.CheckpointLocation, "/") + "/bad_records"
	}
	return fmt.Sprintf("%s/batch_id=%d/", strings.TrimSuffix(base, "/"), batch)
}

// NoDataBatches reports noDataMicroBatches (default true).
func (s *Spec) NoDataBatches() bool { return s.NoDataMicroBatches == nil || *s.NoDataMicroBatches }

// WithDefaults returns a copy of s with defaults filled in.
func (s Spec) WithDefaults() Spec {
	if s.ShufflePartitions == 0 {
		s.ShufflePartitions = DefaultShufflePartitions
	}
	if s.StateStore == "" {
		s.StateStore = DefaultStateStore
	}
	if s.MinBatchesToRetain == 0 {
		s.MinBatchesToRetain = DefaultMinBatchesToRetain
	}
	if s.SnapshotInterval == 0 {
		s.SnapshotInterval = DefaultSnapshotInterval
	}
	if s.Source.Format == "" {
		s.Source.Format = DefaultFormat
	}
	if s.Source.Generator != nil && len(s.Source.Schema) == 0 {
		s.Source.Schema = GeneratorSchema()
	}
	if s.Environment == "" {
		s.Environment = Lab
	}
	return s
}

// Duration is a time.Duration that reads Go style ("10s", "5m") or Spark
// style ("10 minutes", "1 hour", "30 seconds"), and writes Go style.
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Micros returns the duration in microseconds.
func (d Duration) Micros() int64 { return time.Duration(d).Microseconds() }

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n json.Number
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration must be a string like \"10s\" or \"10 minutes\": %s", b)
		}
		return fmt.Errorf("duration %s has no unit: write \"%ss\" or \"%s seconds\"", n, n, n)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

var sparkUnits = map[string]time.Duration{
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"second": time.Second, "seconds": time.Second,
	"minute": time.Minute, "minutes": time.Minute,
	"hour": time.Hour, "hours": time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour,
	"week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseDuration reads "10s", "1h30m", "10 minutes", "1 hour 30 minutes" or
// "interval 10 minutes".
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if t == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if d, err := time.ParseDuration(t); err == nil {
		return d, nil
	}
	if n, ok := strings.CutSuffix(t, "d"); ok { // Spark's "7d"
		if days, err := strconv.ParseInt(n, 10, 64); err == nil && days >= 0 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	fields := strings.Fields(strings.TrimPrefix(t, "interval "))
	if len(fields) == 0 || len(fields)%2 != 0 {
		return 0, fmt.Errorf("duration %q: want Go style (\"10m\") or Spark style (\"10 minutes\")", s)
	}
	var total time.Duration
	for i := 0; i < len(fields); i += 2 {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %q is not a whole number", s, fields[i])
		}
		unit, ok := sparkUnits[fields[i+1]]
		if !ok {
			return 0, fmt.Errorf("duration %q: unknown unit %q", s, fields[i+1])
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

// SessionZone returns the zone of SessionTimeZone (row.UTC when it is
// empty). Call it on a validated spec: an invalid zone gives row.UTC.
func (s *Spec) SessionZone() *row.Zone {
	if s.SessionTimeZone == "" {
		return row.UTC
	}
	z, err := row.LoadZone(s.SessionTimeZone)
	if err != nil {
		return row.UTC
	}
	return z
}
