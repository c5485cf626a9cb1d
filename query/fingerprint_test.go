package query

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestFingerprintIsStableAcrossSpellings(t *testing.T) {
	a, err := Parse([]byte(tileYAML))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(tileJSON)) // Spark-style durations
	if err != nil {
		t.Fatal(err)
	}
	if !hex64.MatchString(a.Fingerprint()) || !hex64.MatchString(a.StateFingerprint()) {
		t.Fatalf("not hex sha256: %q %q", a.Fingerprint(), a.StateFingerprint())
	}
	if a.Fingerprint() != b.Fingerprint() {
		t.Errorf("YAML and JSON spellings of one spec differ in Fingerprint")
	}
	if a.Fingerprint() != a.Fingerprint() {
		t.Errorf("Fingerprint is not deterministic")
	}
	// Defaults written out or left out are the same definition.
	c := tileSpec()
	c.ShufflePartitions = 0 // default 8, as the tile says
	c.Source.Kafka.FailOnDataLoss = nil
	c.StateStore = DefaultStateStore
	yes := true
	c.NoDataMicroBatches = &yes
	c.Source.Schema[2].Nullable = &yes
	if c.Fingerprint() != a.Fingerprint() {
		t.Errorf("spelling out defaults changed Fingerprint")
	}
	// Go-built and parsed startingOffsets JSON in different layouts agree.
	d, e := tileSpec(), tileSpec()
	d.Source.Kafka.StartingOffsets = `{"learning.progress": {"1": 5, "0": 42}}`
	e.Source.Kafka.StartingOffsets = `{"learning.progress":{"0":42,"1":5}}`
	if d.Fingerprint() != e.Fingerprint() {
		t.Errorf("startingOffsets layout changed Fingerprint")
	}
}

func TestFingerprintDoesNotChangeTheSpec(t *testing.T) {
	s := tileSpec()
	s.Source.Kafka.FailOnDataLoss = nil
	s.Source.Schema[2].Nullable = nil
	_ = s.Fingerprint()
	_ = s.StateFingerprint()
	_ = s.StateSchemaDescription()
	if s.Source.Kafka.FailOnDataLoss != nil || s.Source.Schema[2].Nullable != nil || s.ShufflePartitions != 8 {
		t.Fatalf("fingerprinting changed the spec: %+v", s)
	}
}

