package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

// Latency (-only latency, in -report): a steady load on a kfake topic
// (one partition), the engine in this process on a processingTime
// trigger, and a reader polling the Parquet sink directory. Event time
// runs latencySpeedup times faster than the wall clock, so windows close
// every second or so. For each window, the semantic delay ends when the
// record that first lifts the maximum event time to window end +
// watermark delay has been appended (ProduceSync returned); the latency
// beyond it is the time from then until the window's row is readable in
// the sink. The target allows the trigger interval on top.

const (
	latencySpeedup = 300 // event time per wall time
	latencyTick    = 20 * time.Millisecond
	latencyPoll    = 10 * time.Millisecond
)

// LatencyResult is one trigger's latencies, ms.
type LatencyResult struct {
	Trigger time.Duration
	// AtOnce: the run set trigger.noDataBatchesAtOnce.
	AtOnce bool `json:",omitempty"`
	Ms     []float64
}

// name is the run's trigger as the report names it.
func (l *LatencyResult) name() string {
	if l.AtOnce {
		return fmt.Sprintf("processingTime %v with noDataBatchesAtOnce", l.Trigger)
	}
	return fmt.Sprintf("processingTime %v", l.Trigger)
}

func runLatency(ctx context.Context, trigger time.Duration, atOnce bool, d time.Duration, dir string, out io.Writer) (*LatencyResult, error) {
	topic := "latency"
	b, err := startKafka(1, topic)
	if err != nil {
		return nil, err
	}
	defer b.close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(b.addr, ",")...), kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return nil, fmt.Errorf("create kafka producer: %w", err)
	}
	defer cl.Close()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runDir := filepath.Join(dir, fmt.Sprintf("latency-%v-%v", trigger, atOnce))
	src := query.Source{Kafka: &query.KafkaSource{BootstrapServers: b.addr, Subscribe: topic, StartingOffsets: "earliest"}, Schema: query.GeneratorSchema()}
	spec := tileSpec(src, runDir, query.Trigger{ProcessingTime: query.Duration(trigger), NoDataBatchesAtOnce: atOnce})
	job, err := microbatch.Build(ctx, spec, microbatch.Options{})
	if err != nil {
		return nil, fmt.Errorf("build engine: %w", err)
	}
	defer job.Close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(runCtx, nil) }()

	// appended[window start µs] = when the record that made it closable was appended.
	var mu sync.Mutex
	appended := map[int64]time.Time{}
	seen := map[int64]time.Time{}
	winUs, delayUs := windowSize.Microseconds(), watermarkDelay.Microseconds()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the sink reader
		defer wg.Done()
		st, err := objstore.NewFS(spec.Sink.Parquet.Path)
		if err != nil {
			return
		}
		for runCtx.Err() == nil {
			cols, rows, err := parquet.ReadCommitted(runCtx, st)
			now := time.Now()
			if err == nil {
				idx := slices.IndexFunc(cols, func(c query.Column) bool { return c.Name == query.WindowStart })
				mu.Lock()
				for _, r := range rows {
					if idx >= 0 {
						if _, ok := seen[r[idx].I]; !ok {
							seen[r[idx].I] = now
						}
					}
				}
				mu.Unlock()
			}
			select {
			case <-runCtx.Done():
			case <-time.After(latencyPoll):
			}
		}
	}()
	end := time.Now().Add(d)
	maxEvent := base.UnixMicro() - 1
	for i := 0; time.Now().Before(end); i++ {
		t := base.Add(time.Duration(i) * latencyTick * latencySpeedup)
		line := fmt.Sprintf(`{"event_id":"x-%d","course_id":"c-%03d","lesson_id":"l-0","event_time":"%s"}`, i, i%10, t.Format("2006-01-02T15:04:05.000Z07:00"))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(line)}).FirstErr(); err != nil {
			cancel()
			return nil, fmt.Errorf("produce: %w", err)
		}
		now := time.Now()
		ev := t.UnixMicro()
		// Windows whose end + delay this record reaches for the first time.
		for s := (maxEvent - delayUs - winUs) / winUs * winUs; s+winUs+delayUs <= ev; s += winUs {
			if s+winUs+delayUs > maxEvent && s >= base.UnixMicro() {
				mu.Lock()
				appended[s] = now
				mu.Unlock()
			}
		}
		maxEvent = max(maxEvent, ev)
		select {
		case err := <-done:
			return nil, fmt.Errorf("engine stopped: %v", err)
		case <-time.After(time.Until(now.Add(latencyTick))):
		}
	}
	time.Sleep(trigger + 2*time.Second) // let the last closable windows out
	cancel()
	wg.Wait()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("run engine: %w", err)
	}
	res := &LatencyResult{Trigger: trigger, AtOnce: atOnce}
	mu.Lock()
	defer mu.Unlock()
	for s, a := range appended {
		if v, ok := seen[s]; ok {
			res.Ms = append(res.Ms, float64(v.Sub(a).Microseconds())/1000)
		}
	}
	if len(res.Ms) == 0 {
		return nil, fmt.Errorf("trigger %v (noDataBatchesAtOnce %v): no window became readable (%d closable)", trigger, atOnce, len(appended))
	}
	slices.Sort(res.Ms)
	fmt.Fprintf(out, "latency, %s: %d windows, median %.0f ms, p99 %.0f ms, max %.0f ms\n", res.name(), len(res.Ms), median(res.Ms), quantile(res.Ms, 0.99), res.Ms[len(res.Ms)-1])
	return res, nil
}

// quantile returns the q-quantile of sorted xs (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
