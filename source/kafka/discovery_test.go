package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
)

func TestPartitionAddedWhileRunningIsReadFromEarliest(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(2, "events"))
	c.ProduceN("events", 0, 10, kafkatest.Value)
	c.ProduceN("events", 1, 10, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "latest"})
	ctx := testCtx(t)
	start, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(start); got != `{"events":{"0":10,"1":10}}` {
		t.Fatalf("Initial = %s", got)
	}

	c.AddPartitions("events", 1)
	c.ProduceN("events", 2, 7, kafkatest.Value)
	latest, err := s.Latest(ctx, start, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(latest), `{"events":{"0":10,"1":10,"2":7}}`; got != want {
		t.Fatalf("Latest = %s, want %s", got, want)
	}
	end, err := s.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(end) != string(latest) {
		t.Fatalf("Next = %s, want %s", end, latest)
	}
	got := positions(readBatch(t, s, start, end))
	if want := expectPositions("events", 2, 0, 7); !equalStrings(got, want) {
		t.Fatalf("read %v, want the new partition from offset 0: %v", got, want)
	}
	per, total, err := s.Lag(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	if total != 7 || per["events-2"] != 7 || per["events-0"] != 0 || len(per) != 3 {
		t.Fatalf("Lag(start) = %v, %d; want 7 on events-2", per, total)
	}
}

func TestSubscribePatternDiscoversNewTopics(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "tile.a", "other"))
	c.ProduceN("tile.a", 0, 3, kafkatest.Value)
	c.ProduceN("other", 0, 3, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, SubscribePattern: `tile\..*`, StartingOffsets: "earliest"})
	ctx := testCtx(t)
	start, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(start); got != `{"tile.a":{"0":0}}` {
		t.Fatalf("Initial = %s", got)
	}
	// A topic whose name only contains a match is not subscribed: the
	// pattern matches whole names, as in Kafka.
	c.CreateTopic("xtile.b", 1)
	c.CreateTopic("tile.b", 2)
	c.ProduceN("tile.b", 1, 4, kafkatest.Value)
	c.ProduceN("xtile.b", 0, 4, kafkatest.Value)
	end, err := s.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(end), `{"tile.a":{"0":3},"tile.b":{"0":0,"1":4}}`; got != want {
		t.Fatalf("Next = %s, want %s", got, want)
	}
	got := positions(readBatch(t, s, start, end))
	want := sortedStrings(expectPositions("tile.a", 0, 0, 3), expectPositions("tile.b", 1, 0, 4))
	if !equalStrings(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestAssignReadsOnlyTheAssignedPartitions(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(3, "a", "b"))
	for p := int32(0); p < 3; p++ {
		c.ProduceN("a", p, 5, kafkatest.Value)
		c.ProduceN("b", p, 5, kafkatest.Value)
	}
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Assign: `{"a":[0,2],"b":[1]}`,
		StartingOffsets: `{"a":{"0":1,"2":-2},"b":{"1":-1}}`})
	ctx := testCtx(t)
	start, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(start), `{"a":{"0":1,"2":0},"b":{"1":5}}`; got != want {
		t.Fatalf("Initial = %s, want %s", got, want)
	}
	c.ProduceN("b", 1, 2, kafkatest.Value)
	c.ProduceN("b", 0, 2, kafkatest.Value)
	end, err := s.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(end), `{"a":{"0":5,"2":5},"b":{"1":7}}`; got != want {
		t.Fatalf("Next = %s, want %s", got, want)
	}
	got := positions(readBatch(t, s, start, end))
	want := sortedStrings(expectPositions("a", 0, 1, 5), expectPositions("a", 2, 0, 5), expectPositions("b", 1, 5, 7))
	if !equalStrings(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}

	bad := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Assign: `{"a":[7]}`})
	if _, err := bad.Latest(ctx, nil, testNow); err == nil {
		t.Fatal("assign of a missing partition was accepted")
	}
}

// A consumer group named like the query, with committed offsets, must not
// move the query's cursor: the source never reads group offsets, and with
// commitOffsetsToGroup it only writes them.
func TestConsumerGroupOffsetsAreNeverRead(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"))
	c.ProduceN("events", 0, 100, kafkatest.Value)
	ctx := testCtx(t)
	const group = "course-activity-tile"
	committed := kadm.Offsets{}
	committed.Add(kadm.Offset{Topic: "events", Partition: 0, At: 60, LeaderEpoch: -1})
	if err := c.Admin().CommitAllOffsets(ctx, group, committed); err != nil {
		t.Fatal(err)
	}
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events",
		StartingOffsets: "earliest", CommitOffsetsToGroup: group})
	start, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(start); got != `{"events":{"0":0}}` {
		t.Fatalf("Initial = %s, want earliest (0), not the group's 60", got)
	}
	end, err := s.Next(ctx, Offsets{"events": {0: 20}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(end); got != `{"events":{"0":100}}` {
		t.Fatalf("Next = %s", got)
	}
	if n := len(readBatch(t, s, Offsets{"events": {0: 20}}.Encode(), end)); n != 80 {
		t.Fatalf("read %d records from 20, want 80", n)
	}

	// CommitToGroup publishes the end for display.
	if err := s.CommitToGroup(ctx, Offsets{"events": {0: 42}}.Encode()); err != nil {
		t.Fatal(err)
	}
	fetched, err := c.Admin().FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("events", 0); !ok || o.At != 42 {
		t.Fatalf("group offset after CommitToGroup = %+v, want 42", o)
	}
	// Initial still ignores it.
	if again, err := s.Initial(ctx); err != nil || string(again) != `{"events":{"0":0}}` {
		t.Fatalf("Initial after commit = %s, %v", again, err)
	}
	// Without commitOffsetsToGroup, CommitToGroup does nothing.
	s2 := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"})
	if err := s2.CommitToGroup(ctx, Offsets{"events": {0: 99}}.Encode()); err != nil {
		t.Fatal(err)
	}
	fetched, _ = c.Admin().FetchOffsets(ctx, group)
	if o, _ := fetched.Lookup("events", 0); o.At != 42 {
		t.Fatalf("group offset changed to %d without commitOffsetsToGroup", o.At)
	}
}

// A range that ends on a transaction marker, or on aborted records, has no
// data record at its last offset: Read must still finish.
func TestReadFinishesRangesEndingInTransactionMarkers(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"))
	ctx := testCtx(t)
	tx := c.Client(kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTx := func(n int, commit bool) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := tx.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: kafkatest.Value(i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produceTx(5, true)  // offsets 0..4, commit marker 5
	produceTx(3, false) // offsets 6..8, abort marker 9
	for _, level := range []string{"read_uncommitted", "read_committed"} {
		s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "earliest",
			Options: map[string]string{"isolation.level": level}})
		start, err := s.Initial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		end, err := s.Next(ctx, start, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(end); got != `{"events":{"0":10}}` {
			t.Fatalf("%s: Next = %s, want the end after the abort marker", level, got)
		}
		readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		recs := readBatch(t, s, start, end)
		cancel()
		_ = readCtx
		want := expectPositions("events", 0, 0, 5)
		if level == "read_uncommitted" {
			want = sortedStrings(want, expectPositions("events", 0, 6, 9))
		}
		if got := positions(recs); !equalStrings(got, want) {
			t.Fatalf("%s: read %v, want %v", level, got, want)
		}
	}
}