// TestStateFingerprint changes one thing at a time and checks whether the
// definition and the state fingerprints move. The expectations are the
// rule, written independently of the code: state depends on the window,
// the grouping, the measures, the kinds of their columns, the output mode
// and the watermark column, and on nothing else.
func TestStateFingerprint(t *testing.T) {
	base := tileSpec()
	for _, tc := range []struct {
		name        string
		change      func(s *Spec)
		stateChange bool
	}{
		{"sink path", func(s *Spec) { s.Sink.Parquet.Path = "s3://elsewhere/tile" }, false},
		{"sink kind", func(s *Spec) { s.Sink = Sink{JSONBatches: &JSONBatchesSink{Path: "/out"}} }, false},
		{"checkpoint location", func(s *Spec) { s.CheckpointLocation = "s3://other/" }, false},
		{"trigger", func(s *Spec) { s.Trigger = Trigger{AvailableNow: true} }, false},
		{"watermark delay", func(s *Spec) { s.Watermark.Delay = Duration(20 * time.Minute) }, false},
		{"kafka options", func(s *Spec) { s.Source.Kafka.Options = map[string]string{"security.protocol": "SSL"} }, false},
		{"maxOffsetsPerTrigger", func(s *Spec) { s.Source.Kafka.MaxOffsetsPerTrigger = 10 }, false},
		{"source kind", func(s *Spec) { s.Source.Kafka = nil; s.Source.File = &FileSource{Path: "/in"} }, false},
		{"unused column added", func(s *Spec) { s.Source.Schema = append(s.Source.Schema, Field{Name: "extra", Type: "long"}) }, false},
		{"nullability", func(s *Spec) { s.Source.Schema[1].Nullable = nil }, false},
		{"shufflePartitions (frozen separately)", func(s *Spec) { s.ShufflePartitions = 16 }, false},
		{"stateStore (frozen separately)", func(s *Spec) { s.StateStore = "pebble" }, false},
		{"name", func(s *Spec) { s.Name = "other" }, false},
		{"slide equal to size", func(s *Spec) { s.Aggregate.Window.Slide = s.Aggregate.Window.Size }, false},

		{"groupBy", func(s *Spec) { s.Aggregate.GroupBy = []string{"course_id", "lesson_id"} }, true},
		{"groupBy order", func(s *Spec) {
			s.Aggregate.GroupBy = []string{"lesson_id", "course_id"}
		}, true},
		{"window size", func(s *Spec) { s.Aggregate.Window.Size = Duration(10 * time.Minute) }, true},
		{"window slide", func(s *Spec) { s.Aggregate.Window.Slide = Duration(time.Minute) }, true},
		{"window startTime", func(s *Spec) { s.Aggregate.Window.StartTime = Duration(time.Minute) }, true},
		{"no window", func(s *Spec) { s.Aggregate.Window = nil }, true},
		{"measure name", func(s *Spec) { s.Aggregate.Measures[0].Name = "events" }, true},
		{"measure fn", func(s *Spec) {
			s.Aggregate.Measures[0].Fn = FnApproxCountDistinct
			s.Aggregate.Measures[0].Column = "event_id"
		}, true},
		{"measure added", func(s *Spec) {
			s.Aggregate.Measures = append(s.Aggregate.Measures, Measure{Name: "lessons", Fn: FnCount, Column: "lesson_id"})
		}, true},
		{"grouping column type", func(s *Spec) { s.Source.Schema[1].Type = "long" }, true},
		{"output mode", func(s *Spec) { s.OutputMode = Update }, true},
		{"watermark column", func(s *Spec) { s.Watermark.Column = "lesson_id" }, true},
		{"no watermark", func(s *Spec) { s.Watermark = nil }, true},
		{"no aggregation", func(s *Spec) { s.Aggregate = nil }, true},
		{"dedup added", func(s *Spec) { s.Dedup = &Dedup{Keys: []string{"event_id"}} }, true},
		{"session window instead of window", func(s *Spec) {
			s.Aggregate.Window = nil
			s.Aggregate.SessionWindow = &SessionWindow{Column: "event_time", Gap: Duration(10 * time.Minute)}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tileSpec()
			tc.change(&s)
			sameDefinition := tc.name == "slide equal to size"
			if (s.Fingerprint() == base.Fingerprint()) != sameDefinition {
				t.Errorf("Fingerprint unchanged = %v, want %v", !sameDefinition, sameDefinition) // it was the opposite
			}
			changed := s.StateFingerprint() != base.StateFingerprint()
			if changed != tc.stateChange {
				t.Errorf("StateFingerprint changed = %v, want %v\nbase: %s\n new: %s",
					changed, tc.stateChange, base.StateSchemaDescription(), s.StateSchemaDescription())
			}
			descChanged := s.StateSchemaDescription() != base.StateSchemaDescription()
			if descChanged != tc.stateChange {
				t.Errorf("StateSchemaDescription changed = %v, want %v:\n%s", descChanged, tc.stateChange, s.StateSchemaDescription())
			}
		})
	}
}

// A checkpoint written before dedup and session windows existed keeps its
// state fingerprint: the fields are left out of the hashed layout when
// unset. The values are the tile's and the pass-through's fingerprints as
// the build before them computed them.
func TestStateFingerprintOfExistingQueriesIsUnchanged(t *testing.T) {
	s := tileSpec()
	if got, want := s.StateFingerprint(), "7ccc189cda7f2414fe94d2a3375887dcf5c4de030100e29e9a4a0042d589c405"; got != want {
		t.Errorf("tile: state fingerprint %s, was %s", got, want)
	}
	s.Aggregate = nil
	if got, want := s.StateFingerprint(), "581a6ef590dd74c63e093c7a58a93c7b7765625fec872b2b78ed0ff54621258a"; got != want {
		t.Errorf("pass-through: state fingerprint %s, was %s", got, want)
	}
}

