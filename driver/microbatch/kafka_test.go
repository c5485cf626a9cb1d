package microbatch_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source/kafka"
)

const topic = "learning.progress"

// kafkaSpec is the tile reading topic from cluster c.
func kafkaSpec(c *kafkatest.Cluster, dir string) query.Spec {
	spec := tiletest.Spec("", filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: c.Addr, Subscribe: topic, StartingOffsets: "earliest"}
	return spec
}

// produce writes events round-robin over partitions by course (a key), so
// one course's events stay in order within a partition.
func produce(c *kafkatest.Cluster, events []tiletest.Event, partitions int32) {
	recs := make([]*kgo.Record, 0, len(events))
	for i, e := range events {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Key: []byte(e.Course), Value: []byte(e.JSON())})
	}
	c.Produce(recs...)
}

func kafkaWindows(t *testing.T, dir string) []tiletest.Window {
	return sinkWindows(t, filepath.Join(dir, "out"), true)
}

// The tile end to end from a topic with several partitions: the output
// equals the oracle computed from what was produced, and
// maxOffsetsPerTrigger bounds every batch while the query catches up.
func TestKafkaTileEqualsOracleAndCapBoundsEveryBatch(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic(topic, 4)
	events := tiletest.Events(31, 12000, 100*time.Millisecond, 3*time.Minute, 7)
	produce(c, events, 4)
	dir := t.TempDir()
	spec := kafkaSpec(c, dir)
	spec.Source.Kafka.MaxOffsetsPerTrigger = 1500
	progress := run(t, spec, microbatch.Options{})
	var data int
	var total int64
	for _, p := range progress {
		if p.NumInputRows > 1500 {
			t.Fatalf("batch %d read %d rows, above maxOffsetsPerTrigger 1500", p.BatchID, p.NumInputRows)
		}
		if !p.NoData {
			data++
		}
		total += p.NumInputRows
	}
	if data < 8 || total != int64(len(events)) {
		t.Fatalf("want the backlog drained over at least 8 capped batches; got %d data batches reading %d of %d rows", data, total, len(events))
	}
	if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), kafkaWindows(t, dir)); d != "" {
		t.Fatalf("Kafka tile differs from the oracle:\n%s", d)
	}
}

// Restart resumes exactly where the last commit ended, whatever a consumer
// group of the same name says; startingOffsets is ignored once the
// checkpoint has offsets.
func TestKafkaRestartResumesFromCheckpointNotGroupOrStartingOffsets(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic(topic, 3)
	events := tiletest.Events(41, 6000, 200*time.Millisecond, 2*time.Minute, 5)
	produce(c, events[:3000], 3)
	dir := t.TempDir()
	spec := kafkaSpec(c, dir)
	spec.Source.Kafka.MaxOffsetsPerTrigger = 700
	run(t, spec, microbatch.Options{})

	// A consumer group named like the query points somewhere else entirely.
	adm := c.Admin()
	var offs kadm.Offsets
	for p := int32(0); p < 3; p++ {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: 5})
	}
	if _, err := adm.CommitOffsets(context.Background(), spec.Name, offs); err != nil {
		t.Fatal(err)
	}
	produce(c, events[3000:], 3)
	spec.Source.Kafka.StartingOffsets = "latest"
	progress := run(t, spec, microbatch.Options{})
	var read int64
	for _, p := range progress {
		read += p.NumInputRows
	}
	if read != 3000 {
		t.Fatalf("second run read %d rows, want exactly the 3000 produced after the first run's commit", read)
	}
	if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), kafkaWindows(t, dir)); d != "" {
		t.Fatalf("output after restart differs from the oracle:\n%s", d)
	}
}

