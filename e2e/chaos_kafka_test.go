package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testutil/faultproxy"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

const chaosTopic = "learning.progress"

// kafkaChaosSpec is the tile reading chaosTopic from brokers, on p.
func kafkaChaosSpec(brokers string, p place, trigger query.Trigger, maxOffsets int64) query.Spec {
	spec := tiletest.Spec("", p.Sink, p.Checkpoint)
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: brokers, Subscribe: chaosTopic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: maxOffsets}
	spec.Trigger = trigger
	return spec
}

// produceEvents writes events round-robin over partitions through a client
// of brokers and waits for every acknowledgement.
func produceEvents(t *testing.T, brokers string, events []tiletest.Event, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, len(events))
	for i, e := range events {
		recs = append(recs, &kgo.Record{Topic: chaosTopic, Partition: int32(i) % partitions, Value: []byte(e.JSON())})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records: %v", len(recs), err)
	}
}

// sinkSnapshot is what a failed batch must not change.
type sinkSnapshot struct {
	commits, files, logEntries []string
}

func snapshotOf(t *testing.T, p place) sinkSnapshot {
	t.Helper()
	ctx := context.Background()
	cids, err := checkpoint.New(p.checkpoint(t)).CommitIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var s sinkSnapshot
	for _, id := range cids {
		s.commits = append(s.commits, fmt.Sprint(id))
	}
	sink := p.sink(t)
	if s.files, err = parquet.ListDirectory(ctx, sink); err != nil {
		t.Fatal(err)
	}
	entries, err := parquet.LogEntries(ctx, sink)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		s.logEntries = append(s.logEntries, fmt.Sprint(e.BatchID))
	}
	return s
}

// Records deleted under the checkpoint (retention overtook the query while
// it was down): the driver process exits non-zero with ErrDataLoss naming
// topic, partition, the offset it wanted and the earliest one left, and
// writes nothing for that batch: no commit, no sink log entry, no file.
func TestChaosKafkaRecordsDeletedUnderTheCheckpointStopTheDriverWithDetails(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic(chaosTopic, 2)
	events := tiletest.Events(121, 2000, 3*time.Second, chaosDisorder, 4)
	produceEvents(t, c.Addr, events[:1000], 2) // offsets 0..499 in each partition
	p := localPlace(t)
	specPath := writeSpec(t, kafkaChaosSpec(c.Addr, p, query.Trigger{AvailableNow: true}, 0))
	dir := t.TempDir()
	first := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "first.jsonl")})
	if err := first.wait(90 * time.Second); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.logs())
	}
	before := snapshotOf(t, p)
	lr := checkLogStore(t, p.checkpoint(t))

	produceEvents(t, c.Addr, events[1000:], 2) // offsets 500..999
	c.DeleteRecords(chaosTopic, 1, 800)

	second := oneProcess.start(t, queryArgs{spec: specPath, progress: filepath.Join(dir, "second.jsonl")})
	err := second.wait(90 * time.Second)
	if err == nil || killedBySignal(err) {
		t.Fatalf("the driver did not fail on data loss (exit %v):\n%s", err, second.logs())
	}
	logs := second.driver.Logs()
	t.Logf("the failure as the operator sees it: %s", lastLine(logs))
	for _, want := range []string{"data loss", chaosTopic, "partition 1", "500", "800"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the error does not name %q:\n%s", want, logs)
		}
	}
	after := snapshotOf(t, p)
	if !slices.Equal(before.commits, after.commits) || !slices.Equal(before.files, after.files) || !slices.Equal(before.logEntries, after.logEntries) {
		t.Fatalf("the failed batch wrote something:\nbefore %+v\nafter  %+v", before, after)
	}
	if prog := readProgressIf(t, second.progress); len(prog) != 0 {
		t.Fatalf("the failing driver reported %d batches", len(prog))
	}
	pending := pendingBatch(t, p.checkpoint(t))
	planned := "no"
	if pending != nil {
		planned = fmt.Sprintf("offsets/%d", pending.BatchID)
	}
	want := tiletest.Oracle(events[:1000], chaosWindow, chaosDelay)
	rep := checkSinkStore(t, p.sink(t), want)
	summary{scenario: "kafka-data-loss", seed: 121, batches: lr.batches, windows: len(want), duplicates: rep.duplicates, missing: rep.missing,
		extra: []string{"failed_batch_planned=" + planned}}.report(t)
	if !rep.ok() {
		t.Fatalf("the first run's output is not exact:\n%s", rep.diff)
	}
}

// kafkaBroker is a kfake broker in the test process on a fixed port with
// its data on disk, so it can go away and come back as the same broker.
type kafkaBroker struct {
	t       *testing.T
	dataDir string
	port    int
	addr    string
	c       *kfake.Cluster
}

func startKafkaBroker(t *testing.T) *kafkaBroker {
	b := &kafkaBroker{t: t, dataDir: t.TempDir()}
	b.up()
	b.addr = b.c.ListenAddrs()[0]
	_, portStr, _ := net.SplitHostPort(b.addr)
	fmt.Sscan(portStr, &b.port)
	t.Cleanup(func() { b.c.Close() })
	return b
}

// up starts the broker (on its port, after the first start).
func (b *kafkaBroker) up() {
	b.t.Helper()
	c, err := kfake.NewCluster(kfake.Ports(b.port), kfake.DataDir(b.dataDir), kfake.SeedTopics(2, chaosTopic))
	if err != nil {
		b.t.Fatalf("start kfake on port %d: %v", b.port, err)
	}
	b.c = c
}

