package kafka

import (
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

func TestPlanTasksGroupsSmallRangesAndKeepsLargeOnesAlone(t *testing.T) {
	r := func(p int32, n int64) Range { return Range{"t", p, 100, 100 + n} }
	for _, tc := range []struct {
		name          string
		in            []Range
		minPartitions int
		minPerTask    int64
		want          [][]Range
	}{
		{"one task per range when each is large enough", []Range{r(0, 10), r(1, 10)}, 0, 10,
			[][]Range{{r(0, 10)}, {r(1, 10)}}},
		{"minOffsetsPerTask 1 is one task per range", []Range{r(0, 1), r(1, 2), r(2, 3)}, 0, 1,
			[][]Range{{r(0, 1)}, {r(1, 2)}, {r(2, 3)}}},
		{"small ranges share one task, empty ones dropped", []Range{r(0, 3), r(1, 0), r(2, 4), r(3, 2)}, 0, 100,
			[][]Range{{r(0, 3), r(2, 4), r(3, 2)}}},
		// total 40, 20 per task: two tasks; 12 alone, then 8 and 8+... by least load.
		{"balanced, largest first", []Range{r(0, 8), r(1, 12), r(2, 8), r(3, 4), r(4, 8)}, 0, 20,
			[][]Range{{r(0, 8), r(2, 8), r(3, 4)}, {r(1, 12), r(4, 8)}}},
		{"minPartitions raises the task count", []Range{r(0, 3), r(1, 3), r(2, 3), r(3, 3)}, 2, 100,
			[][]Range{{r(0, 3), r(2, 3)}, {r(1, 3), r(3, 3)}}},
		{"minPartitions above the ranges cuts them, one piece a task", []Range{r(0, 4), r(1, 0)}, 2, 100,
			[][]Range{{{"t", 0, 100, 102}}, {{"t", 0, 102, 104}}}},
		{"nothing to read", []Range{r(0, 0)}, 0, 100, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planTasks(tc.in, tc.minPartitions, tc.minPerTask)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("planTasks = %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestPlanTasksCoversEveryRangeOnceAndCarriesEnoughOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 5))
	for iter := 0; iter < 2000; iter++ {
		n := 1 + rng.IntN(300)
		var in []Range
		var total int64
		var largest int64
		nonEmpty := 0
		for p := 0; p < n; p++ {
			size := rng.Int64N(100)
			if rng.IntN(4) == 0 {
				size = 0
			}
			in = append(in, Range{"t", int32(p), 7, 7 + size})
			total += size
			largest = max(largest, size)
			if size > 0 {
				nonEmpty++
			}
		}
		minPerTask := 1 + rng.Int64N(2000)
		minP := rng.IntN(4)
		tasks := planTasks(in, minP, minPerTask)
		if nonEmpty == 0 {
			if len(tasks) != 0 {
				t.Fatalf("no offsets but %d tasks", len(tasks))
			}
			continue
		}
		want := min(int64(nonEmpty), max((total+minPerTask-1)/minPerTask, int64(max(minP, 1))))
		if minP > nonEmpty {
			want = int64(len(splitRanges(in, minP))) // Spark's pieces, one a task
		}
		if int64(len(tasks)) != want {
			t.Fatalf("iter %d: %d tasks, want %d (total %d, minPerTask %d, minPartitions %d, ranges %d)", iter, len(tasks), want, total, minPerTask, minP, nonEmpty)
		}
		covered := map[int32]int64{}
		var loads []int64
		for _, task := range tasks {
			var load int64
			for i, r := range task {
				if r.Size() == 0 || (i > 0 && r.Partition <= task[i-1].Partition) {
					t.Fatalf("iter %d: task %v: an empty range, or a partition twice or out of order", iter, task)
				}
				covered[r.Partition] += r.Size()
				load += r.Size()
			}
			loads = append(loads, load)
		}
		for _, r := range in {
			if covered[r.Partition] != r.Size() {
				t.Fatalf("iter %d: partition %d: tasks cover %d offsets, want %d", iter, r.Partition, covered[r.Partition], r.Size())
			}
		}
		// Greedy least-load: no task exceeds the average by more than the
		// largest range.
		if mx := slices.Max(loads); mx > total/int64(len(tasks))+largest {
			t.Fatalf("iter %d: task of %d offsets, average %d, largest range %d", iter, mx, total/int64(len(tasks)), largest)
		}
		if again := planTasks(in, minP, minPerTask); !reflect.DeepEqual(again, tasks) {
			t.Fatalf("iter %d: planTasks is not deterministic", iter)
		}
	}
}

func TestDecodeRangesReadsBothFormsAndRefusesDuplicates(t *testing.T) {
	one := Range{"t", 3, 5, 9}
	got, err := DecodeRanges(GroupSplit([]Range{one}).Desc)
	if err != nil || !reflect.DeepEqual(got, []Range{one}) {
		t.Fatalf("one range: %v, %v", got, err)
	}
	if sp := GroupSplit([]Range{one}); sp.ID != one.ID() || string(sp.Desc) != string(one.Split().Desc) {
		t.Fatalf("a group of one range is not the range's own split: %+v", sp)
	}
	two := []Range{one, {"u", 0, 0, 1}}
	sp := GroupSplit(two)
	if sp.ID != "t-3-5+1" {
		t.Fatalf("group id %q", sp.ID)
	}
	if got, err = DecodeRanges(sp.Desc); err != nil || !reflect.DeepEqual(got, two) {
		t.Fatalf("two ranges: %v, %v", got, err)
	}
	for _, bad := range []string{
		`{"ranges":[]}`,
		`{"ranges":[{"topic":"t","partition":1,"from":0,"to":1},{"topic":"t","partition":1,"from":1,"to":2}]}`,
		`{"ranges":[{"topic":"t","partition":1,"from":3,"to":2}]}`,
	} {
		if _, err := DecodeRanges([]byte(bad)); err == nil {
			t.Errorf("DecodeRanges(%s) succeeded", bad)
		}
	}
}

// countingKafka starts kfake with a listener that counts the connections
// it accepts.
func countingKafka(t *testing.T, opts ...kfake.Opt) (*kafkatest.Cluster, *atomic.Int64) {
	c, accepted, _ := countingKafkaBytes(t, opts...)
	return c, accepted
}

// countingKafkaBytes also counts the bytes the broker sends.
func countingKafkaBytes(t *testing.T, opts ...kfake.Opt) (*kafkatest.Cluster, *atomic.Int64, *atomic.Int64) {
	var accepted, sent atomic.Int64
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return countingListener{ln, &accepted, &sent}, nil
	}
	return kafkatest.Start(t, append(opts, kfake.ListenFn(listen))...), &accepted, &sent
}

type countingListener struct {
	net.Listener
	n, sent *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n.Add(1)
	return countingConn{c, l.sent}, nil
}

type countingConn struct {
	net.Conn
	sent *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}

func TestNextBatchTakesRecordsFetchedPastTheLastRangeInsteadOfFetchingAgain(t *testing.T) {
	const partitions, perPartition = 64, 100
	c, _, sent := countingKafkaBytes(t, kfake.SeedTopics(partitions, "events"))
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Value: fmt.Appendf(nil, `{"p":%d,"i":%d,"pad":"%0100d"}`, p, i, 0)})
		}
	}
	c.Produce(recs...)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events"})
	at := func(off int64) source.Offset {
		o := Offsets{}
		for p := int32(0); p < partitions; p++ {
			o.Set(TopicPartition{"events", p}, off)
		}
		return o.Encode()
	}
	var perBatch []int64
	bounds := []int64{0, 10, 11, 40, 100}
	for i := 1; i < len(bounds); i++ {
		before := sent.Load()
		got := readBatch(t, s, at(bounds[i-1]), at(bounds[i]))
		perBatch = append(perBatch, sent.Load()-before)
		if want := expectAll(partitions, bounds[i-1], bounds[i]); !reflect.DeepEqual(sortedStrings(positions(got)), want) {
			t.Fatalf("batch [%d, %d): read %d records, want %d", bounds[i-1], bounds[i], len(got), len(want))
		}
		for _, r := range got {
			if want := fmt.Sprintf(`{"p":%d,"i":%d,"pad":"%0100d"}`, r.Partition, r.Offset, 0); string(r.Value) != want {
				t.Fatalf("record %d@%d is %s", r.Partition, r.Offset, r.Value)
			}
		}
	}
	// The first batch fetched the whole record batches; the next ones
	// ask the broker for metadata and offsets only. Fetching the records
	// again would cost batch 2 about three quarters of the first batch's
	// bytes and batch 3 about half; metadata varies with the client's
	// refreshes, so the bound is a third.
	for i, n := range perBatch[1:] {
		if n*3 > perBatch[0] {
			t.Fatalf("batch %d made the broker send %d bytes, the first batch %d: the records fetched ahead were fetched again (per batch: %v)", i+2, n, perBatch[0], perBatch)
		}
	}
	t.Logf("bytes the broker sent per batch: %v", perBatch)
}

