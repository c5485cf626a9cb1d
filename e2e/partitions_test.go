package e2e

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// countingListener counts the connections a broker accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// The tile over a topic of 512 partitions, on a driver and four executor
// processes, writes exactly the oracle, and the whole run opens a few
// broker connections per process: reads of many partitions share one
// client and one fetch per broker, they do not open one per partition.
func TestDistributedTileOver512PartitionsEqualsOracleWithFewBrokerConnections(t *testing.T) {
	const (
		topic      = "learning.progress"
		partitions = 512
		executors  = 4
	)
	var accepted atomic.Int64
	broker := kafkatest.Start(t, kfake.ListenFn(func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return countingListener{ln, &accepted}, nil
	}))
	broker.CreateTopic(topic, partitions)
	// Records carry the course as key, but go to partitions round-robin:
	// every partition then holds the same share of each stretch of event
	// time, and a capped batch (which advances every partition in
	// proportion to its backlog) ends at about the same event time in all
	// of them, so no row falls behind the watermark and the oracle holds.
	// Partitioning by a hash of the course does not give that: partitions
	// of 30 and of 70 events advance 6 offsets each by different spans of
	// event time, and rows of the slower ones come late (tried).
	events := tiletest.Events(71, 24000, 150*time.Millisecond, 3*time.Minute, 1000)
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(e.Course), Partition: int32(i % partitions), Value: []byte(e.JSON())}
	}
	broker.Produce(recs...)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)

	l := localLocations(t, "dist")
	spec := tiletest.Spec("", l.Sink, l.Checkpoint)
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: broker.Addr, Subscribe: topic, StartingOffsets: "earliest",
		MaxOffsetsPerTrigger: 3000, MinPartitions: 2 * executors}
	spec.ShufflePartitions = 16
	before := accepted.Load()
	c := startCluster(t, l, executors, []string{"--exit-when-done"}, writeSpec(t, spec))
	if err := c.driver.Wait(240 * time.Second); err != nil {
		t.Fatalf("driver serve failed: %v\n%s", err, c.logs())
	}
	if d := sinkDiff(t, l, want); d != "" {
		t.Fatalf("output over %d partitions differs from the oracle:\n%s\n%s", partitions, d, c.logs())
	}
	if !strings.Contains(c.driver.Logs(), "executors=4") {
		t.Fatalf("the batches did not run on %d executors:\n%s", executors, c.driver.Logs())
	}
	// The driver and each executor build one Kafka source: a connection
	// for metadata and offsets and one for fetches per broker, maybe a
	// reconnect. One per partition would be hundreds.
	opened := accepted.Load() - before
	if limit := int64(4 * (executors + 1)); opened > limit {
		t.Fatalf("the run opened %d broker connections for %d processes reading %d partitions, want at most %d", opened, executors+1, partitions, limit)
	}
	t.Logf("%d broker connections for %d processes over %d partitions", opened, executors+1, partitions)
}
