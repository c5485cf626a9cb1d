package kafka

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// BenchmarkCatchUp reads a backlog of small JSON records (the size of the
// tile's events) from kfake over TCP, once with a bare franz-go consumer
// loop and once through the source (Splits, then Read of every split, one
// goroutine per split as map tasks would). Compare records/s.
//
//	go test -run '^$' -bench CatchUp ./source/kafka/
func BenchmarkCatchUp(b *testing.B) {
	const partitions, perPartition = 4, 250_000
	c := kafkatest.Start(b, kfake.SeedTopics(partitions, "events"))
	value := func(i int) []byte {
		return fmt.Appendf(nil, `{"event_id":"e-%08d","course_id":"course-%03d","lesson_id":"l-%04d","event_time":"2026-03-01T12:%02d:%02dZ"}`,
			i, i%500, i%2000, (i/60)%60, i%60)
	}
	for p := int32(0); p < partitions; p++ {
		c.ProduceN("events", p, perPartition, value)
	}
	const total = partitions * perPartition

	b.Run("raw-franz-go", func(b *testing.B) {
		for b.Loop() {
			offs := map[int32]kgo.Offset{}
			for p := int32(0); p < partitions; p++ {
				offs[p] = kgo.NewOffset().At(0)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": offs}))
			if err != nil {
				b.Fatal(err)
			}
			n, bytes := 0, 0
			for n < total {
				fs := cl.PollFetches(context.Background())
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) { n++; bytes += len(r.Value) })
			}
			cl.Close()
		}
		b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})

	s, err := New(Config{Kafka: query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := Offsets{"events": {0: 0, 1: 0, 2: 0, 3: 0}}.Encode()
	end := Offsets{"events": {0: perPartition, 1: perPartition, 2: perPartition, 3: perPartition}}.Encode()
	for _, minParts := range []int{0, 8} {
		s.set.minPartitions = minParts
		b.Run(fmt.Sprintf("source-read-minPartitions=%d", minParts), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			for b.Loop() {
				splits, err := s.Splits(ctx, start, end)
				if err != nil {
					b.Fatal(err)
				}
				var n atomic.Int64
				var wg sync.WaitGroup
				errs := make([]error, len(splits))
				for i, sp := range splits {
					wg.Add(1)
					go func() {
						defer wg.Done()
						local, bytes := int64(0), 0
						errs[i] = s.Read(ctx, sp, func(r *source.Record) error { local++; bytes += len(r.Value); return nil })
						n.Add(local)
					}()
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				if n.Load() != total {
					b.Fatalf("read %d records, want %d", n.Load(), total)
				}
			}
			b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	b.Run("raw-franz-go-one-partition", func(b *testing.B) {
		for b.Loop() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": {0: kgo.NewOffset().At(0)}}))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for n < perPartition {
				fs := cl.PollFetches(context.Background())
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				fs.EachRecord(func(*kgo.Record) { n++ })
			}
			cl.Close()
		}
		b.ReportMetric(float64(perPartition)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("source-read-one-split", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			n := 0
			err := s.Read(ctx, Range{Topic: "events", Partition: 0, From: 0, To: perPartition}.Split(), func(*source.Record) error { n++; return nil })
			if err != nil || n != perPartition {
				b.Fatalf("read %d, %v", n, err)
			}
		}
		b.ReportMetric(float64(perPartition)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkManySmallRanges reads one batch of 20,000 records spread over
// 512 partitions (39 each), as a capped batch over a many-partition topic
// does: Splits, then Read of every split by two goroutines (the task
// slots of a 2-core process). The cost should follow the records, not the
// partitions.
//
//	go test -run '^$' -bench ManySmallRanges ./source/kafka/
func BenchmarkManySmallRanges(b *testing.B) {
	const partitions, perPartition, slots = 512, 39, 2
	c := kafkatest.Start(b, kfake.SeedTopics(partitions, "events"))
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := range perPartition * 10 {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Value: kafkatest.Value(i)})
		}
	}
	c.Produce(recs...)
	s, err := New(Config{Kafka: query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	batch := 0
	for b.Loop() {
		from, to := Offsets{}, Offsets{}
		for p := int32(0); p < partitions; p++ {
			from.Set(TopicPartition{"events", p}, int64(batch%10*perPartition))
			to.Set(TopicPartition{"events", p}, int64(batch%10*perPartition+perPartition))
		}
		batch++
		splits, err := s.Splits(ctx, from.Encode(), to.Encode())
		if err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		next := atomic.Int64{}
		var wg sync.WaitGroup
		errs := make([]error, slots)
		for w := range slots {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(splits) || errs[w] != nil {
						return
					}
					errs[w] = s.Read(ctx, splits[i], func(*source.Record) error { n.Add(1); return nil })
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		if n.Load() != partitions*perPartition {
			b.Fatalf("read %d records, want %d", n.Load(), partitions*perPartition)
		}
		b.ReportMetric(float64(len(splits)), "tasks")
	}
	b.ReportMetric(float64(partitions*perPartition)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPlanning times what the driver asks the source for one batch
// over a topic of 1,024 partitions: Latest, Next and Splits.
//
//	go test -run '^$' -bench Planning ./source/kafka/
func BenchmarkPlanning(b *testing.B) {
	const partitions = 1024
	c := kafkatest.Start(b, kfake.SeedTopics(partitions, "events"))
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := range 20 {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Value: kafkatest.Value(i)})
		}
	}
	c.Produce(recs...)
	s, err := New(Config{Kafka: query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "earliest", MaxOffsetsPerTrigger: 10000}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	start, err := s.Initial(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		latest, err := s.Latest(ctx, start, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		end, err := s.Next(ctx, start, latest)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Splits(ctx, start, end); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(end)), "offsets-bytes")
	}
}
