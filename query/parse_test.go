package query

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const tileYAML = `
name: course-activity-tile
source:
  kafka:
    bootstrapServers: kafka:9092
    subscribe: learning.progress
    startingOffsets: earliest
    failOnDataLoss: true
    maxOffsetsPerTrigger: 500000
    minPartitions: 8
  format: json
  schema:
    - {name: event_id,   type: string,    nullable: false}
    - {name: course_id,  type: string,    nullable: false}
    - {name: lesson_id,  type: string}
    - {name: event_time, type: timestamp, nullable: false}
watermark: {column: event_time, delay: 10m}
aggregate:
  window: {column: event_time, size: 5m}
  groupBy: [course_id]
  measures: [{name: event_count, fn: count}]
outputMode: append
sink:
  parquet: {path: s3://warehouse/course_activity_tile, partitionBy: window_date}
checkpointLocation: s3://checkpoints/prod/course-activity-tile/
trigger: {processingTime: 1m}
shufflePartitions: 8
`

const tileJSON = `{
	"name": "course-activity-tile",
	"source": {
		"kafka": {
			"bootstrapServers": "kafka:9092",
			"subscribe": "learning.progress",
			"startingOffsets": "earliest",
			"failOnDataLoss": true,
			"maxOffsetsPerTrigger": 500000,
			"minPartitions": 8
		},
		"format": "json",
		"schema": [
			{"name": "event_id", "type": "string", "nullable": false},
			{"name": "course_id", "type": "string", "nullable": false},
			{"name": "lesson_id", "type": "string"},
			{"name": "event_time", "type": "timestamp", "nullable": false}
		]
	},
	"watermark": {"column": "event_time", "delay": "10 minutes"},
	"aggregate": {
		"window": {"column": "event_time", "size": "5 minutes"},
		"groupBy": ["course_id"],
		"measures": [{"name": "event_count", "fn": "count"}]
	},
	"outputMode": "append",
	"sink": {"parquet": {"path": "s3://warehouse/course_activity_tile", "partitionBy": "window_date"}},
	"checkpointLocation": "s3://checkpoints/prod/course-activity-tile/",
	"trigger": {"processingTime": "1m"},
	"shufflePartitions": 8
}`

// tileSpec is the tile built from Go, the oracle for the parsers.
func tileSpec() Spec {
	f, t := false, true
	return Spec{
		Name: "course-activity-tile",
		Source: Source{
			Kafka: &KafkaSource{
				BootstrapServers:     "kafka:9092",
				Subscribe:            "learning.progress",
				StartingOffsets:      "earliest",
				FailOnDataLoss:       &t,
				MaxOffsetsPerTrigger: 500000,
				MinPartitions:        8,
			},
			Format: "json",
			Schema: []Field{
				{Name: "event_id", Type: "string", Nullable: &f},
				{Name: "course_id", Type: "string", Nullable: &f},
				{Name: "lesson_id", Type: "string"},
				{Name: "event_time", Type: "timestamp", Nullable: &f},
			},
		},
		Watermark: &Watermark{Column: "event_time", Delay: Duration(10 * time.Minute)},
		Aggregate: &Aggregate{
			Window:   &Window{Column: "event_time", Size: Duration(5 * time.Minute)},
			GroupBy:  []string{"course_id"},
			Measures: []Measure{{Name: "event_count", Fn: FnCount}},
		},
		OutputMode:         Append,
		Sink:               Sink{Parquet: &ParquetSink{Path: "s3://warehouse/course_activity_tile", PartitionBy: "window_date"}},
		CheckpointLocation: "s3://checkpoints/prod/course-activity-tile/",
		Trigger:            Trigger{ProcessingTime: Duration(time.Minute)},
		ShufflePartitions:  8,
	}
}

func TestParseYAMLAndJSONGiveTheSameSpec(t *testing.T) {
	want := tileSpec()
	for name, doc := range map[string]string{"yaml": tileYAML, "json": tileJSON} {
		got, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got\n%+v\nwant\n%+v", name, mustMarshal(t, got), mustMarshal(t, want))
		}
	}
}

