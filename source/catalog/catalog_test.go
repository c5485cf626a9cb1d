package catalog

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Every source section of the spec (a pointer field of query.Source) is
// one kind of the catalog, under the same name, and setting it makes that
// kind, and only that one, Configured: a source added to the spec but not
// to the catalog fails here.
func TestEverySpecSourceIsOneKind(t *testing.T) {
	st := reflect.TypeOf(query.Source{})
	seen := map[string]bool{}
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if f.Type.Kind() != reflect.Pointer {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		var src query.Source
		reflect.ValueOf(&src).Elem().Field(i).Set(reflect.New(f.Type.Elem()))
		k := Of(&src)
		if k == nil {
			t.Errorf("source.%s is in the spec but no kind of the catalog is configured by it", name)
			continue
		}
		if k.Name() != name {
			t.Errorf("source.%s configures kind %q", name, k.Name())
		}
		seen[name] = true
	}
	for _, k := range Kinds() {
		if !seen[k.Name()] {
			t.Errorf("kind %s is not a section of query.Source", k.Name())
		}
	}
}

func TestValidateNamesTheSourceRule(t *testing.T) {
	spec := query.Spec{Name: "q", Source: query.Source{
		Kafka:     &query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "t"},
		Generator: &query.GeneratorSource{RowsPerSecond: 1},
	}, OutputMode: query.Append, Sink: query.Sink{Console: &query.ConsoleSink{}}, CheckpointLocation: "cp"}
	err := Validate(spec)
	if err == nil || !strings.Contains(err.Error(), `source: "kafka, generator" sets more than one source: set exactly one of kafka, file or generator`) {
		t.Fatalf("two sources: %v", err)
	}
	spec.Source.Kafka = nil
	spec.Source.Schema = []query.Field{{Name: "k", Type: "string", From: "kafka.key"}}
	err = Validate(spec)
	if err == nil || !strings.Contains(err.Error(), `source.schema[0].from: "kafka.key" needs source.kafka`) {
		t.Fatalf("a Kafka column on the generator: %v", err)
	}
	spec.Source.Schema = []query.Field{{Name: "course_id", Type: "long"}}
	err = Validate(spec)
	if err == nil || !strings.Contains(err.Error(), `source.schema[0].type: "long" does not match the generator: it emits course_id as string`) {
		t.Fatalf("a generator column with another type: %v", err)
	}
	spec.Source.Schema = nil
	if err := Validate(spec); err != nil {
		t.Fatalf("the generator with its own schema: %v", err)
	}
}

func TestMetaColumnResolvesTheKindsColumn(t *testing.T) {
	src := query.Source{Kafka: &query.KafkaSource{}}
	i, c, ok := MetaColumn(&src, "kafka.partition")
	if !ok || c.Name != "kafka.partition" || c.Type.String() != "long" {
		t.Fatalf("kafka.partition: %d %+v %v", i, c, ok)
	}
	if _, _, ok := MetaColumn(&src, "kafka.headers"); ok {
		t.Fatal("kafka.headers is not a column")
	}
	if _, _, ok := MetaColumn(&query.Source{File: &query.FileSource{}}, "kafka.key"); ok {
		t.Fatal("file records have no kafka.key")
	}
}

func TestLocationsSayWhatEachSourceReadsAndWrites(t *testing.T) {
	got := Locations(&query.Source{Kafka: &query.KafkaSource{Subscribe: "a, b", Options: map[string]string{"ssl.truststore.location": "/ca.pem", "client.id": "x"}}})
	want := []source.Location{
		{Field: "source.kafka.subscribe", Value: "a", Use: source.Topic},
		{Field: "source.kafka.subscribe", Value: "b", Use: source.Topic},
		{Field: "source.kafka.kafka.ssl.truststore.location", Value: "/ca.pem", Use: source.ReadsFile},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kafka subscribe: %+v", got)
	}
	got = Locations(&query.Source{Kafka: &query.KafkaSource{Assign: `{"t2":[0],"t1":[1]}`}})
	if len(got) != 2 || got[0].Value != "t1" || got[1].Value != "t2" || got[0].Use != source.Topic {
		t.Fatalf("kafka assign: %+v", got)
	}
	got = Locations(&query.Source{Kafka: &query.KafkaSource{SubscribePattern: "t.*"}})
	if len(got) != 1 || got[0].Use != source.TopicPattern {
		t.Fatalf("kafka pattern: %+v", got)
	}
	got = Locations(&query.Source{File: &query.FileSource{Path: "s3://in/", SourceArchiveDir: "s3://done/"}})
	if len(got) != 2 || got[0].Use != source.ReadsDir || got[1].Use != source.WritesDir || got[1].Field != "source.file.sourceArchiveDir" {
		t.Fatalf("file: %+v", got)
	}
	if got := Locations(&query.Source{Generator: &query.GeneratorSource{}}); got != nil {
		t.Fatalf("generator: %+v", got)
	}
}
