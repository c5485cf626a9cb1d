// Package kafkatest runs a Kafka-protocol broker for tests: franz-go's kfake
// cluster in-process, serving the real wire protocol over TCP on
// 127.0.0.1 ports chosen by the kernel, with helpers to create topics and
// produce records to exact partitions.
//
// It is test support only: nothing outside _test.go files and test
// helpers should import it. It never listens on anything but 127.0.0.1.
package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is a running kfake cluster. Close runs at the end of the test.
type Cluster struct {
	*kfake.Cluster
	// Addr is the comma-separated list of broker addresses, for
	// bootstrapServers.
	Addr string
	// ClientOpts are added to every client the helpers make (SASL, TLS
	// for clusters started with them). Set it before the first helper call.
	ClientOpts []kgo.Opt

	t        testing.TB
	mu       sync.Mutex
	producer *kgo.Client
	admin    *kadm.Client
}

// Start starts a cluster of one broker (unless opts say otherwise, e.g.
// kfake.NumBrokers(3)) on free 127.0.0.1 ports, and closes it and every
// helper client when the test ends.
func Start(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs a Kafka-protocol broker (kfake over TCP); the full suite (scripts/test.sh) runs it")
	}
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake cluster: %v", err)
	}
	kc := &Cluster{Cluster: c, Addr: strings.Join(c.ListenAddrs(), ","), t: t}
	t.Cleanup(kc.close)
	return kc
}

func (c *Cluster) close() {
	c.mu.Lock()
	if c.producer != nil {
		c.producer.Close()
	}
	c.mu.Unlock()
	c.Cluster.Close()
}

// Client returns a new client for the cluster, closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(c.Addr, ",")...)}, c.ClientOpts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		c.t.Fatalf("create kafka client: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client.
func (c *Cluster) Admin() *kadm.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin == nil {
		c.admin = kadm.NewClient(c.Client())
	}
	return c.admin
}

func (c *Cluster) producerClient() *kgo.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.producer == nil {
		all := append([]kgo.Opt{
			kgo.SeedBrokers(strings.Split(c.Addr, ",")...),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0),
			kgo.MaxBufferedRecords(1 << 20),
		}, c.ClientOpts...)
		cl, err := kgo.NewClient(all...)
		if err != nil {
			c.t.Fatalf("create kafka producer: %v", err)
		}
		c.producer = cl
	}
	return c.producer
}

func ctx30s() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// CreateTopic creates a topic with the given number of partitions.
func (c *Cluster) CreateTopic(topic string, partitions int32) {
	c.t.Helper()
	ctx, cancel := ctx30s()
	defer cancel()
	resp, err := c.Admin().CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
}

// AddPartitions adds n partitions to topic.
func (c *Cluster) AddPartitions(topic string, n int) {
	c.t.Helper()
	ctx, cancel := ctx30s()
	defer cancel()
	resps, err := c.Admin().CreatePartitions(ctx, n, topic)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		c.t.Fatalf("add %d partitions to %s: %v", n, topic, err)
	}
	c.producerClient().PurgeTopicsFromClient(topic) // reload its partitions
}

// DeleteRecords deletes the records of topic/partition below offset, as
// retention would.
func (c *Cluster) DeleteRecords(topic string, partition int32, below int64) {
	c.t.Helper()
	ctx, cancel := ctx30s()
	defer cancel()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: below, LeaderEpoch: -1})
	resps, err := c.Admin().DeleteRecords(ctx, os)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		c.t.Fatalf("delete records of %s-%d below %d: %v", topic, partition, below, err)
	}
}

// Produce writes records to exactly the partitions they name and waits
// until all are acknowledged. Records without a timestamp get the current
// time from the client.
func (c *Cluster) Produce(recs ...*kgo.Record) {
	c.t.Helper()
	if err := c.produce(recs); err != nil {
		c.t.Fatalf("produce %d records: %v", len(recs), err)
	}
}

func (c *Cluster) produce(recs []*kgo.Record) error {
	cl := c.producerClient()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	wg.Add(len(recs))
	for _, r := range recs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err)
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	return first
}

// ProduceN writes n records to topic/partition, record i having value
// value(i) (and no key), and waits for all of them.
func (c *Cluster) ProduceN(topic string, partition int32, n int, value func(i int) []byte) {
	c.t.Helper()
	const chunk = 50000
	for start := 0; start < n; start += chunk {
		end := min(n, start+chunk)
		recs := make([]*kgo.Record, 0, end-start)
		for i := start; i < end; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: value(i)})
		}
		if err := c.produce(recs); err != nil {
			c.t.Fatalf("produce %d records to %s-%d: %v", n, topic, partition, err)
		}
	}
}

// Value is a small JSON value for record i, handy as ProduceN's value.
func Value(i int) []byte {
	return fmt.Appendf(nil, `{"i":%d}`, i)
}

// RecreateTopic deletes topic and creates it again, empty, with the given
// number of partitions, as an operator who recreates a topic would.
func (c *Cluster) RecreateTopic(topic string, partitions int32) {
	c.t.Helper()
	ctx, cancel := ctx30s()
	defer cancel()
	resp, err := c.Admin().DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("delete topic %s: %v", topic, err)
	}
	c.producerClient().PurgeTopicsFromClient(topic)
	c.CreateTopic(topic, partitions)
}