// A changed dedup key or session gap changes the state fingerprint (the
// checkpoint's state cannot be read: a new checkpoint is required); the
// watermark delay, which only moves expiries, does not.
func TestStateFingerprintOfDedupAndSessions(t *testing.T) {
	dedup := func(keys ...string) Spec {
		s := tileSpec()
		s.Aggregate = nil
		s.Dedup = &Dedup{Keys: keys}
		return s
	}
	session := func(col string, gap time.Duration) Spec {
		s := tileSpec()
		s.Aggregate.Window = nil
		s.Aggregate.SessionWindow = &SessionWindow{Column: col, Gap: Duration(gap)}
		return s
	}
	base := dedup("event_id")
	if got, want := base.StateSchemaDescription(), "outputMode append; watermark on event_time; dedup [event_id string]; no aggregation"; got != want {
		t.Errorf("dedup:\n got %s\nwant %s", got, want)
	}
	for _, other := range []Spec{dedup("course_id"), dedup("event_id", "course_id"), dedup("course_id", "event_id")} {
		if other.StateFingerprint() == base.StateFingerprint() {
			t.Errorf("%s has the state fingerprint of %s", other.StateSchemaDescription(), base.StateSchemaDescription())
		}
	}
	delay := dedup("event_id")
	delay.Watermark.Delay = Duration(time.Hour)
	if delay.StateFingerprint() != base.StateFingerprint() {
		t.Errorf("the watermark delay changed dedup's state fingerprint")
	}
	s := session("event_time", 10*time.Minute)
	if got, want := s.StateSchemaDescription(), "outputMode append; watermark on event_time; session_window(event_time timestamp, gap 10m0s); "+
		"groupBy [course_id string]; measures [event_count = count(*)]"; got != want {
		t.Errorf("session:\n got %s\nwant %s", got, want)
	}
	for _, other := range []Spec{session("event_time", 20*time.Minute), session("ingest_time", 10*time.Minute)} {
		if other.StateFingerprint() == s.StateFingerprint() {
			t.Errorf("%s has the state fingerprint of %s", other.StateSchemaDescription(), s.StateSchemaDescription())
		}
	}
	if same := session("event_time", 10*time.Minute); same.StateFingerprint() != s.StateFingerprint() {
		t.Errorf("the same session window has two state fingerprints")
	}
}

func TestStateSchemaDescription(t *testing.T) {
	s := tileSpec()
	want := "outputMode append; watermark on event_time; window(event_time timestamp, size 5m0s, slide 5m0s, start 0s); " +
		"groupBy [course_id string]; measures [event_count = count(*)]"
	if got := s.StateSchemaDescription(); got != want {
		t.Errorf("tile:\n got %s\nwant %s", got, want)
	}
	s.Aggregate.Measures = append(s.Aggregate.Measures, Measure{Name: "lessons", Fn: FnApproxCountDistinct, Column: "lesson_id"})
	if got := s.StateSchemaDescription(); !strings.HasSuffix(got, "measures [event_count = count(*), lessons = approx_count_distinct(lesson_id string)]") {
		t.Errorf("measures: %s", got)
	}
	s.Aggregate = nil
	s.Watermark = nil
	if got, want := s.StateSchemaDescription(), "outputMode append; no watermark; no aggregation (no state)"; got != want {
		t.Errorf("pass-through:\n got %s\nwant %s", got, want)
	}
}

// Secret option values do not enter the fingerprint: only which secret
// option is set does.
func TestFingerprintIgnoresSecretValues(t *testing.T) {
	spec := func(opts map[string]string) Spec {
		s := tileSpec()
		s.Source.File = nil
		s.Source.Kafka = &KafkaSource{BootstrapServers: "127.0.0.1:9092", Subscribe: "t", Options: opts}
		return s
	}
	a := spec(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "hunter2"})
	b := spec(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "correct horse"})
	if a.Fingerprint() != b.Fingerprint() {
		t.Errorf("the password's value changed the fingerprint")
	}
	c := spec(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.jaas.config": "hunter2"})
	if a.Fingerprint() == c.Fingerprint() {
		t.Errorf("which secret option is set does not count")
	}
	d := spec(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "v", "sasl.password": "hunter2"})
	if a.Fingerprint() == d.Fingerprint() {
		t.Errorf("a non-secret option (the user name) does not count")
	}
	if a.Source.Kafka.Options["sasl.password"] != "hunter2" {
		t.Errorf("Fingerprint changed the spec")
	}
}

