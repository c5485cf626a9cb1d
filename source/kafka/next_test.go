package kafka

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
)

func TestNextCapsBatchInProportionToBacklogAndCatchesUp(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(2, "events"))
	c.ProduceN("events", 0, 10000, kafkatest.Value)
	c.ProduceN("events", 1, 100, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events",
		StartingOffsets: "earliest", MaxOffsetsPerTrigger: 1000})
	ctx := testCtx(t)

	start, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := s.Latest(ctx, start, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(latest), `{"events":{"0":10000,"1":100}}`; got != want {
		t.Fatalf("Latest = %s, want %s", got, want)
	}
	end, err := s.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Spark's rateLimit: 1000*(10000/10100) = 990.1 and 1000*(100/10100) =
	// 9.9, floored: 990 and 9.
	if got, want := string(end), `{"events":{"0":990,"1":9}}`; got != want {
		t.Fatalf("first Next = %s, want %s", got, want)
	}

	// Catch up: every batch within the cap, every partition with a backlog
	// progressing, until the end reaches Latest; all records read once.
	seen := map[string]int{}
	batches := 0
	for string(start) != string(latest) {
		end, err := s.Next(ctx, start, latest)
		if err != nil {
			t.Fatal(err)
		}
		var size int64
		st, en := decode(t, start), decode(t, end)
		for _, tp := range en.Partitions() {
			a, _ := st.Get(tp)
			b, _ := en.Get(tp)
			l, _ := decode(t, latest).Get(tp)
			if b < a || b > l {
				t.Fatalf("batch %d: %s moved from %d to %d, outside [start, latest %d]", batches, tp, a, b, l)
			}
			if a < l && b == a {
				t.Fatalf("batch %d: %s has a backlog but did not move: %s -> %s", batches, tp, start, end)
			}
			size += b - a
		}
		if size > 1000 { // no share is below 1 here, so Spark stays within the cap
			t.Fatalf("batch %d has %d offsets, above maxOffsetsPerTrigger 1000", batches, size)
		}
		for _, r := range readBatch(t, s, start, end) {
			seen[r.Part+"@"+itoa(r.Offset)]++
		}
		start = end
		batches++
		if batches > 20 {
			t.Fatalf("no catch-up after %d batches: at %s", batches, start)
		}
	}
	if batches != 11 { // ten of 999 (990 + 9, floors), then the last 110
		t.Errorf("caught up in %d batches, want 11", batches)
	}
	if len(seen) != 10100 {
		t.Fatalf("read %d distinct records, want 10100", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("record %s read %d times", k, n)
		}
	}
	// Caught up: Next returns the start unchanged.
	if again, err := s.Next(ctx, start, nil); err != nil || string(again) != string(start) {
		t.Fatalf("Next at latest = %s, %v; want %s", again, err, start)
	}
}

