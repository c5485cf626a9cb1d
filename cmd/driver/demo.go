package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source/generator"
)

const demoTopic = "learning.progress"

// demoEvents are the generator settings of the demo's events. Event time
// runs at 300x wall time, so a five-minute window closes about every
// second.
func demoEvents() query.GeneratorSource {
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

// demoSpec is the course-activity tile with a Parquet sink and a local
// checkpoint under dir, reading src.
func demoSpec(dir string, src query.Source) query.Spec {
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

func newDemoCmd() *cobra.Command {
	var dir string
	var inProcess bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the five-minute course-activity tile end to end with no set-up, printing windows as they close (Ctrl-C stops; run again to resume)",
		Long: `demo runs the whole architecture in this process: an embedded Kafka-protocol
broker fed by the event generator, the driver service and two executors
talking gRPC on loopback, a local checkpoint and Parquet output in --dir.
--in-process runs the query on the generator source with in-process tasks instead.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			sinkStore, err := objstore.NewFS(filepath.Join(abs, "course_activity_tile"))
			if err != nil {
				return err
			}
			printed := map[ids.BatchID]bool{}
			progress := func(p *scheduler.Progress) {
				if p.Sink.NumOutputRows > 0 {
					printBatchWindows(cmd.Context(), out, sinkStore, p.ID, p.BatchID, printed)
				}
			}
			if inProcess {
				gen := demoEvents()
				spec := demoSpec(abs, query.Source{Generator: &gen})
				announce(out, spec, "a generator at 2000 events/s, tasks in this process")
				return runSpec(cmd, spec, engine.Options{Progress: progress})
			}
			return runEmbeddedCluster(cmd, abs, progress)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "sluice-demo", "directory for the demo's broker data, checkpoint and Parquet output")
	cmd.Flags().BoolVar(&inProcess, "in-process", false, "run on the generator source with in-process tasks (no broker, no executors)")
	return cmd
}

func announce(out io.Writer, spec query.Spec, how string) {
	fmt.Fprintf(out, "demo: the course-activity tile (5-minute windows, 10-minute watermark, append) on %s\n", how)
	fmt.Fprintf(out, "demo: checkpoint %s\ndemo: parquet    %s\ndemo: Ctrl-C stops; running again resumes from the checkpoint\n", spec.CheckpointLocation, spec.Sink.Parquet.Path)
	fmt.Fprintf(out, "demo: %s\n", demoLateNote(spec))
}

// demoLateNote explains the first windows the demo prints: they are old,
// because batch 0 runs with no watermark and so accepts the generator's
// late rows (Spark's rule: the watermark takes effect from the next batch).
func demoLateNote(spec query.Spec) string {
	late := "late rows"
	if g := spec.Source.Generator; g != nil && g.LateFraction > 0 {
		late = fmt.Sprintf("late rows (%.1f%% of events, %s older than the rest)", g.LateFraction*100, generator.LateDelay)
	} else if spec.Source.Kafka != nil {
		d := demoEvents()
		late = fmt.Sprintf("late rows (%.1f%% of events, %s older than the rest)", d.LateFraction*100, generator.LateDelay)
	}
	return fmt.Sprintf("the first windows printed are about %s older than the ones after them: the generator also sends %s, and batch 0 has no watermark yet, "+
		"so it accepts them (as Spark does) and their windows close at once; from batch 1 on such rows are dropped as late", generator.LateDelay, late)
}

// runEmbeddedCluster runs kfake, a feeder, the driver service and two
// executors in this process, all on loopback.
func runEmbeddedCluster(cmd *cobra.Command, dir string, progress func(*scheduler.Progress)) error {
	ctx := cmd.Context()
	log := logger(cmd)
	out := cmd.OutOrStdout()
	broker, err := kfake.NewCluster(kfake.Ports(0), kfake.DataDir(filepath.Join(dir, "kafka")), kfake.SeedTopics(4, demoTopic))
	if err != nil {
		return fmt.Errorf("demo: start the embedded broker: %w", err)
	}
	defer broker.Close()
	addr := broker.ListenAddrs()[0]

	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	drv, err := cluster.NewDriver(cluster.DriverOptions{Listen: "127.0.0.1:0", Token: token, Logger: log})
	if err != nil {
		return err
	}
	serveCtx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	var served, nodes sync.WaitGroup
	served.Go(func() { _ = drv.Serve(serveCtx) })

	nodeCtx, stopNodes := context.WithCancel(context.Background())
	for i := 0; i < 2; i++ {
		node, err := cluster.NewNode(cluster.NodeOptions{
			Driver: drv.Addr(), Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, fmt.Sprintf("executor-%d", i)),
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
		if err := feed(feedCtx, addr, demoEvents()); err != nil && !errors.Is(err, context.Canceled) {
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

	spec := demoSpec(dir, query.Source{
		Kafka:  &query.KafkaSource{BootstrapServers: addr, Subscribe: demoTopic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 50000},
		Schema: query.GeneratorSchema(),
	})
	announce(out, spec, fmt.Sprintf("an embedded broker (%s, topic %s) fed at 2000 events/s, a driver and 2 executors over gRPC", addr, demoTopic))
	opts := engine.Options{Logger: log, Stdout: out, SourceRetryFor: time.Minute, Progress: monitor.Fanout(monitor.LinePrinter(os.Stderr), progress)}
	err = serveQuery(ctx, drv, spec, 2, opts)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// feed produces generator events to the broker at the configured rate,
// continuing after the records already there (so a second run resumes the
// same event sequence).
func feed(ctx context.Context, addr string, opts query.GeneratorSource) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, demoTopic)
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
			recs = append(recs, &kgo.Record{Topic: demoTopic, Partition: int32(next % 4), Key: []byte(course), Value: gen.AppendLine(nil, next)})
			next++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("feeder: produce: %w", err)
		}
	}
}

// printBatchWindows prints the windows batch id committed to the sink.
func printBatchWindows(ctx context.Context, out io.Writer, store objstore.Store, queryID string, id ids.BatchID, printed map[ids.BatchID]bool) {
	if printed[id] {
		return
	}
	entries, err := parquet.LogEntries(ctx, store)
	if err != nil {
		return
	}
	printed[id] = true
	for _, e := range entries {
		if e.BatchID != id || e.QueryID != queryID {
			continue
		}
		for _, f := range e.Files {
			data, err := store.Get(ctx, f)
			if err != nil {
				continue
			}
			cols, rows, err := parquet.ReadFile(data)
			if err != nil {
				continue
			}
			for _, r := range rows {
				cells := make([]string, 0, len(cols))
				for i, c := range cols {
					cells = append(cells, c.Name+"="+r[i].String())
				}
				fmt.Fprintln(out, "window closed: "+strings.Join(cells, " "))
			}
		}
	}
}