// Records deleted below the checkpoint's next offset: failOnDataLoss true
// fails loudly, naming topic, partition, wanted and earliest offset, and
// writes nothing; false skips, counts, and continues.
func TestKafkaDataLossFailsLoudlyOrSkipsAndCounts(t *testing.T) {
	for _, fail := range []bool{true, false} {
		t.Run(map[bool]string{true: "failOnDataLoss=true", false: "failOnDataLoss=false"}[fail], func(t *testing.T) {
			c := kafkatest.Start(t)
			c.CreateTopic(topic, 2)
			events := tiletest.Events(51, 2000, time.Second, time.Minute, 3)
			produce(c, events[:1000], 2)
			dir := t.TempDir()
			spec := kafkaSpec(c, dir)
			spec.Source.Kafka.FailOnDataLoss = &fail
			run(t, spec, microbatch.Options{})
			sinkStore, _ := objstore.NewFS(filepath.Join(dir, "out"))
			before, _ := parquet.LogEntries(context.Background(), sinkStore)

			produce(c, events[1000:], 2) // offsets 500..999 in each partition
			c.DeleteRecords(topic, 1, 800)

			if !fail {
				progress := run(t, spec, microbatch.Options{})
				var read, skipped int64
				for _, p := range progress {
					read += p.NumInputRows
					skipped += p.Sources[0].Metrics["skippedOffsets"]
				}
				if skipped != 300 || read != 700 {
					t.Fatalf("failOnDataLoss=false: skipped %d offsets and read %d rows, want 300 and 700", skipped, read)
				}
				return
			}
			job, err := microbatch.Build(context.Background(), spec, microbatch.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer job.Close()
			err = job.Run(context.Background(), nil)
			var dl *kafka.DataLossError
			if !errors.Is(err, kafka.ErrDataLoss) || !errors.As(err, &dl) {
				t.Fatalf("want ErrDataLoss, got %v", err)
			}
			if dl.Topic != topic || dl.Partition != 1 || dl.Wanted != 500 || dl.Earliest != 800 {
				t.Fatalf("data loss details %+v, want topic %s partition 1 wanted 500 earliest 800", dl, topic)
			}
			for _, s := range []string{topic, "500", "800"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
			after, _ := parquet.LogEntries(context.Background(), sinkStore)
			if len(after) != len(before) {
				t.Fatalf("a failed data-loss batch wrote sink log entries: %d -> %d", len(before), len(after))
			}
		})
	}
}

// A partition added while the query runs is read from its earliest offset,
// and a malformed value is counted and set aside, not a crash.
func TestKafkaAddedPartitionIsReadFromEarliestAndMalformedValueIsSetAside(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic(topic, 2)
	events := tiletest.Events(61, 3000, 300*time.Millisecond, time.Minute, 4)
	produce(c, events[:1500], 2)
	c.Produce(&kgo.Record{Topic: topic, Partition: 0, Value: []byte(`{"event_id":"x","course_id":`)})
	dir := t.TempDir()
	spec := kafkaSpec(c, dir)
	first := run(t, spec, microbatch.Options{})
	var malformed int64
	for _, p := range first {
		malformed += p.NumRowsMalformed
	}
	if malformed != 1 {
		t.Fatalf("counted %d malformed values, want 1", malformed)
	}
	bad, _ := filepath.Glob(filepath.Join(dir, "cp", "bad_records", "batch_id=*", "*"))
	if len(bad) != 1 {
		t.Fatalf("want the malformed value set aside in one file, got %v", bad)
	}

	c.AddPartitions(topic, 1)
	recs := []*kgo.Record{}
	for _, e := range events[1500:] {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 2, Value: []byte(e.JSON())})
	}
	c.Produce(recs...)
	second := run(t, spec, microbatch.Options{})
	var read int64
	for _, p := range second {
		read += p.NumInputRows
	}
	if read != 1500 {
		t.Fatalf("after adding a partition the query read %d rows, want the 1500 in the new partition from its earliest offset", read)
	}
	if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), kafkaWindows(t, dir)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
}

