package kafka

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Records deleted after the batch was planned (offsets/N written, splits
// made) are caught by Read itself: franz-go is told never to reset, so the
// broker's OFFSET_OUT_OF_RANGE becomes a *DataLossError.
func TestReadFailsWithDataLossWhenRangeIsDeletedAfterPlanning(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"))
	c.ProduceN("events", 0, 100, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "earliest"})
	ctx := testCtx(t)

	start, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end, err := s.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	splits, err := s.Splits(ctx, start, end)
	if err != nil || len(splits) != 1 {
		t.Fatalf("Splits = %v, %v", splits, err)
	}
	c.DeleteRecords("events", 0, 30) // planning passed; now the data goes

	n := 0
	err = s.Read(ctx, splits[0], func(*source.Record) error { n++; return nil })
	var loss *DataLossError
	if !errors.As(err, &loss) || !errors.Is(err, ErrDataLoss) {
		t.Fatalf("Read of a deleted range: %v after %d records, want a *DataLossError", err, n)
	}
	if want := (DataLossError{Topic: "events", Partition: 0, Wanted: 0, Earliest: 30, Latest: 100}); *loss != want {
		t.Fatalf("data loss %+v, want %+v", *loss, want)
	}
	if n != 0 {
		t.Fatalf("Read delivered %d records before failing, want none", n)
	}
}

// The check above matters: a franz-go consumer with its default reset
// policy, asked for the same deleted offset, silently starts at the new log
// start and returns records as if nothing were missing.
func TestDefaultFranzGoConsumerSilentlySkipsDeletedOffsets(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"))
	c.ProduceN("events", 0, 100, kafkatest.Value)
	c.DeleteRecords("events", 0, 30)
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": {0: kgo.NewOffset().At(0)}}))
	ctx := testCtx(t)
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatalf("default consumer reported %v; it was expected to skip silently", err)
	}
	recs := fs.Records()
	if len(recs) == 0 || recs[0].Offset != 30 {
		t.Fatalf("default consumer read from offset %v, want a silent jump to 30", recs)
	}
}

func TestFailOnDataLossFalseSkipsLostOffsetsAndCountsThem(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(2, "events"))
	c.ProduceN("events", 0, 100, kafkatest.Value)
	c.ProduceN("events", 1, 100, kafkatest.Value)
	no := false
	var logs bytes.Buffer
	s, err := New(Config{Kafka: query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", FailOnDataLoss: &no},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testCtx(t)
	start := Offsets{"events": {0: 10, 1: 20}}.Encode()
	c.DeleteRecords("events", 0, 25)

	end, err := s.Next(ctx, start, nil)
	if err != nil {
		t.Fatalf("Next with failOnDataLoss false: %v", err)
	}
	if got, want := string(end), `{"events":{"0":100,"1":100}}`; got != want {
		t.Fatalf("Next = %s, want %s", got, want)
	}
	got := positions(readBatch(t, s, start, end))
	want := sortedStrings(expectPositions("events", 0, 25, 100), expectPositions("events", 1, 20, 100))
	if !equalStrings(got, want) {
		t.Fatalf("read %d records, want %d (from 25 on partition 0)", len(got), len(want))
	}
	if n := s.SkippedOffsets(start, end); n != 15 {
		t.Fatalf("SkippedOffsets = %d, want 15 (offsets 10..24)", n)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "partition=events-0 wanted=10 earliest=25") {
		t.Fatalf("no warning naming the lost offsets in the log:\n%s", logs.String())
	}

	// A re-run on a fresh Source (a restarted driver) recounts in Splits.
	s2 := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", FailOnDataLoss: &no})
	if _, err := s2.Splits(ctx, start, end); err != nil {
		t.Fatal(err)
	}
	if n := s2.SkippedOffsets(start, end); n != 15 {
		t.Fatalf("SkippedOffsets after re-planning = %d, want 15", n)
	}

	// Deleted between planning and reading: Read skips, too.
	c.ProduceN("events", 1, 50, kafkatest.Value) // offsets 100..149
	start2, end2 := end, Offsets{"events": {0: 100, 1: 150}}.Encode()
	splits, err := s.Splits(ctx, start2, end2)
	if err != nil || len(splits) != 1 {
		t.Fatalf("Splits = %v, %v", splits, err)
	}
	c.DeleteRecords("events", 1, 120)
	var offsets []int64
	if err := s.Read(ctx, splits[0], func(r *source.Record) error { offsets = append(offsets, r.Offset); return nil }); err != nil {
		t.Fatalf("Read with failOnDataLoss false: %v", err)
	}
	if len(offsets) != 30 || offsets[0] != 120 || offsets[29] != 149 {
		t.Fatalf("read offsets %v, want 120..149", offsets)
	}
}

func TestReadStopsWhenContextIsCancelled(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"))
	c.ProduceN("events", 0, 10, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"})
	// A range past the end of the partition: Read would wait for records.
	split := Range{Topic: "events", Partition: 0, From: 5, To: 20}.Split()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := s.Read(ctx, split, func(*source.Record) error {
		n++
		if n == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel: %v, want context.Canceled", err)
	}
}

func TestReadStopsOnCallbackError(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"))
	c.ProduceN("events", 0, 10, kafkatest.Value)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"})
	stop := errors.New("stop")
	n := 0
	err := s.Read(testCtx(t), Range{Topic: "events", Partition: 0, From: 0, To: 10}.Split(), func(*source.Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("Read = %v after %d records, want the callback's error after 3", err, n)
	}
}
