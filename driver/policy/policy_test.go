package policy

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/query"
)

func TestUnderIsPathAware(t *testing.T) {
	cases := []struct {
		loc, dir string
		want     bool
	}{
		{"s3://a/team/x", "s3://a/team", true},
		{"s3://a/team/x", "s3://a/team/", true},
		{"s3://a/team", "s3://a/team/", true},
		{"s3://a/team-b/x", "s3://a/team", false},
		{"s3://a/team/../team-b/x", "s3://a/team/", false},
		{"s3://a/team//x/./y", "s3://a/team/x", true},
		{"s3://b/team/x", "s3://a/team", false},
		{"s3://a/x", "s3://a/", true},
		{"s3://ab/x", "s3://a/", false},
		{"/data/in/x", "/data/in", true},
		{"/data/in/../etc", "/data/in", false},
		{"/data/inbox", "/data/in", false},
		{"file:///data/in/x", "/data/in", true},
		{"", "/data", false},
	}
	for _, c := range cases {
		if got := Under(c.loc, c.dir); got != c.want {
			t.Errorf("Under(%q, %q) = %v, want %v", c.loc, c.dir, got, c.want)
		}
	}
	if !Overlap("s3://cp/a", "s3://cp/a/b") || !Overlap("s3://cp/a/b", "s3://cp/a") || Overlap("s3://cp/a", "s3://cp/ab") {
		t.Error("Overlap is not symmetric containment")
	}
}

const pol = `
allow:
  sources: [s3://warehouse/in/]
  topics: [events, team-a.*]
  sinks: [s3://warehouse/out/]
  checkpoints: [s3://checkpoints/shared/]
  badRecords: [s3://warehouse/bad/]
principals:
  alice:
    checkpoints: [s3://checkpoints/team-a/]
`

func spec() query.Spec {
	return query.Spec{
		Name:               "q",
		Source:             query.Source{File: &query.FileSource{Path: "s3://warehouse/in/clicks"}},
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: "s3://warehouse/out/clicks"}},
		CheckpointLocation: "s3://checkpoints/shared/q",
	}
}

func fields(ps []query.Problem) string {
	var f []string
	for _, p := range ps {
		f = append(f, p.Field)
	}
	return strings.Join(f, ",")
}

func TestCheckEachField(t *testing.T) {
	p, err := Parse([]byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	if ps := p.Check(spec(), "bob"); len(ps) != 0 {
		t.Fatalf("an allowed spec: %v", ps)
	}
	cases := []struct {
		name  string
		edit  func(*query.Spec)
		field string
		value string
	}{
		{"source", func(s *query.Spec) { s.Source.File.Path = "s3://warehouse/secret" }, "source.file.path", "s3://warehouse/secret"},
		{"source dotdot", func(s *query.Spec) { s.Source.File.Path = "s3://warehouse/in/../secret" }, "source.file.path", "s3://warehouse/in/../secret"},
		{"local source", func(s *query.Spec) { s.Source.File.Path = "/etc" }, "source.file.path", "/etc"},
		{"archive", func(s *query.Spec) { s.Source.File.SourceArchiveDir = "s3://warehouse/in/archive" }, "source.file.sourceArchiveDir", "s3://warehouse/in/archive"},
		{"sink", func(s *query.Spec) { s.Sink.Parquet.Path = "s3://warehouse/outside" }, "sink.parquet.path", "s3://warehouse/outside"},
		{"json sink", func(s *query.Spec) { s.Sink = query.Sink{JSONBatches: &query.JSONBatchesSink{Path: "s3://x/y"}} }, "sink.jsonBatches.path", "s3://x/y"},
		{"checkpoint", func(s *query.Spec) { s.CheckpointLocation = "s3://checkpoints/team-a/q" }, "checkpointLocation", "s3://checkpoints/team-a/q"},
		{"checkpoint sibling prefix", func(s *query.Spec) { s.CheckpointLocation = "s3://checkpoints/shared-b/q" }, "checkpointLocation", "s3://checkpoints/shared-b/q"},
		{"bad records", func(s *query.Spec) { s.BadRecordsPath = "s3://other/bad" }, "badRecordsPath", "s3://other/bad"},
		{"topic", func(s *query.Spec) {
			s.Source = query.Source{Kafka: &query.KafkaSource{BootstrapServers: "k:9092", Subscribe: "events,payroll"}}
		}, "source.kafka.subscribe", "payroll"},
		{"topic prefix", func(s *query.Spec) {
			s.Source = query.Source{Kafka: &query.KafkaSource{BootstrapServers: "k:9092", Subscribe: "team-b.x"}}
		}, "source.kafka.subscribe", "team-b.x"},
		{"pattern", func(s *query.Spec) {
			s.Source = query.Source{Kafka: &query.KafkaSource{BootstrapServers: "k:9092", SubscribePattern: "team-a.*"}}
		}, "source.kafka.subscribePattern", "team-a.*"},
		{"assign", func(s *query.Spec) {
			s.Source = query.Source{Kafka: &query.KafkaSource{BootstrapServers: "k:9092", Assign: `{"payroll":[0]}`}}
		}, "source.kafka.assign", "payroll"},
		{"join", func(s *query.Spec) { s.Join = &query.Join{Path: "s3://dims/users"} }, "join.path", "s3://dims/users"},
	}
	for _, c := range cases {
		s := spec()
		c.edit(&s)
		ps := p.Check(s, "bob")
		if len(ps) != 1 || ps[0].Field != c.field || ps[0].Value != c.value || ps[0].Rule == "" {
			t.Errorf("%s: got %v, want one problem on %s = %q", c.name, ps, c.field, c.value)
		}
	}
	// bad records under the checkpoint, and team-a.* topics, are allowed
	s := spec()
	s.BadRecordsPath = "s3://checkpoints/shared/q/bad"
	if ps := p.Check(s, "bob"); len(ps) != 0 {
		t.Errorf("badRecordsPath under the checkpoint: %v", ps)
	}
	s = spec()
	s.Source = query.Source{Kafka: &query.KafkaSource{BootstrapServers: "k:9092", Subscribe: "team-a.clicks, events"}}
	if ps := p.Check(s, "bob"); len(ps) != 0 {
		t.Errorf("allowed topics: %v", ps)
	}
	// per principal
	s = spec()
	s.CheckpointLocation = "s3://checkpoints/team-a/q"
	if ps := p.Check(s, "alice"); len(ps) != 0 {
		t.Errorf("alice's own checkpoint prefix: %v", ps)
	}
	if ps := p.Check(s, "bob"); fields(ps) != "checkpointLocation" {
		t.Errorf("bob on alice's prefix: %v", ps)
	}
	// a nil policy allows everything
	var none *Policy
	s.Source.File.Path = "/etc"
	if ps := none.Check(s, ""); ps != nil {
		t.Errorf("nil policy: %v", ps)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"allow:\n  sinks: [/tmp/out]\n", "local paths are allowed only with lab: true"},
		{"lab: true\nallow:\n  sinks: [tmp/out]\n", "absolute path"},
		{"allow:\n  sink: [s3://a/]\n", "unknown field"},
		{"allow:\n  sinks: [\"s3://\"]\n", "names no bucket"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want %q", c.yaml, err, c.want)
		}
	}
	p, err := Parse([]byte("lab: true\nallow:\n  sinks: [/tmp/out]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := spec()
	s.Source.File.Path = "/tmp/out/in"
	s.Sink.Parquet.Path = "/tmp/out/x"
	ps := p.Check(s, "")
	if fields(ps) != "source.file.path,checkpointLocation" {
		t.Errorf("lab policy: %v", ps)
	}
}
