package kafka

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newSource(t *testing.T, k query.KafkaSource) *Source {
	t.Helper()
	s, err := New(Config{Kafka: k, PollTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func decode(t *testing.T, b source.Offset) Offsets {
	t.Helper()
	o, err := DecodeOffsets(b)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func off(t *testing.T, b source.Offset, topic string, p int32) int64 {
	t.Helper()
	v, ok := decode(t, b).Get(TopicPartition{topic, p})
	if !ok {
		t.Fatalf("offsets %s have no %s-%d", b, topic, p)
	}
	return v
}

// readRecord is what a test keeps of a record.
type readRecord struct {
	Part      string
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Timestamp int64
}

// readBatch plans splits for [start, end) and reads them all.
func readBatch(t *testing.T, s *Source, start, end source.Offset) []readRecord {
	t.Helper()
	ctx := testCtx(t)
	splits, err := s.Splits(ctx, start, end)
	if err != nil {
		t.Fatalf("Splits: %v", err)
	}
	var out []readRecord
	for _, sp := range splits {
		err := s.Read(ctx, sp, func(r *source.Record) error {
			out = append(out, readRecord{r.Part, recTopic(r), recPartition(r), recOffsetColumn(r), recKey(r), string(r.Value), recTimestamp(r)})
			return nil
		})
		if err != nil {
			t.Fatalf("Read %s: %v", sp.ID, err)
		}
	}
	return out
}

// positions returns the (partition, offset) pairs read, sorted.
func positions(recs []readRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s@%d", r.Part, r.Offset))
	}
	sort.Strings(out)
	return out
}

// expectPositions lists topic-p@o for o in [from, to).
func expectPositions(topic string, p int32, from, to int64) []string {
	var out []string
	for o := from; o < to; o++ {
		out = append(out, fmt.Sprintf("%s-%d@%d", topic, p, o))
	}
	return out
}

func sortedStrings(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	sort.Strings(out)
	return out
}

func TestInitialResolvesEarliestLatestAndJSONMap(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(3, "events"))
	c.ProduceN("events", 0, 10, kafkatest.Value)
	c.ProduceN("events", 1, 20, kafkatest.Value)
	c.DeleteRecords("events", 1, 5)
	ctx := testCtx(t)

	cases := []struct {
		starting string
		want     string
	}{
		{"earliest", `{"events":{"0":0,"1":5,"2":0}}`},
		{"latest", `{"events":{"0":10,"1":20,"2":0}}`},
		{"", `{"events":{"0":10,"1":20,"2":0}}`}, // Spark's default is latest
		{`{"events":{"0":3,"1":-2,"2":-1}}`, `{"events":{"0":3,"1":5,"2":0}}`},
	}
	for _, tc := range cases {
		s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: tc.starting})
		got, err := s.Initial(ctx)
		if err != nil {
			t.Fatalf("startingOffsets %q: %v", tc.starting, err)
		}
		if string(got) != tc.want {
			t.Errorf("startingOffsets %q: Initial = %s, want %s", tc.starting, got, tc.want)
		}
	}

	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: `{"events":{"0":3}}`})
	if _, err := s.Initial(ctx); err == nil {
		t.Fatal("a startingOffsets map missing partitions 1 and 2 was accepted")
	} else if want := "events-1 is missing"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

func TestReadReturnsExactlyTheRecordsOfTheRangeWithPositions(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(2, "events"), kfake.NumBrokers(2))
	ts := time.Date(2026, 3, 1, 12, 0, 0, 123000000, time.UTC)
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%d", i),
			Value: kafkatest.Value(i), Timestamp: ts.Add(time.Duration(i) * time.Millisecond)})
	}
	c.Produce(recs...)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"})

	start := Offsets{"events": {0: 3, 1: 10}}.Encode()
	end := Offsets{"events": {0: 20, 1: 12}}.Encode()
	got := readBatch(t, s, start, end)
	// Record i went to partition i%2 at offset i/2.
	var want []readRecord
	for i := 0; i < 50; i++ {
		p, o := int32(i%2), int64(i/2)
		if (p == 0 && o >= 3 && o < 20) || (p == 1 && o >= 10 && o < 12) {
			want = append(want, readRecord{fmt.Sprintf("events-%d", p), "events", p, o, fmt.Sprintf("k%d", i),
				fmt.Sprintf(`{"i":%d}`, i), ts.Add(time.Duration(i) * time.Millisecond).UnixMicro()})
		}
	}
	sort.Slice(got, func(i, j int) bool {
		return got[i].Part < got[j].Part || got[i].Part == got[j].Part && got[i].Offset < got[j].Offset
	})
	sort.Slice(want, func(i, j int) bool {
		return want[i].Part < want[j].Part || want[i].Part == want[j].Part && want[i].Offset < want[j].Offset
	})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read\n%v\nwant\n%v", got, want)
	}
	// A re-read of the same splits returns the same records.
	if again := readBatch(t, s, start, end); len(again) != len(got) {
		t.Fatalf("re-read returned %d records, first read %d", len(again), len(got))
	}
}

var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
