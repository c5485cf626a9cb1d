package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/kafka"
)

// The partitions measurement: how the cost of a batch follows
// its rows and not the topic's partition count, and what one driver
// carries.
//
//   - throughput: the same events in topics of 8, 64, 512 and 1,024
//     partitions (round-robin, so no row is late), drained by the engine
//     in this process, then on 2 and 16 executors (cluster nodes in this
//     process, real gRPC over loopback);
//   - batch: at 1,024 (and 8) partitions, the duration of 20,000-row
//     batches and of the final no-data batch, the planning calls alone,
//     and the raw loop's cost of the same rows;
//   - scale: `driver serve` and executor processes (one slot each) over
//     1,024 partitions: the driver's CPU and memory per batch, its CPU
//     while executors only heartbeat, and the time until a batch runs
//     without executors that leave at once (SIGTERM: drain).

// PartitionsConfig is the partitions part of the command line.
type PartitionsConfig struct {
	Rows       int     // events per throughput topic
	Counts     []int32 // partition counts of the throughput topics
	Executors  []int   // 0: one process; n: n in-process executors
	MaxOffsets int64   // maxOffsetsPerTrigger of the throughput runs
	Runs       int
	State      int // shufflePartitions

	BatchRows       int64 // rows per batch of the batch figures
	BatchPartitions []int32

	ScaleExecutors, ScalePartitions, ScaleLeave int
	ScaleRows                                   int
	ScaleIdle                                   time.Duration
	Dir                                         string
}

// partitionsTopic names a topic by its role and partition count.
func partitionsTopic(role string, partitions int32) string {
	return fmt.Sprintf("%s.%s.%d", kafkaTopicPrefix, role, partitions)
}

func createTopic(ctx context.Context, addr, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

func preload(ctx context.Context, b *kafkaBroker, topic string, rows int, partitions int32, out io.Writer) error {
	if err := createTopic(ctx, b.addr, topic, partitions); err != nil {
		return err
	}
	pr, err := produceTile(ctx, b.addr, topic, generatorOptions(int64(rows), 0), rows, partitions)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "partitions: produced %d records to %s (%d partitions) in %v\n", rows, topic, partitions, pr.Elapsed.Round(time.Millisecond))
	return nil
}

// runPartitions runs the whole partitions measurement and prints it.
func runPartitions(ctx context.Context, pc PartitionsConfig, out io.Writer) error {
	b, err := startKafka(1)
	if err != nil {
		return err
	}
	defer b.close()
	fmt.Fprintf(out, "partitions: kfake broker on %s; load average %s\n", b.addr, loadAvg())
	if pc.Rows > 0 && len(pc.Counts) > 0 {
		if err := partitionsThroughput(ctx, pc, b, out); err != nil {
			return err
		}
	}
	if pc.BatchRows > 0 && len(pc.BatchPartitions) > 0 {
		if err := partitionsBatches(ctx, pc, b, out); err != nil {
			return err
		}
	}
	if pc.ScaleExecutors > 0 {
		if err := partitionsScale(ctx, pc, b, out); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "partitions: load average at the end %s\n", loadAvg())
	return nil
}

func partitionsSpec(addr, topic, dir string, maxOffsets int64, state int) query.Spec {
	spec := kafkaSpec(addr, topic, dir, maxOffsets, nil)
	spec.ShufflePartitions = state
	return spec
}

func partitionsThroughput(ctx context.Context, pc PartitionsConfig, b *kafkaBroker, out io.Writer) error {
	type key struct {
		parts int32
		execs int
	}
	results := map[key][]float64{}
	for _, n := range pc.Counts {
		topic := partitionsTopic("throughput", n)
		if err := preload(ctx, b, topic, pc.Rows, n, out); err != nil {
			return err
		}
	}
	for r := range max(pc.Runs, 1) {
		for _, n := range pc.Counts {
			for _, e := range pc.Executors {
				dir := filepath.Join(pc.Dir, fmt.Sprintf("tp-%d-%d-%d", n, e, r))
				spec := partitionsSpec(b.addr, partitionsTopic("throughput", n), dir, pc.MaxOffsets, pc.State)
				var er *EngineRun
				var err error
				if e == 0 {
					er, err = runEngine(ctx, spec, 0)
				} else {
					er, err = runOnExecutors(ctx, spec, e, dir)
				}
				if err != nil {
					return fmt.Errorf("%d partitions, %d executors: %w", n, e, err)
				}
				os.RemoveAll(dir)
				if er.InputRows != int64(pc.Rows) {
					return fmt.Errorf("%d partitions, %d executors: read %d rows, want %d", n, e, er.InputRows, pc.Rows)
				}
				v := eps(pc.Rows, er.Elapsed)
				results[key{n, e}] = append(results[key{n, e}], v)
				fmt.Fprintf(out, "round %d partitions %5d  %-12s %7.2f s  %6.3f M events/s  %d batches  load %s\n",
					r+1, n, execLabel(e), er.Elapsed.Seconds(), v/1e6, len(er.Batches), loadAvg())
			}
		}
	}
	fmt.Fprintf(out, "\nthroughput, %d events, maxOffsetsPerTrigger %d, %d state partitions (median M events/s; ratio to 8 partitions)\n", pc.Rows, pc.MaxOffsets, pc.State)
	for _, e := range pc.Executors {
		base := median(results[key{pc.Counts[0], e}])
		fmt.Fprintf(out, "  %-12s", execLabel(e))
		for _, n := range pc.Counts {
			m := median(results[key{n, e}])
			fmt.Fprintf(out, "  %d: %.3f (%.2fx)", n, m/1e6, m/base)
		}
		fmt.Fprintln(out)
	}
	return nil
}