// Schema fields with from: kafka.* take the record's own columns.
func TestKafkaRecordColumnsAreAvailable(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic(topic, 2)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte("k"), Value: []byte(`{"v":1}`), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
	}
	c.Produce(recs...)
	dir := t.TempDir()
	spec := kafkaSpec(c, dir)
	spec.Watermark, spec.Aggregate = nil, nil
	spec.Source.Schema = []query.Field{
		{Name: "v", Type: "long"},
		{Name: "k", Type: "string", From: "kafka.key"},
		{Name: "t", Type: "string", From: "kafka.topic"},
		{Name: "p", Type: "long", From: "kafka.partition"},
		{Name: "o", Type: "long", From: "kafka.offset"},
		{Name: "ts", Type: "timestamp", From: "kafka.timestamp"},
	}
	spec.Sink = query.Sink{Parquet: &query.ParquetSink{Path: filepath.Join(dir, "out")}}
	run(t, spec, microbatch.Options{})
	store, _ := objstore.NewFS(filepath.Join(dir, "out"))
	_, rows, err := parquet.ReadCommitted(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 10 {
		t.Fatalf("got %d rows, want 10", len(rows))
	}
	seen := map[[2]int64]bool{}
	for _, r := range rows {
		if r[0].I != 1 || r[1].S != "k" || r[2].S != topic || r[5].Time().Year() != 2023 {
			t.Fatalf("bad row %v", r)
		}
		seen[[2]int64{r[3].I, r[4].I}] = true
	}
	for p := int64(0); p < 2; p++ {
		for o := int64(0); o < 5; o++ {
			if !seen[[2]int64{p, o}] {
				t.Errorf("partition %d offset %d missing", p, o)
			}
		}
	}
}

// The broker goes away for a while: the query waits (planning retries with
// backoff, the checkpoint unchanged) and resumes when it is back, with the
// output still exact.
func TestKafkaBrokerOutageQueryWaitsAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a Kafka-protocol broker (kfake over TCP)")
	}
	dataDir := t.TempDir()
	start := func(port int) *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.Ports(port), kfake.DataDir(dataDir), kfake.SeedTopics(2, topic))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start(0)
	addr := c.ListenAddrs()[0]
	_, portStr, _ := strings.Cut(addr, ":")
	var port int
	fmt.Sscan(portStr, &port)
	events := tiletest.Events(101, 2000, time.Second, time.Minute, 3)
	produceTo := func(addr string, evs []tiletest.Event) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var recs []*kgo.Record
		for i, e := range evs {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(e.JSON())})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceTo(addr, events[:1000])

	dir := t.TempDir()
	spec := tiletest.Spec("", filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: addr, Subscribe: topic, StartingOffsets: "earliest"}
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)}
	var mu sync.Mutex
	var read int64
	job, err := microbatch.Build(context.Background(), spec, microbatch.Options{
		SourceRetryFor: time.Minute,
		Observer: progress.Committed(func(p *progress.Report) {
			mu.Lock()
			read += p.NumInputRows
			mu.Unlock()
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx, nil) }()
	waitRead := func(n int64) {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			r := read
			mu.Unlock()
			if r >= n {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("query stopped: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
		}
		t.Fatalf("query did not read %d rows in time", n)
	}
	waitRead(1000)
	c.Close()
	time.Sleep(1500 * time.Millisecond) // the broker stays away across several triggers
	select {
	case err := <-done:
		t.Fatalf("query gave up while the broker was away: %v", err)
	default:
	}
	c = start(port)
	defer c.Close()
	produceTo(addr, events[1000:])
	waitRead(2000)
	// Wait for the windows the final watermark closes (the no-data batch
	// after the last data batch), then compare exactly.
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for tiletest.Diff(want, kafkaWindows(t, dir)) != "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if d := tiletest.Diff(want, kafkaWindows(t, dir)); d != "" {
		t.Fatalf("after the outage the output differs from the oracle:\n%s", d)
	}
}