func TestSplitsCutsLargePartitionsToReachMinPartitions(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(2, "events"))
	c.ProduceN("events", 0, 900, kafkatest.Value)
	c.ProduceN("events", 1, 100, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", MinPartitions: 10})
	ctx := testCtx(t)
	start := Offsets{"events": {0: 0, 1: 0}}.Encode()
	end := Offsets{"events": {0: 900, 1: 100}}.Encode()
	splits, err := s.Splits(ctx, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 10 {
		t.Fatalf("%d splits, want 10: %v", len(splits), splits)
	}
	perPartition := map[int32]int{}
	ids := map[string]bool{}
	for _, sp := range splits {
		r, err := DecodeRange(sp.Desc)
		if err != nil {
			t.Fatal(err)
		}
		perPartition[r.Partition]++
		if ids[sp.ID] {
			t.Fatalf("split id %s repeats", sp.ID)
		}
		ids[sp.ID] = true
	}
	if perPartition[0] != 9 || perPartition[1] != 1 {
		t.Fatalf("pieces per partition %v, want 9 and 1", perPartition)
	}
	got := positions(readBatch(t, s, start, end))
	want := sortedStrings(expectPositions("events", 0, 0, 900), expectPositions("events", 1, 0, 100))
	if !equalStrings(got, want) {
		t.Fatalf("read %d records over the splits, want each of %d once", len(got), len(want))
	}

	// An empty range has no splits.
	if sp, err := s.Splits(ctx, end, end); err != nil || len(sp) != 0 {
		t.Fatalf("Splits of an empty range = %v, %v", sp, err)
	}
}

func TestNextFailsWithDataLossWhenStartWasDeleted(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(2, "events"))
	c.ProduceN("events", 0, 100, kafkatest.Value)
	c.ProduceN("events", 1, 100, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"})
	ctx := testCtx(t)
	start := Offsets{"events": {0: 10, 1: 10}}.Encode()
	c.DeleteRecords("events", 1, 40)

	_, err := s.Next(ctx, start, nil)
	var loss *DataLossError
	if !errors.As(err, &loss) || !errors.Is(err, ErrDataLoss) {
		t.Fatalf("Next after DeleteRecords: %v, want a *DataLossError", err)
	}
	want := DataLossError{Topic: "events", Partition: 1, Wanted: 10, Earliest: 40, Latest: 100}
	if *loss != want {
		t.Fatalf("data loss %+v, want %+v", *loss, want)
	}
	for _, part := range []string{"events", "partition 1", "10", "40"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("message %q does not name %q", err, part)
		}
	}
	// Splits (a re-run of a logged batch) checks too.
	end := Offsets{"events": {0: 20, 1: 50}}.Encode()
	if _, err := s.Splits(ctx, start, end); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("Splits over a deleted range: %v, want ErrDataLoss", err)
	}
}

func TestNextFailsWithDataLossWhenTopicWasRecreated(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"))
	c.ProduceN("events", 0, 100, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"})
	ctx := testCtx(t)
	start := Offsets{"events": {0: 100}}.Encode()
	c.RecreateTopic("events", 1)
	c.ProduceN("events", 0, 5, kafkatest.Value)

	_, err := s.Next(ctx, start, nil)
	var loss *DataLossError
	if !errors.As(err, &loss) {
		t.Fatalf("Next after the topic was recreated: %v, want a *DataLossError", err)
	}
	if want := (DataLossError{Topic: "events", Partition: 0, Wanted: 100, Earliest: 0, Latest: 5}); *loss != want {
		t.Fatalf("data loss %+v, want %+v", *loss, want)
	}
	if !strings.Contains(err.Error(), "recreated") {
		t.Errorf("message %q does not suggest the topic was recreated", err)
	}

	// Without failOnDataLoss the query restarts the partition from its
	// earliest offset and reads the new topic's records.
	no := false
	s2 := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", FailOnDataLoss: &no})
	end, err := s2.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(end); got != `{"events":{"0":5}}` {
		t.Fatalf("Next = %s, want the new topic's end", got)
	}
	got := positions(readBatch(t, s2, start, end))
	if want := expectPositions("events", 0, 0, 5); !equalStrings(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestNextFailsWithDataLossWhenSubscribedTopicIsDeleted(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events", "other"))
	c.ProduceN("events", 0, 10, kafkatest.Value)
	c.ProduceN("other", 0, 10, kafkatest.Value)
	ctx := testCtx(t)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events,other"})
	start := Offsets{"events": {0: 10}, "other": {0: 3}}.Encode()
	if resp, err := c.Admin().DeleteTopic(ctx, "events"); err != nil || resp.Err != nil {
		t.Fatalf("delete topic: %v %v", err, resp.Err)
	}
	_, err := s.Next(ctx, start, nil)
	var loss *DataLossError
	if !errors.As(err, &loss) || loss.Topic != "events" || loss.Wanted != 10 {
		t.Fatalf("Next after the topic was deleted: %v, want a *DataLossError for events-0", err)
	}
	if !strings.Contains(err.Error(), "no longer exists") {
		t.Errorf("message %q does not say the partition is gone", err)
	}
	no := false
	s2 := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events,other", FailOnDataLoss: &no})
	end, err := s2.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(end), `{"events":{"0":10},"other":{"0":10}}`; got != want {
		t.Fatalf("Next = %s, want %s (the gone partition keeps its offset)", got, want)
	}
}
