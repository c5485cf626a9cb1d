package e2e

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

func s3Locations(srv *s3test.Server, bucket string) locations {
	return locations{
		Checkpoint: srv.URI(bucket, "checkpoint/"),
		Sink:       srv.URI(bucket, "tile/"),
		Env:        srv.Env(),
		Store:      objstore.Options{S3: srv.Options(bucket)},
	}
}

// The main scenario: the tile reading a kfake broker over TCP, with
// its checkpoint and Parquet output on the S3-compatible server, on a
// driver and three executor processes: the output equals the oracle and is
// byte for byte the one-process engine's.
func TestDistributedTileOnKafkaAndS3EqualsOracleAndOneProcessOutput(t *testing.T) {
	srv := s3test.Start(t)
	broker := kafkatest.Start(t)
	const topic = "learning.progress"
	broker.CreateTopic(topic, 4)
	events := tiletest.Events(37, 8000, 150*time.Millisecond, 4*time.Minute, 9)
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte(e.JSON())}
	}
	broker.Produce(recs...)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	spec := func(l locations) query.Spec {
		s := tiletest.Spec("", l.Sink, l.Checkpoint)
		s.Source.File = nil
		s.Source.Kafka = &query.KafkaSource{BootstrapServers: broker.Addr, Subscribe: topic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 1500, MinPartitions: 6}
		return s
	}

	dist := s3Locations(srv, "dist")
	c := startCluster(t, dist, 3, []string{"--exit-when-done"}, writeSpec(t, spec(dist)))
	if err := c.driver.Wait(180 * time.Second); err != nil {
		t.Fatalf("driver serve failed: %v\n%s", err, c.logs())
	}
	if d := sinkDiff(t, dist, want); d != "" {
		t.Fatalf("distributed output differs from the oracle:\n%s\n%s", d, c.logs())
	}
	if !strings.Contains(c.driver.Logs(), "executors=3") {
		t.Fatalf("the batches did not run on 3 executors:\n%s", c.driver.Logs())
	}

	one := s3Locations(srv, "one")
	run := NewProc(t, "driver run", bins.driver, "run", "-f", writeSpec(t, spec(one))).Env(one.Env...)
	run.Start()
	if err := run.Wait(180 * time.Second); err != nil {
		t.Fatalf("driver run: %v\n%s", err, run.Logs())
	}
	wantFiles, got := committedFiles(t, one), committedFiles(t, dist)
	var names []string
	for n := range wantFiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if string(got[n]) != string(wantFiles[n]) {
			t.Errorf("file %s differs between the cluster and the one-process engine (or is missing)", n)
		}
	}
	if len(got) != len(wantFiles) || len(got) == 0 {
		t.Errorf("the cluster committed %d files, the one-process engine %d", len(got), len(wantFiles))
	}
}