func execLabel(e int) string {
	if e == 0 {
		return "one process"
	}
	return fmt.Sprintf("%d executors", e)
}

// runOnExecutors runs spec on n executors in this process: a driver and n
// cluster nodes talking gRPC over loopback, two slots each.
func runOnExecutors(ctx context.Context, spec query.Spec, n int, dir string) (*EngineRun, error) {
	drv, err := dispatch.NewDriver(dispatch.DriverOptions{Listen: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = drv.Serve(serveCtx) })
	nodeCtx, stopNodes := context.WithCancel(ctx)
	defer func() {
		stopNodes()
		stopServe()
		wg.Wait()
	}()
	for i := range n {
		node, err := executor.NewNode(executor.NodeOptions{Driver: drv.Addr(), Listen: "127.0.0.1:0", Slots: 2,
			DataDir: filepath.Join(dir, fmt.Sprintf("executor-%d", i))})
		if err != nil {
			return nil, err
		}
		wg.Go(func() { _ = node.Run(nodeCtx) })
	}
	rec := &recorder{}
	start := time.Now()
	job, err := microbatch.Build(ctx, spec, microbatch.Options{WrapStore: checkpointOnly(rec.wrap), Observer: progress.Committed(rec.progress), Hook: rec.hook})
	if err != nil {
		return nil, fmt.Errorf("build engine: %w", err)
	}
	rec.baseline()
	r, err := drv.NewRunner(dispatch.RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, MinExecutors: n})
	if err != nil {
		job.Close()
		return nil, err
	}
	var runErr error
	// The label tells the driver's side (scheduler, runner, planning)
	// apart in a -cpuprofile: go tool pprof -tagfocus role=driver.
	pprof.Do(ctx, pprof.Labels("role", "driver"), func(ctx context.Context) { runErr = job.RunWith(ctx, r, nil) })
	closeErr := job.Close()
	elapsed := time.Since(start)
	if err := errors.Join(runErr, closeErr); err != nil {
		return nil, fmt.Errorf("run on %d executors: %w", n, err)
	}
	return summarize(ctx, rec, spec, elapsed)
}

func partitionsBatches(ctx context.Context, pc PartitionsConfig, b *kafkaBroker, out io.Writer) error {
	rows := int(pc.BatchRows * 10)
	for _, n := range pc.BatchPartitions {
		topic := partitionsTopic("batch", n)
		if err := preload(ctx, b, topic, rows, n, out); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nbatches of %d rows (%d rows, availableNow), %d state partitions, one process\n", pc.BatchRows, rows, pc.State)
	for _, n := range pc.BatchPartitions {
		topic := partitionsTopic("batch", n)
		ends, err := endOffsets(ctx, b.addr, topic)
		if err != nil {
			return err
		}
		var data, noData, raw []float64
		for r := range max(pc.Runs, 1) {
			res, _, err := refKafka(ctx, fairRef, b.addr, topic, ends, runtime.GOMAXPROCS(0))
			if err != nil {
				return err
			}
			raw = append(raw, float64(res.Elapsed.Microseconds())/1000*float64(pc.BatchRows)/float64(rows))
			dir := filepath.Join(pc.Dir, fmt.Sprintf("batch-%d-%d", n, r))
			er, err := runEngine(ctx, partitionsSpec(b.addr, topic, dir, pc.BatchRows, pc.State), 0)
			if err != nil {
				return err
			}
			os.RemoveAll(dir)
			for _, bt := range er.Batches {
				ms := float64(bt.Progress.DurationMs["triggerExecution"])
				if bt.Progress.NumInputRows > 0 {
					data = append(data, ms)
				} else {
					noData = append(noData, ms)
				}
			}
		}
		plan, err := planningCost(ctx, b.addr, topic, 20)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %5d partitions: data batch median %.0f ms [%.0f-%.0f], no-data batch median %.0f ms (%d), raw loop on the same rows %.1f ms, planning (Latest+Next) median %.1f ms; load %s\n",
			n, median(data), slices.Min(data), slices.Max(data), median(noData), len(noData), median(raw), plan, loadAvg())
	}
	return nil
}

// planningCost times the driver's source calls for one batch: Latest and
// Next over every partition of topic (the median of n).
func planningCost(ctx context.Context, addr, topic string, n int) (float64, error) {
	s, err := kafka.New(kafka.Config{Kafka: query.KafkaSource{BootstrapServers: addr, Subscribe: topic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 20000}})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	start, err := s.Initial(ctx)
	if err != nil {
		return 0, err
	}
	var ms []float64
	for range n {
		t := time.Now()
		latest, err := s.Latest(ctx, start, time.Now())
		if err != nil {
			return 0, err
		}
		if _, err := s.Next(ctx, start, latest); err != nil {
			return 0, err
		}
		ms = append(ms, float64(time.Since(t).Microseconds())/1000)
	}
	return median(ms), nil
}

// progressLines follows a progress JSON-lines file and sends each batch's
// progress with the time it was seen.
type seenProgress struct {
	p  progress.Report
	at time.Time
}

func followProgress(ctx context.Context, file string, ch chan<- seenProgress) {
	var off int64
	var partial []byte
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		if _, err := f.Seek(off, io.SeekStart); err == nil {
			rd := bufio.NewReader(f)
			for {
				line, err := rd.ReadBytes('\n')
				off += int64(len(line))
				if err != nil {
					partial = append(partial, line...)
					break
				}
				line = append(partial, line...)
				partial = nil
				var p progress.Report
				if json.Unmarshal(line, &p) == nil {
					select {
					case ch <- seenProgress{p, time.Now()}:
					case <-ctx.Done():
						f.Close()
						return
					}
				}
			}
			off -= int64(len(partial))
			partial = nil
		}
		f.Close()
	}
}
