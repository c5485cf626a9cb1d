package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/generator"
)

// Topic is the embedded broker's topic the feeder produces to.
const Topic = "learning.progress"

// topicPartitions is Topic's partition count.
const topicPartitions = 4

// executors is how many executors Run starts.
const executors = 2

// Events are the generator settings of the demo's events. Event time runs
// at 300x wall time, so a five-minute window closes about every second.
func Events() query.GeneratorSource {
	return query.GeneratorSource{
		RowsPerSecond:     2000,
		Courses:           12,
		LateFraction:      0.002,
		Jitter:            query.Duration(30 * time.Second),
		Seed:              42,
		EventTimePerRow:   query.Duration(150 * time.Millisecond),
		MaxRowsPerTrigger: 50000,
	}
}

// Spec is the course-activity tile with a Parquet sink and a local
// checkpoint under dir, reading src.
func Spec(dir string, src query.Source) query.Spec {
	return query.Spec{
		Name:      "course-activity-tile",
		Source:    src,
		Watermark: &query.Watermark{Column: "event_time", Delay: query.Duration(10 * time.Minute)},
		Aggregate: &query.Aggregate{
			Window:   &query.Window{Column: "event_time", Size: query.Duration(5 * time.Minute)},
			GroupBy:  []string{"course_id"},
			Measures: []query.Measure{{Name: "event_count", Fn: query.FnCount}},
		},
		OutputMode:         query.Append,
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: filepath.Join(dir, "course_activity_tile"), PartitionBy: "window_date"}},
		CheckpointLocation: filepath.Join(dir, "checkpoint"),
		Trigger:            query.Trigger{ProcessingTime: query.Duration(time.Second)},
		ShufflePartitions:  4,
	}
}

// Options configure Run.
type Options struct {
	// Dir holds the broker's data, the executors' local data, the
	// checkpoint and the Parquet output (an absolute path).
	Dir    string
	Logger *slog.Logger
	// Stdout is the query's standard output (microbatch.Options.Stdout).
	Stdout io.Writer
	// Announce, if set, is told the query's spec and the broker's address
	// once the cluster is up, before the query starts.
	Announce func(spec query.Spec, broker string)
	// Observer, if set, is told what the query's loop did.
	Observer progress.Observer
	// Tracker, if set, is kept current as `driver serve` keeps its own:
	// the query's desired and observed state, its progress, the batch in
	// flight and the executors registered (the status page and the
	// metrics read it).
	Tracker *monitor.Tracker
}

// Run runs the embedded cluster and the tile on it until ctx ends, which
// is a clean stop (nil). It returns once the feeder, the executors and the
// driver's services have stopped.
func Run(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	broker, err := kfake.NewCluster(kfake.Ports(0), kfake.DataDir(filepath.Join(opts.Dir, "kafka")), kfake.SeedTopics(topicPartitions, Topic))
	if err != nil {
		return fmt.Errorf("demo: start the embedded broker: %w", err)
	}
	defer broker.Close()
	addr := broker.ListenAddrs()[0]

	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	drv, err := dispatch.NewDriver(dispatch.DriverOptions{Listen: "127.0.0.1:0", Token: token, Logger: log})
	if err != nil {
		return err
	}
	serveCtx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	var served, nodes sync.WaitGroup
	served.Go(func() { _ = drv.Serve(serveCtx) })

	nodeCtx, stopNodes := context.WithCancel(context.Background())
	for i := 0; i < executors; i++ {
		node, err := executor.NewNode(executor.NodeOptions{
			Driver: drv.Addr(), Listen: "127.0.0.1:0", DataDir: filepath.Join(opts.Dir, fmt.Sprintf("executor-%d", i)),
			Token: token, Logger: log.With("executor", i),
		})
		if err != nil {
			stopNodes()
			return err
		}
		nodes.Go(func() { _ = node.Run(nodeCtx) })
	}
	feedCtx, stopFeed := context.WithCancel(ctx)
	nodes.Go(func() {
		if err := Feed(feedCtx, addr, Events()); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("demo feeder stopped", "err", err)
		}
	})
	defer func() {
		// Executors drain and deregister while the driver still serves.
		stopFeed()
		stopNodes()
		nodes.Wait()
		stopServe()
		served.Wait()
	}()

	spec := Spec(opts.Dir, query.Source{
		Kafka:  &query.KafkaSource{BootstrapServers: addr, Subscribe: Topic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 50000},
		Schema: query.GeneratorSchema(),
	})
	if opts.Announce != nil {
		opts.Announce(spec, addr)
	}
	eopts := microbatch.Options{Logger: log, Stdout: opts.Stdout, SourceRetryFor: time.Minute, Observer: opts.Observer}
	if tr := opts.Tracker; tr != nil {
		track(ctx, tr, drv, spec, &eopts)
	}
	err = serve(ctx, drv, spec, executors, eopts)
	if tr := opts.Tracker; tr != nil {
		state := monitor.Failed
		if ctx.Err() != nil {
			state, err = monitor.Stopped, nil
		}
		tr.SetState(monitor.Ref{Name: spec.Name}, state, err)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// track keeps tr current for the demo's query: its desired and observed
// states, each committed batch, the batch in flight, retries, and the
// executors registered with drv (every second until ctx ends).
func track(ctx context.Context, tr *monitor.Tracker, drv *dispatch.Driver, spec query.Spec, opts *microbatch.Options) {
	ref := monitor.Ref{Name: spec.Name}
	tr.SetDesired(ref, monitor.DesiredRunning, 0)
	tr.SetState(ref, monitor.Starting, nil)
	tr.SetTrigger(ref, time.Duration(spec.Trigger.ProcessingTime))
	opts.Observer = progress.Observers{tr.Observer(ref), opts.Observer}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			tr.SetExecutors(len(drv.Members.Live()))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// serve builds the query and runs it on the driver's executors.
func serve(ctx context.Context, drv *dispatch.Driver, spec query.Spec, minExecutors int, opts microbatch.Options) error {
	job, err := microbatch.Build(ctx, spec, opts)
	if err != nil {
		return err
	}
	defer job.Close()
	runner, err := drv.NewRunner(dispatch.RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, Logger: opts.Logger, Hook: opts.Hook, MinExecutors: minExecutors})
	if err != nil {
		return err
	}
	start := time.Now()
	err = job.RunWith(ctx, runner, nil)
	st := runner.Stats()
	opts.Logger.Info("query stopped", "query", spec.Name, "id", job.Query.QueryID(), "batches", st.Batches, "inputRows", st.InputRows,
		"shuffleBytes", st.ShuffleBytes, "shuffleRecords", st.ShuffleRecords, "mapRetries", st.MapRetries, "seconds", time.Since(start).Seconds())
	return err
}

// Feed produces generator events to Topic on the broker at addr at
// opts.RowsPerSecond, continuing after the records already there (so a
// second run resumes the same event sequence), until ctx ends.
func Feed(ctx context.Context, addr string, opts query.GeneratorSource) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, Topic)
	if err != nil {
		return fmt.Errorf("feeder: read end offsets: %w", err)
	}
	var next int64
	ends.Each(func(o kadm.ListedOffset) { next += o.Offset })
	gen := generator.New(opts)
	perTick := opts.RowsPerSecond / 10
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		recs := make([]*kgo.Record, 0, perTick)
		for i := int64(0); i < perTick; i++ {
			_, course, _, _ := gen.Event(next)
			recs = append(recs, &kgo.Record{Topic: Topic, Partition: int32(next % topicPartitions), Key: []byte(course), Value: gen.AppendLine(nil, next)})
			next++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("feeder: produce: %w", err)
		}
	}
}