// down stops the broker; its data stays on disk.
func (b *kafkaBroker) down() { b.c.Close() }

// brokerOutage runs a processingTime tile over a broker that goes away
// once, when outage decides, for two seconds, and requires the driver
// (run with --source-retry-for) to wait, resume, and write exactly the
// oracle.
func brokerOutage(t *testing.T, scenario string, p place, outage func(b *kafkaBroker, run *queryRun, read func() (int64, bool))) {
	b := startKafkaBroker(t)
	events := tiletest.Events(131, 4000, time.Second, chaosDisorder, 4)
	produceEvents(t, b.addr, events[:1000], 2)
	spec := kafkaChaosSpec(b.addr, p, query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)}, 250)
	run := oneProcess.start(t, queryArgs{spec: writeSpec(t, spec), progress: filepath.Join(t.TempDir(), "progress.jsonl"), env: p.Env,
		runArgs: []string{"--source-retry-for", "2m"}})
	// read returns the rows read so far and whether the last batch was a
	// no-data batch (the query is idle until new data arrives).
	read := func() (int64, bool) {
		var n int64
		prog := readProgressIf(t, run.progress)
		for _, pr := range prog {
			n += pr.NumInputRows
		}
		return n, len(prog) > 0 && prog[len(prog)-1].NoData
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !cond(); {
			if run.exited() {
				t.Fatalf("the driver exited while waiting for %s: %v\n%s", what, run.driver.err, run.logs())
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\n%s", what, run.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	outage(b, run, read)
	down := time.Now()
	time.Sleep(2 * time.Second) // the broker stays away across many triggers
	if run.exited() {
		t.Fatalf("the driver gave up while the broker was away: %v\n%s", run.driver.err, run.logs())
	}
	b.up()
	back := time.Now()
	produceEvents(t, b.addr, events[1000:], 2)
	t.Logf("broker away for %v; produced the rest %v after it came back", back.Sub(down).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))

	want := tiletest.Oracle(events, chaosWindow, chaosDelay)
	sink, cp := p.sink(t), p.checkpoint(t)
	waitFor("the exact output, committed", func() bool { return checkSinkStore(t, sink, want).ok() && pendingBatch(t, cp) == nil })
	if err := run.driver.Stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM after the outage: %v\n%s", err, run.logs())
	}
	prog := readProgressIf(t, run.progress)
	rows, _ := read()
	resumed := "n/a"
	for _, pr := range prog {
		if at := committedAt(t, pr); at.After(back) {
			resumed = fmt.Sprint(at.Sub(back).Milliseconds())
			break
		}
	}
	finish(t, p, want, summary{scenario: scenario, seed: 131, retries: retries(prog),
		extra: []string{fmt.Sprintf("rows=%d", rows), "broker_back_to_next_commit_ms=" + resumed}})
	if rows != int64(len(events)) {
		t.Fatalf("the query read %d rows, want each of the %d produced exactly once", rows, len(events))
	}
}

// The broker goes away while the query idles (everything produced so far
// read): planning fails, the driver, run with --source-retry-for, says it
// is waiting for the source and keeps the checkpoint unchanged; the broker
// comes back on the same port with its data, the query resumes and the
// output is exact.
func TestChaosKafkaBrokerAwayWhileIdleDriverWaitsAndResumesExactly(t *testing.T) {
	t.Parallel() // mostly waiting for the driver to notice the outage
	p := localPlace(t)
	brokerOutage(t, "kafka-broker-away/idle", p, func(b *kafkaBroker, run *queryRun, read func() (int64, bool)) {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if n, idle := read(); n >= 1000 && idle && pendingBatch(t, p.checkpoint(t)) == nil {
				break
			}
			if run.exited() || time.Now().After(deadline) {
				t.Fatalf("the query did not read the first 1000 rows and idle:\n%s", run.logs())
			}
		}
		b.down()
		down := time.Now()
		run.driver.WaitForLog("waiting for the source", 90*time.Second)
		t.Logf("the driver noticed the outage after %v (the Kafka client's metadata request gives up first)", time.Since(down).Round(time.Millisecond))
	})
}

// The broker goes away just after the driver logged offsets/N, before
// batch N asked the broker for anything (the checkpoint is on S3 behind a
// proxy that holds that write until the broker is down). The query should
// wait for the broker as it does while planning: batch retries share the
// --source-retry-for budget.
func TestChaosKafkaBrokerAwayAtTheStartOfABatchDriverWaitsAndResumes(t *testing.T) {
	srv := s3test.Start(t)
	proxy := newFaultProxy(t, srv.Endpoint, faultproxy.Config{})
	p := s3Place(t, srv, "kafka-outage", proxy.URL())
	hold := proxy.Hold(faultproxy.Match{Method: "PUT", Suffix: "/checkpoints/tile/offsets/2"})
	brokerOutage(t, "kafka-broker-away/batch-start", p, func(b *kafkaBroker, run *queryRun, _ func() (int64, bool)) {
		select {
		case <-hold.Arrived():
		case <-time.After(60 * time.Second):
			t.Fatalf("offsets/2 was never written:\n%s", run.logs())
		}
		b.down()
		hold.Release("")
	})
}