func TestParseReadsBackWhatMarshalWrites(t *testing.T) {
	want := tileSpec()
	want.Source.Kafka.Options = map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
	want.Source.Kafka.StartingOffsets = `{"learning.progress":{"0":42}}`
	want.Aggregate.Window.Slide = Duration(time.Minute)
	js, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(js)
	if err != nil {
		t.Fatalf("parse %s: %v", js, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the spec:\n got %s\nwant %s", mustMarshal(t, got), mustMarshal(t, want))
	}
}

func TestParseNamesUnknownFields(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []string
	}{
		// encoding/json alone would match this key case-insensitively.
		{"name: a\noutputmode: append\n", []string{`unknown field "outputmode"`, `did you mean "outputMode"`}},
		{"name: a\nwatermark: {column: t, dealy: 1s}\n", []string{`unknown field "dealy" in watermark`, `did you mean "delay"`}},
		{"name: a\naggregate: {measures: [{name: n1, fn: count, col: x}]}\n", []string{`unknown field "col" in aggregate.measures[0]`}},
		{`{"name": "a", "sink": {"parquet": {"path": "/x", "partition": "window_date"}}}`, []string{`unknown field "partition" in sink.parquet`, `did you mean "partitionBy"`}},
		{"source:\n  kafka: {subscribe: t, bootstrap.servers: k:9092}\n", []string{`unknown field "bootstrap.servers" in source.kafka`, `kafka.bootstrap.servers`}},
		{"zzz: 1\nyyy: 2\n", []string{`unknown field "yyy"`, `unknown field "zzz"`}},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil {
			t.Errorf("%q: parsed, want an error", tc.doc)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not contain %q", tc.doc, err, w)
			}
		}
	}
}

func TestParseRefusesDuplicateKeys(t *testing.T) {
	for _, doc := range []string{
		"name: a\nname: b\n",
		`{"name": "a", "watermark": {"column": "t", "column": "u"}}`,
	} {
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "already set") && !strings.Contains(err.Error(), "given twice") {
			t.Errorf("%q: got %v, want a duplicate-key error", doc, err)
		}
	}
	_, err := Parse([]byte(`{"name": "a", "watermark": {"column": "t", "column": "u"}}`))
	if err == nil || !strings.Contains(err.Error(), `key "column" is given twice in watermark`) {
		t.Errorf("got %v, want the key and where it is", err)
	}
}

func TestParseCollectsKafkaClientOptions(t *testing.T) {
	s, err := Parse([]byte(`
source:
  kafka:
    kafka.bootstrap.servers: broker-0:9093,broker-1:9093
    subscribe: learning.progress
    kafka.security.protocol: SASL_SSL
    kafka.sasl.mechanism: SCRAM-SHA-512
    kafka.sasl.jaas.config: 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    kafka.session.timeout.ms: 30000
    kafka.enable.idempotence: true
`))
	if err != nil {
		t.Fatal(err)
	}
	k := s.Source.Kafka
	if k.BootstrapServers != "broker-0:9093,broker-1:9093" {
		t.Errorf("kafka.bootstrap.servers should fill BootstrapServers, got %q", k.BootstrapServers)
	}
	want := map[string]string{
		"security.protocol":  "SASL_SSL",
		"sasl.mechanism":     "SCRAM-SHA-512",
		"sasl.jaas.config":   `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`,
		"session.timeout.ms": "30000",
		"enable.idempotence": "true",
	}
	if !reflect.DeepEqual(k.Options, want) {
		t.Errorf("options:\n got %v\nwant %v", k.Options, want)
	}
}

func TestParseRefusesConflictingBootstrapServers(t *testing.T) {
	_, err := Parse([]byte("source:\n  kafka: {bootstrapServers: a:1, kafka.bootstrap.servers: b:1}\n"))
	if err == nil || !strings.Contains(err.Error(), "bootstrap servers given twice") {
		t.Fatalf("got %v, want a conflict error", err)
	}
}

func TestParseRefusesStructuredKafkaOption(t *testing.T) {
	_, err := Parse([]byte("source:\n  kafka: {kafka.sasl: {mechanism: PLAIN}}\n"))
	if err == nil || !strings.Contains(err.Error(), "source.kafka.kafka.sasl") {
		t.Fatalf("got %v, want an error naming source.kafka.kafka.sasl", err)
	}
}