// The state fingerprint of a SQL query comes from its plan: the tile in
// SQL has the YAML tile's (it may take over its checkpoint), and what
// changes the state (the window, the grouping, a computed key's
// expression, the measures, the session gap, the dedup keys, the output
// mode) changes it, while a filter, HAVING or the output projection do
// not.
func TestStateFingerprintOfSQLQueries(t *testing.T) {
	const tile = "SELECT window.start AS window_start, window.end AS window_end, course_id, count(*) AS event_count FROM events GROUP BY window(event_time, '5 minutes'), course_id"
	sqlSpec := func(q string) Spec {
		s := tileSpec()
		s.Aggregate = nil
		s.SQL = q
		return s
	}
	yaml := tileSpec()
	base := sqlSpec(tile)
	if base.StateFingerprint() != yaml.StateFingerprint() || base.StateSchemaDescription() != yaml.StateSchemaDescription() {
		t.Fatalf("the tile in SQL has another state than in YAML:\n SQL %s\nYAML %s", base.StateSchemaDescription(), yaml.StateSchemaDescription())
	}
	if base.Fingerprint() == yaml.Fingerprint() {
		t.Errorf("the tile in SQL and in YAML have one definition fingerprint")
	}
	for _, tc := range []struct {
		name        string
		sql         string
		mode        OutputMode
		stateChange bool
	}{
		{"filter added", "SELECT window.start AS window_start, window.end AS window_end, course_id, count(*) AS event_count FROM events WHERE lesson_id != 'x' GROUP BY window(event_time, '5 minutes'), course_id", "", false},
		{"having added", tile + " HAVING count(*) > 2", "", false},
		{"projection changed", "SELECT course_id, window.start AS window_start, count(*) AS event_count FROM events GROUP BY window(event_time, '5 minutes'), course_id", "", false},
		{"comments and spelling", "select window.start as window_start, window.end as window_end, course_id, count(1) as event_count -- the tile\nfrom events group by window(event_time, INTERVAL 5 MINUTES), course_id", "", false},
		{"grouping column added", "SELECT window.start AS window_start, course_id, lesson_id, count(*) AS event_count FROM events GROUP BY window(event_time, '5 minutes'), course_id, lesson_id", "", true},
		{"window size", "SELECT window.start AS window_start, course_id, count(*) AS event_count FROM events GROUP BY window(event_time, '10 minutes'), course_id", "", true},
		{"computed key", "SELECT window.start AS window_start, upper(course_id) AS course_id, count(*) AS event_count FROM events GROUP BY window(event_time, '5 minutes'), upper(course_id)", "", true},
		{"measure renamed", "SELECT window.start AS window_start, course_id, count(*) AS n FROM events GROUP BY window(event_time, '5 minutes'), course_id", "", true},
		{"measure added", "SELECT window.start AS window_start, course_id, count(*) AS event_count, approx_count_distinct(lesson_id) AS lessons FROM events GROUP BY window(event_time, '5 minutes'), course_id", "", true},
		{"session window", "SELECT session_window.start AS s, course_id, count(*) AS event_count FROM events GROUP BY session_window(event_time, '5 minutes'), course_id", "", true},
		{"output mode", tile, Update, true},
		{"dedup, no aggregate", "SELECT * FROM drop_duplicates_within_watermark(TABLE(events), event_id)", "", true},
		{"no aggregate", "SELECT * FROM events", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sqlSpec(tc.sql)
			if tc.mode != "" {
				s.OutputMode = tc.mode
				s.Sink = Sink{JSONBatches: &JSONBatchesSink{Path: "/out"}}
			}
			if _, err := s.Plan(); err != nil {
				t.Fatal(err)
			}
			if changed := s.StateFingerprint() != base.StateFingerprint(); changed != tc.stateChange {
				t.Errorf("StateFingerprint changed = %v, want %v\nbase: %s\n new: %s", changed, tc.stateChange, base.StateSchemaDescription(), s.StateSchemaDescription())
			}
		})
	}
	computed := sqlSpec("SELECT window.start AS window_start, upper(course_id) AS course, count(*) AS n FROM events GROUP BY window(event_time, '5 minutes'), upper(course_id)")
	lower := sqlSpec("SELECT window.start AS window_start, lower(course_id) AS course, count(*) AS n FROM events GROUP BY window(event_time, '5 minutes'), lower(course_id)")
	if computed.StateFingerprint() == lower.StateFingerprint() {
		t.Errorf("upper and lower keys share a state fingerprint: %s", computed.StateSchemaDescription())
	}
	if got := computed.StateSchemaDescription(); !strings.Contains(got, "groupBy [course string = upper(course_id)]") {
		t.Errorf("description %s lacks the computed key", got)
	}
	gap := func(g string) string {
		s := sqlSpec("SELECT session_window.start AS s, course_id, count(*) AS n FROM events GROUP BY session_window(event_time, '" + g + "'), course_id")
		return s.StateFingerprint()
	}
	if gap("5 minutes") == gap("6 minutes") {
		t.Errorf("the session gap does not change the state fingerprint")
	}
	keys := func(k string) string {
		s := sqlSpec("SELECT * FROM drop_duplicates_within_watermark(TABLE(events), " + k + ")")
		return s.StateFingerprint()
	}
	if keys("event_id") == keys("event_id, course_id") {
		t.Errorf("the dedup keys do not change the state fingerprint")
	}
	y := tileSpec()
	y.Aggregate = nil
	y.Dedup = &Dedup{Keys: []string{"event_id"}}
	if keys("event_id") != y.StateFingerprint() {
		t.Errorf("dedup on event_id in SQL and in YAML have two state fingerprints")
	}
}
