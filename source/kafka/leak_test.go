package kafka

import (
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

func TestCloseLeavesNoGoroutinesAndIsIdempotent(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(3, "events"))
	for p := int32(0); p < 3; p++ {
		c.ProduceN("events", p, 100, kafkatest.Value)
	}
	ctx := testCtx(t)
	before := runtime.NumGoroutine()

	s, err := New(Config{Kafka: query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "earliest", MinPartitions: 6}})
	if err != nil {
		t.Fatal(err)
	}
	start, err := s.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end, err := s.Next(ctx, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(readBatch(t, s, start, end)); n != 300 {
		t.Fatalf("read %d records, want 300", n)
	}
	if _, _, err := s.Lag(ctx, end); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // poll interval; the deadline above bounds the wait
	}
	err = s.Read(ctx, Range{Topic: "events", Partition: 0, From: 0, To: 10}.Split(), func(*source.Record) error { return nil })
	if err == nil {
		t.Fatal("Read after Close succeeded")
	}
}