func TestParseStartingOffsetsAndAssignAsMappingOrString(t *testing.T) {
	const canonical = `{"learning.progress":{"0":42,"1":-2}}`
	for _, doc := range []string{
		"source:\n  kafka:\n    startingOffsets: {\"learning.progress\": {\"0\": 42, \"1\": -2}}\n",
		"source:\n  kafka:\n    startingOffsets:\n      learning.progress:\n        1: -2\n        0: 42\n",
		"source:\n  kafka:\n    startingOffsets: '{\"learning.progress\": {\"1\": -2, \"0\": 42}}'\n",
		`{"source": {"kafka": {"startingOffsets": {"learning.progress": {"0": 42, "1": -2}}}}}`,
		`{"source": {"kafka": {"startingOffsets": "{\"learning.progress\":{\"0\":42,\"1\":-2}}"}}}`,
	} {
		s, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("%q: %v", doc, err)
			continue
		}
		if got := s.Source.Kafka.StartingOffsets; got != canonical {
			t.Errorf("%q: startingOffsets %q, want %q", doc, got, canonical)
		}
	}
	for _, doc := range []string{
		"source:\n  kafka:\n    assign: {learning.progress: [0, 1]}\n",
		"source:\n  kafka:\n    assign: '{\"learning.progress\":[0,1]}'\n",
	} {
		s, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if got, want := s.Source.Kafka.Assign, `{"learning.progress":[0,1]}`; got != want {
			t.Errorf("%q: assign %q, want %q", doc, got, want)
		}
	}
	s, err := Parse([]byte("source:\n  kafka:\n    startingOffsets: latest\n"))
	if err != nil || s.Source.Kafka.StartingOffsets != "latest" {
		t.Errorf("string form: got %+v, %v", s.Source.Kafka, err)
	}
	if _, err := Parse([]byte("source:\n  kafka:\n    startingOffsets: [1, 2]\n")); err == nil ||
		!strings.Contains(err.Error(), "source.kafka.startingOffsets: got a list, want a string or a mapping") {
		t.Errorf("list form: got %v, want an error naming the field", err)
	}
}

func TestParseReadsAYAMLFlowMappingAsYAML(t *testing.T) {
	s, err := Parse([]byte("{name: a, outputMode: update}"))
	if err != nil || s.Name != "a" || s.OutputMode != Update {
		t.Fatalf("got %+v, %v", s, err)
	}
}

func TestParseRefusesEmptyAndNonMappingDocuments(t *testing.T) {
	for _, doc := range []string{"", "   \n", "# only a comment\n", "[1, 2]", "just a string"} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%q: parsed, want an error", doc)
		}
	}
}

func TestParseDoesNotApplyDefaults(t *testing.T) {
	s, err := Parse([]byte("name: a\nsource: {generator: {rowsPerSecond: 5}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Source.Schema != nil || s.ShufflePartitions != 0 || s.Source.Format != "" {
		t.Fatalf("Parse applied defaults: %+v", s)
	}
	d := s.WithDefaults()
	if !reflect.DeepEqual(d.Source.Schema, GeneratorSchema()) {
		t.Fatalf("WithDefaults should fill the generator schema, got %+v", d.Source.Schema)
	}
}

func TestLoadReadsAFileAndNamesItInErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "tile.yaml")
	if err := os.WriteFile(good, []byte(tileYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, tileSpec()) {
		t.Fatalf("Load: got %s", mustMarshal(t, s))
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("nmae: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `unknown field "nmae"`) {
		t.Fatalf("got %v, want an error naming the file and the field", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("got %v, want a not-exist error", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func mustMarshal(t *testing.T, s Spec) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"10s", 10 * time.Second},
		{"5m", 5 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"0s", 0},
		{"-10m", -10 * time.Minute},
		{"10 minutes", 10 * time.Minute},
		{"1 minute", time.Minute},
		{"1 hour 30 minutes", 90 * time.Minute},
		{"interval 10 seconds", 10 * time.Second},
		{"2 days", 48 * time.Hour},
		{"1 week", 7 * 24 * time.Hour},
		{"500 milliseconds", 500 * time.Millisecond},
		{"3 microseconds", 3 * time.Microsecond},
		{"  10 Minutes ", 10 * time.Minute},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "10", "ten minutes", "10 minuets", "10 minutes 5", "minutes", "1.5 hours", "5 m s"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
}

func TestDurationReadsBothStylesAndWritesGoStyle(t *testing.T) {
	var w Watermark
	if err := json.Unmarshal([]byte(`{"column":"t","delay":"1 hour 30 minutes"}`), &w); err != nil {
		t.Fatal(err)
	}
	if w.Delay.D() != 90*time.Minute {
		t.Fatalf("delay %v", w.Delay.D())
	}
	b, _ := json.Marshal(w)
	if string(b) != `{"column":"t","delay":"1h30m0s"}` {
		t.Fatalf("marshal: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"column":"t","delay":600}`), &w); err == nil || !strings.Contains(err.Error(), "no unit") {
		t.Fatalf("a bare number: got %v, want a no-unit error", err)
	}
}

// A secret client option given twice is refused without printing it.
func TestDuplicateSecretKafkaOptionIsNotEchoed(t *testing.T) {
	_, err := Parse([]byte(`{"source":{"kafka":{"kafka.sasl.password":"hunter2","options":{"sasl.password":"other"}}}}`))
	if err == nil || !strings.Contains(err.Error(), "kafka.sasl.password") {
		t.Fatalf("want an error naming the option, got %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "other") {
		t.Fatalf("the error shows the secret: %v", err)
	}
}