func expectAll(partitions int32, from, to int64) []string {
	var groups [][]string
	for p := int32(0); p < partitions; p++ {
		groups = append(groups, expectPositions("events", p, from, to))
	}
	return sortedStrings(groups...)
}

func TestBatchOverManyPartitionsOpensFewConnectionsAndReadsExactRanges(t *testing.T) {
	const partitions, perPartition = 512, 40
	c, accepted := countingKafka(t, kfake.SeedTopics(partitions, "events"))
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Value: fmt.Appendf(nil, `{"p":%d,"i":%d}`, p, i)})
		}
	}
	c.Produce(recs...)
	ctx := testCtx(t)
	// minOffsetsPerTask 1: one task per partition, the worst case for
	// connections; 4 tasks at a time, as 4 slots would run them.
	for _, minPerTask := range []int64{1, 0} {
		t.Run(fmt.Sprintf("minOffsetsPerTask=%d", minPerTask), func(t *testing.T) {
			s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", MinOffsetsPerTask: minPerTask})
			before := accepted.Load()
			from, to := Offsets{}, Offsets{}
			for p := int32(0); p < partitions; p++ {
				from.Set(TopicPartition{"events", p}, 10)
				to.Set(TopicPartition{"events", p}, 30)
			}
			splits, err := s.Splits(ctx, from.Encode(), to.Encode())
			if err != nil {
				t.Fatal(err)
			}
			if minPerTask == 1 && len(splits) != partitions {
				t.Fatalf("%d splits, want one per partition", len(splits))
			}
			if minPerTask == 0 && len(splits) != 1 { // 10240 offsets, 65536 a task
				t.Fatalf("%d splits, want 1", len(splits))
			}
			var mu sync.Mutex
			got := map[TopicPartition][]int64{}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for w := range errs {
				wg.Go(func() {
					for {
						i := int(next.Add(1) - 1)
						if i >= len(splits) || errs[w] != nil {
							return
						}
						var last TopicPartition
						errs[w] = s.Read(ctx, splits[i], func(r *source.Record) error {
							tp := TopicPartition{recTopic(r), recPartition(r)}
							if want := fmt.Sprintf(`{"p":%d,"i":%d}`, recPartition(r), r.Offset); string(r.Value) != want || r.Part != tp.String() {
								return fmt.Errorf("record %s@%d is %s", r.Part, r.Offset, r.Value)
							}
							mu.Lock()
							defer mu.Unlock()
							if last != (TopicPartition{}) && tp != last && len(got[tp]) > 0 {
								return fmt.Errorf("split %s: %s came back after %s", splits[i].ID, tp, last)
							}
							last = tp
							got[tp] = append(got[tp], r.Offset)
							return nil
						})
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			for p := int32(0); p < partitions; p++ {
				offs := got[TopicPartition{"events", p}]
				if len(offs) != 20 || offs[0] != 10 || offs[19] != 29 || !slices.IsSorted(offs) {
					t.Fatalf("partition %d: read offsets %v, want 10..29 in order", p, offs)
				}
			}
			// One client: a connection or two per broker for metadata and
			// offsets, one for fetches, whatever the partitions and tasks.
			if n := accepted.Load() - before; n > 4 {
				t.Fatalf("reading %d partitions in %d tasks opened %d broker connections, want at most 4", partitions, len(splits), n)
			}
			t.Logf("%d tasks, %d broker connections", len(splits), accepted.Load()-before)
		})
	}
}

func TestSourcesWithTheSameSettingsShareOneClientUntilTheLastCloses(t *testing.T) {
	const partitions = 64
	c, accepted := countingKafka(t, kfake.SeedTopics(partitions, "events"))
	for p := int32(0); p < partitions; p++ {
		c.ProduceN("events", p, 20, kafkatest.Value)
	}
	clients := source.NewShared()
	k := query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "earliest"}
	other := k
	other.Options = map[string]string{"client.id": "another-app"}
	read := func(s *Source) {
		t.Helper()
		ctx := testCtx(t)
		start, err := s.Initial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		end, err := s.Next(ctx, start, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(readBatch(t, s, start, end)); n != partitions*20 {
			t.Fatalf("read %d records, want %d", n, partitions*20)
		}
	}
	before := accepted.Load()
	var srcs []*Source
	for range 3 {
		s, err := New(Config{Kafka: k, Clients: clients})
		if err != nil {
			t.Fatal(err)
		}
		read(s)
		srcs = append(srcs, s)
	}
	if n := clients.Open(); n != 1 {
		t.Fatalf("%d clients open for three sources with the same settings, want 1", n)
	}
	shared := accepted.Load() - before
	s2, err := New(Config{Kafka: other, Clients: clients})
	if err != nil {
		t.Fatal(err)
	}
	read(s2)
	if n := clients.Open(); n != 2 {
		t.Fatalf("%d clients open, want 2 (client.id differs)", n)
	}
	s2.Close()
	srcs[0].Close()
	srcs[1].Close()
	if n := clients.Open(); n != 1 {
		t.Fatalf("%d clients open with one source left, want 1", n)
	}
	read(srcs[2]) // the shared client is still open for it
	srcs[2].Close()
	if n := clients.Open(); n != 0 {
		t.Fatalf("%d clients open after every source closed, want 0", n)
	}
	if shared > 4 {
		t.Fatalf("three sources sharing a client opened %d broker connections, want at most 4", shared)
	}
}
