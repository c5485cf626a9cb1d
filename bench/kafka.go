package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source/generator"
)

// The Kafka measurement (the report's speed section): a kfake broker in this
// process on a 127.0.0.1 port, topics preloaded with the generator's tile
// events spread round-robin over the partitions (record i to partition
// i mod P, so each partition is in event-time order and no row is late),
// then
//
//   - catch-up: the engine in this process (availableNow, capped by
//     maxOffsetsPerTrigger) against a raw franz-go loop reading the same
//     records in one goroutine with the same decode and count;
//   - memory: the peak RSS of a `driver run` child process catching up on
//     a small and a large backlog at the same cap.

// kafkaTopicPrefix names the topics: one per backlog size.
const kafkaTopicPrefix = "learning.progress"

// KafkaConfig is the Kafka part of the command line.
type KafkaConfig struct {
	Rows       int   // catch-up backlog
	Runs       int   // catch-up rounds
	Partitions int32 // partitions per topic
	MaxOffsets int64 // maxOffsetsPerTrigger of the catch-up runs
	// RSSRows are the backlogs of the driver runs (none: no RSS runs);
	// RSSMaxOffsets is their common cap.
	RSSRows       []int
	RSSMaxOffsets int64
	RSSRuns       int // rounds of driver runs (each round runs every backlog once)
	// ClientOptions are the spec's kafka.* options (prefix removed), for
	// the engine's runs (catch-up, RSS, heap), e.g. max.partition.fetch.bytes.
	ClientOptions map[string]string
	// Driver is a prebuilt driver binary; empty builds one.
	Driver      string
	Parallelism int
	// HeapProfile, if set, runs the engine in this process over the
	// largest RSS backlog at the RSS cap and writes heap profiles
	// DIR/heap-<batch>.pb.gz every HeapEvery batches.
	HeapProfile string
	HeapEvery   int
	// ProfileDir, if set (-report), gets a CPU profile of one more engine
	// run and one more reference run over the catch-up topic, after the
	// timed rounds: engine-kafka.pprof, reference-kafka.pprof.
	ProfileDir string `json:"-"`
	// ProcessRuns is the rounds of the whole-process pair (driver run
	// against the references as processes); 0: none.
	ProcessRuns int
	// ProcessProfile is -process-cpuprofile: the whole-process pair's
	// driver runs profile themselves into PATH.kafka.N.
	ProcessProfile string `json:"-"`
}

// KafkaResults are the Kafka measurement's figures.
type KafkaResults struct {
	Config  KafkaConfig
	Produce []ProduceRun
	// Raw* are the fair reference's (refKafka: one reader per core).
	RawEPS, EngineEPS, Ratio []float64 // events/s per round; engine / reference of the same round
	RawCPU, EngineCPU        []float64 // process CPU ns per event (includes the broker)
	// Cost compares the profiled runs (KafkaConfig.ProfileDir), the
	// broker's samples set apart.
	Cost *CostCompare `json:",omitempty"`
	// RawSentPerEvent, EngineSentPerEvent are the bytes the broker sent
	// per event read: fetched-ahead data that is thrown away shows here.
	RawSentPerEvent, EngineSentPerEvent []float64
	// Bare* are the bare loop's (bare.go: one franz-go reader per core,
	// fastjson and time.Parse), in the same rounds; BareRatio is engine /
	// bare loop of the same round.
	BareEPS, BareCPU, BareRatio, BareSentPerEvent []float64    `json:",omitempty"`
	BareCost                                      *CostCompare `json:",omitempty"`
	// Process is the whole-process pair: `driver run` against the
	// references as processes, the broker in this process.
	Process                   *Pair `json:",omitempty"`
	EngineCores               []float64
	RawWindows, EngineWindows int // windows the raw loop counted; emitted + open windows of the engine
	EngineBatches             int
	RSS                       []RSSRun
}

// ProduceRun is one topic's preload.
type ProduceRun struct {
	Topic   string
	Rows    int
	Elapsed time.Duration
	Bytes   int64
}

// RSSRun is one `driver run` child process.
type RSSRun struct {
	Rows       int
	MaxOffsets int64
	MaxRSSKiB  int64 // getrusage ru_maxrss of the driver (through the launcher)
	HWMKiB     int64 // the driver's VmHWM at the last sample: a cross-check
	Elapsed    time.Duration
	InputRows  int64 // sum of the progress objects' numInputRows
	Batches    int
	// Samples is the driver's VmRSS (KiB), sampled every rssSampleEvery,
	// to see whether it grows over the run.
	Samples []int64
}

const rssSampleEvery = 250 * time.Millisecond

func kafkaTopic(rows int) string { return fmt.Sprintf("%s.%d", kafkaTopicPrefix, rows) }

// kafkaBroker is a one-broker kfake cluster on a 127.0.0.1 port.
type kafkaBroker struct {
	cluster *kfake.Cluster
	addr    string
	// sent counts the bytes the broker has written to its clients: what
	// a consumer made it serve, fetched-ahead data included.
	sent *atomic.Int64
}

// countingListener counts the bytes written to the connections it accepts.
type countingListener struct {
	net.Listener
	sent *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
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

// startKafka starts a one-broker kfake cluster on a free 127.0.0.1 port
// with the given topics.
func startKafka(partitions int32, topics ...string) (*kafkaBroker, error) {
	return startKafkaIn("", partitions, topics...)
}

// startKafkaIn starts kfake with its log segments in dataDir (on disk:
// the broker then holds only its indexes in memory), or in memory when
// dataDir is empty.
func startKafkaIn(dataDir string, partitions int32, topics ...string) (*kafkaBroker, error) {
	sent := &atomic.Int64{}
	listen := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		return countingListener{ln, sent}, nil
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...), kfake.ListenFn(listen)}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start kfake cluster: %w", err)
	}
	addrs := c.ListenAddrs()
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			c.Close()
			return nil, fmt.Errorf("start kfake cluster: listening on %s, want 127.0.0.1 only", a)
		}
	}
	return &kafkaBroker{cluster: c, addr: strings.Join(addrs, ","), sent: sent}, nil
}

func (b *kafkaBroker) close() { b.cluster.Close() }

// produceChunk is how many records one ProduceSync call carries.
const produceChunk = 200_000

// produceTile writes the generator's lines 0..rows-1 to topic, line i to
// partition i mod partitions, uncompressed, generating them chunk by chunk
// so that only the broker holds the whole backlog.
func produceTile(ctx context.Context, addr, topic string, gopts query.GeneratorSource, rows int, partitions int32) (ProduceRun, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(addr, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(2*produceChunk),
		kgo.ProducerBatchMaxBytes(1<<20),
	)
	if err != nil {
		return ProduceRun{}, fmt.Errorf("create kafka producer: %w", err)
	}
	defer cl.Close()
	g := generator.New(gopts)
	run := ProduceRun{Topic: topic, Rows: rows}
	start := time.Now()
	recs := make([]*kgo.Record, 0, produceChunk)
	for from := 0; from < rows; from += produceChunk {
		to := min(from+produceChunk, rows)
		var buf []byte
		ends := make([]int, 0, to-from)
		for i := from; i < to; i++ {
			buf = g.AppendLine(buf, int64(i))
			ends = append(ends, len(buf))
		}
		recs = recs[:0]
		prev := 0
		for k, end := range ends {
			i := from + k
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % int(partitions)), Value: buf[prev:end:end]})
			prev = end
		}
		run.Bytes += int64(len(buf))
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return run, fmt.Errorf("produce records %d..%d to %s: %w", from, to, topic, err)
		}
	}
	run.Elapsed = time.Since(start)
	return run, nil
}

// endOffsets lists the end offset of every partition of topic.
func endOffsets(ctx context.Context, addr, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...))
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends, nil
}

// tileCounter is the raw loop's body for one record value: decode with
// the engine's decoder and field list, assign the five-minute window,
// count per (window, course). It is countLines' body, one line at a time.
type tileCounter struct {
	dec    *row.Decoder
	win    eventtime.Spec
	r      row.Row
	starts []int64
	res    *RawResult
}

func newTileCounter() *tileCounter {
	return &tileCounter{
		dec: row.NewDecoder(decoderFields()),
		win: eventtime.Spec{Size: windowSize.Microseconds(), Slide: windowSize.Microseconds()},
		res: &RawResult{Counts: make(map[WindowKey]int64)},
	}
}

func (c *tileCounter) add(value []byte) error {
	const courseCol, timeCol = 1, 3
	var err error
	if c.r, err = c.dec.Decode(value, c.r); err != nil {
		return err
	}
	t := c.r[timeCol].I
	if t > c.res.MaxTime {
		c.res.MaxTime = t
	}
	c.starts = c.win.Windows(t, c.starts[:0])
	for _, s := range c.starts {
		c.res.Counts[WindowKey{s, c.r[courseCol].S}]++
	}
	return nil
}

func (c *tileCounter) result() *RawResult { return c.res }

// kafkaSpec is the bench's tile over a Kafka topic.
func kafkaSpec(addr, topic, dir string, maxOffsets int64, options map[string]string) query.Spec {
	src := query.Source{
		Kafka: &query.KafkaSource{
			BootstrapServers:     addr,
			Subscribe:            topic,
			StartingOffsets:      "earliest",
			MaxOffsetsPerTrigger: maxOffsets,
			Options:              options,
		},
		Schema: query.GeneratorSchema(),
	}
	return tileSpec(src, dir, query.Trigger{AvailableNow: true})
}

// runKafka runs the whole Kafka measurement.
func runKafka(ctx context.Context, kc KafkaConfig, dir string, out io.Writer) (*KafkaResults, error) {
	res := &KafkaResults{Config: kc}
	sizes := []int{}
	seen := map[int]bool{}
	for _, n := range append([]int{kc.Rows}, kc.RSSRows...) {
		if n > 0 && !seen[n] {
			seen[n] = true
			sizes = append(sizes, n)
		}
	}
	topics := make([]string, len(sizes))
	for i, n := range sizes {
		topics[i] = kafkaTopic(n)
	}
	b, err := startKafka(kc.Partitions, topics...)
	if err != nil {
		return nil, err
	}
	defer b.close()
	fmt.Fprintf(out, "kafka: kfake broker on %s, %d partitions per topic\n", b.addr, kc.Partitions)
	for _, n := range sizes {
		pr, err := produceTile(ctx, b.addr, kafkaTopic(n), generatorOptions(int64(n), 0), n, kc.Partitions)
		if err != nil {
			return nil, err
		}
		res.Produce = append(res.Produce, pr)
		fmt.Fprintf(out, "kafka: produced %d records (%.0f MB of values) to %s in %v (%.2f M records/s)\n",
			n, float64(pr.Bytes)/1e6, pr.Topic, pr.Elapsed.Round(time.Millisecond), float64(n)/pr.Elapsed.Seconds()/1e6)
	}

	if kc.Rows > 0 && (kc.Runs > 0 || kc.ProcessRuns > 0) {
		if err := kafkaCatchUp(ctx, kc, b, dir, res, out); err != nil {
			return nil, err
		}
	}
	if kc.HeapProfile != "" && len(kc.RSSRows) > 0 {
		if err := kafkaHeapProfiles(ctx, kc, b.addr, dir, out); err != nil {
			return nil, err
		}
	}
	if len(kc.RSSRows) > 0 {
		driver := kc.Driver
		if driver == "" {
			if driver, err = buildDriver(ctx, dir); err != nil {
				return nil, err
			}
		}
		for round := range max(kc.RSSRuns, 1) {
			for _, n := range kc.RSSRows {
				rr, err := rssRun(ctx, driver, b.addr, kafkaTopic(n), filepath.Join(dir, fmt.Sprintf("kafka-rss-%d-%d", n, round)), kc.RSSMaxOffsets, kc.ClientOptions)
				if err != nil {
					return nil, fmt.Errorf("driver run over %d records: %w", n, err)
				}
				if rr.InputRows != int64(n) {
					return nil, fmt.Errorf("driver run over %d records read %d", n, rr.InputRows)
				}
				rr.Rows = n
				res.RSS = append(res.RSS, *rr)
				fmt.Fprintf(out, "kafka: driver run, backlog %d, maxOffsetsPerTrigger %d: peak RSS %.0f MiB (VmHWM at last sample %.0f), %d batches, %v, VmRSS samples (MiB) %s\n",
					n, kc.RSSMaxOffsets, float64(rr.MaxRSSKiB)/1024, float64(rr.HWMKiB)/1024, rr.Batches, rr.Elapsed.Round(time.Millisecond), sampleSummary(rr.Samples))
			}
		}
	}
	return res, nil
}

// kafkaCatchUp runs the raw loop and the engine over the catch-up topic,
// kc.Runs rounds, after one untimed warm-up of the raw loop.
func kafkaCatchUp(ctx context.Context, kc KafkaConfig, b *kafkaBroker, dir string, res *KafkaResults, out io.Writer) error {
	addr := b.addr
	topic := kafkaTopic(kc.Rows)
	ends, err := endOffsets(ctx, addr, topic)
	if err != nil {
		return err
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != int64(kc.Rows) {
		return fmt.Errorf("topic %s holds %d records, want %d", topic, total, kc.Rows)
	}
	p := refParallelism()
	if kc.Runs > 0 {
		if _, _, err := refKafka(ctx, fairRef, addr, topic, ends, p); err != nil { // warm-up
			return err
		}
	}
	for r := range kc.Runs {
		var raw, bare *RawResult
		var er *EngineRun
		var rawSent, bareSent, engineSent int64
		refRun := func(kind refKind, phase string, dst **RawResult, sentTo *int64) func() error {
			return func() error {
				var n int64
				var err error
				sent := b.sent.Load()
				defer func() { *sentTo = b.sent.Load() - sent }()
				// Labels let a -cpuprofile tell the sides apart
				// (go tool pprof -tagfocus phase=raw); the broker's
				// goroutines carry none.
				pprof.Do(ctx, pprof.Labels("phase", phase), func(ctx context.Context) {
					*dst, n, err = refKafka(ctx, kind, addr, topic, ends, p)
				})
				if err != nil {
					return err
				}
				if n != int64(kc.Rows) {
					return fmt.Errorf("kafka %s read %d records, want %d", kind, n, kc.Rows)
				}
				return nil
			}
		}
		runDir := filepath.Join(dir, fmt.Sprintf("kafka-%d", r))
		engineRun := func() error {
			var err error
			sent := b.sent.Load()
			defer func() { engineSent = b.sent.Load() - sent }()
			pprof.Do(ctx, pprof.Labels("phase", "engine"), func(ctx context.Context) {
				er, err = runEngine(ctx, kafkaSpec(addr, topic, runDir, kc.MaxOffsets, kc.ClientOptions), kc.Parallelism)
			})
			if err != nil {
				return fmt.Errorf("engine with kafka source: %w", err)
			}
			os.RemoveAll(runDir)
			if err := checkRun(er, kc.Rows); err != nil {
				return fmt.Errorf("engine with kafka source: %w", err)
			}
			return nil
		}
		// Alternate which goes first, so that a drift of the machine's
		// load within a round does not favour one side.
		if err := inTurn(r, refRun(fairRef, "raw", &raw, &rawSent), refRun(bareRef, "bare", &bare, &bareSent), engineRun); err != nil {
			return err
		}
		if got := int(er.OutputRows + er.StateRows); got != len(raw.Counts) || got != len(bare.Counts) {
			return fmt.Errorf("engine with kafka source: emitted %d + open %d windows, the reference counted %d, the bare loop %d", er.OutputRows, er.StateRows, len(raw.Counts), len(bare.Counts))
		}
		rawEPS := eps(kc.Rows, raw.Elapsed)
		res.RawEPS = append(res.RawEPS, rawEPS)
		res.RawCPU = append(res.RawCPU, nsPer(kc.Rows, raw.CPU))
		res.RawWindows = len(raw.Counts)
		fmt.Fprintf(out, "round %d kafka reference %7.3f s  %6.3f M events/s  %5.0f CPU ns/event  %4.0f broker bytes/event  (%d windows)\n",
			r+1, raw.Elapsed.Seconds(), rawEPS/1e6, nsPer(kc.Rows, raw.CPU), float64(rawSent)/float64(kc.Rows), len(raw.Counts))
		res.EngineWindows = int(er.OutputRows + er.StateRows)
		res.EngineBatches = len(er.Batches)
		v := eps(kc.Rows, er.Elapsed)
		res.EngineEPS = append(res.EngineEPS, v)
		res.EngineCPU = append(res.EngineCPU, nsPer(kc.Rows, er.CPU))
		res.EngineCores = append(res.EngineCores, er.CPU.Seconds()/er.Elapsed.Seconds())
		res.Ratio = append(res.Ratio, v/rawEPS)
		res.RawSentPerEvent = append(res.RawSentPerEvent, float64(rawSent)/float64(kc.Rows))
		res.EngineSentPerEvent = append(res.EngineSentPerEvent, float64(engineSent)/float64(kc.Rows))
		bareEPS := eps(kc.Rows, bare.Elapsed)
		res.BareEPS = append(res.BareEPS, bareEPS)
		res.BareCPU = append(res.BareCPU, nsPer(kc.Rows, bare.CPU))
		res.BareRatio = append(res.BareRatio, v/bareEPS)
		res.BareSentPerEvent = append(res.BareSentPerEvent, float64(bareSent)/float64(kc.Rows))
		fmt.Fprintf(out, "round %d kafka bare loop %7.3f s  %6.3f M events/s  %5.0f CPU ns/event  %4.0f broker bytes/event\n",
			r+1, bare.Elapsed.Seconds(), bareEPS/1e6, nsPer(kc.Rows, bare.CPU), float64(bareSent)/float64(kc.Rows))
		fmt.Fprintf(out, "round %d kafka engine    %7.3f s  %6.3f M events/s  %5.0f CPU ns/event  %4.0f broker bytes/event  %.2f cores  %d batches  ratio %.2f, to the bare loop %.2f\n",
			r+1, er.Elapsed.Seconds(), v/1e6, nsPer(kc.Rows, er.CPU), float64(engineSent)/float64(kc.Rows), er.CPU.Seconds()/er.Elapsed.Seconds(), len(er.Batches), v/rawEPS, v/bareEPS)
	}
	if kc.ProfileDir != "" && kc.Runs > 0 {
		engFile, refFile := filepath.Join(kc.ProfileDir, "engine-kafka.pprof"), filepath.Join(kc.ProfileDir, "reference-kafka.pprof")
		runDir := filepath.Join(dir, "kafka-profile")
		if _, err := profileTop(engFile, func() error {
			defer os.RemoveAll(runDir)
			er, err := runEngine(ctx, kafkaSpec(addr, topic, runDir, kc.MaxOffsets, kc.ClientOptions), kc.Parallelism)
			if err == nil {
				err = checkRun(er, kc.Rows)
			}
			return err
		}); err != nil {
			return fmt.Errorf("profile the engine with kafka source: %w", err)
		}
		if _, err := profileTop(refFile, func() error {
			_, _, err := refKafka(ctx, fairRef, addr, topic, ends, p)
			return err
		}); err != nil {
			return fmt.Errorf("profile the kafka reference: %w", err)
		}
		res.Cost = compareCosts(engFile, refFile, int64(kc.Rows))
		bareFile := filepath.Join(kc.ProfileDir, "bare-kafka.pprof")
		if _, err := profileTop(bareFile, func() error {
			_, _, err := refKafka(ctx, bareRef, addr, topic, ends, p)
			return err
		}); err != nil {
			return fmt.Errorf("profile the kafka bare loop: %w", err)
		}
		res.BareCost = compareCostFiles([]string{engFile}, []string{bareFile}, int64(kc.Rows), [2]string{"the engine", "the bare loop"})
	}
	if kc.ProcessRuns > 0 {
		driver := kc.Driver
		if driver == "" {
			var err error
			if driver, err = buildDriver(ctx, dir); err != nil {
				return err
			}
		}
		job, err := json.Marshal(kafkaRefJob{Addr: addr, Topic: topic, Ends: ends})
		if err != nil {
			return err
		}
		spec := kafkaSpec(addr, topic, "", kc.MaxOffsets, kc.ClientOptions)
		res.Process, err = runProcessPair(ctx, config{report: kc.ProfileDir, processProfile: kc.ProcessProfile}, driver, dir, processJob{
			name: "kafka (kfake), whole process", tag: "kafka", rows: kc.Rows, runs: kc.ProcessRuns,
			src: spec.Source, refEnv: refKafkaEnv + "=" + string(job),
		}, out)
		if err != nil {
			return err
		}
	}
	return nil
}

// buildDriver builds cmd/driver into dir.
func buildDriver(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "driver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/driver")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the driver: %w", err)
	}
	return bin, nil
}

// rssLaunchEnv, set in this program's environment, makes it a launcher
// (see init): a child's ru_maxrss is not its own peak when the parent is
// large. Go starts children with vfork, and at exec Linux folds the
// parent's high-water RSS into the child's maxrss (exec_mmap), so a
// `driver run` started from this process (which holds the broker's
// backlog) would report this process's peak. A small launcher process
// that starts the driver and reports the driver's rusage gives the
// driver's own peak.
const rssLaunchEnv = "SLUICEBENCH_RSS_LAUNCHER"

// init runs the launcher when rssLaunchEnv is set: it starts os.Args[1:],
// prints "pid N" and, once the child has exited, "maxrss KiB" on stdout
// (the child's stdout goes to stderr), and exits with the child's status.
func init() {
	if os.Getenv(rssLaunchEnv) != "1" {
		return
	}
	os.Exit(launch(os.Args[1:]))
}

func launch(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "launcher: no command")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, rssLaunchEnv+"=") })
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 2
	}
	fmt.Printf("pid %d\n", cmd.Process.Pid)
	err := cmd.Wait()
	fmt.Printf("maxrss %d\n", childMaxRSS(cmd.ProcessState))
	fmt.Printf("cpu %d\n", (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Nanoseconds())
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		if code := cmd.ProcessState.ExitCode(); code > 0 {
			return code
		}
		return 1
	}
	return 0
}

// rssRun runs `driver run -f` over topic in a grandchild process (through
// the launcher) and returns its peak RSS (getrusage of the driver), with
// its VmRSS and VmHWM sampled while it runs.
func rssRun(ctx context.Context, driver, addr, topic, dir string, maxOffsets int64, options map[string]string) (*RSSRun, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	defer os.RemoveAll(dir)
	spec := kafkaSpec(addr, topic, dir, maxOffsets, options)
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	specFile := filepath.Join(dir, "query.json")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		return nil, fmt.Errorf("write spec: %w", err)
	}
	progressFile := filepath.Join(dir, "progress.jsonl")
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to use as the launcher: %w", err)
	}
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, self, driver, "run", "-f", specFile, "--progress-json", progressFile)
	cmd.Env = append(os.Environ(), rssLaunchEnv+"=1")
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	rr := &RSSRun{MaxOffsets: maxOffsets}
	sc := bufio.NewScanner(stdout)
	pid := 0
	if sc.Scan() {
		pid, _ = strconv.Atoi(strings.TrimPrefix(sc.Text(), "pid "))
	}
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(rssSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if st, ok := procStatus(pid); ok {
					rr.Samples = append(rr.Samples, st.rss)
					rr.HWMKiB = st.hwm
				}
			}
		}
	}()
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "maxrss "); ok {
			rr.MaxRSSKiB, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	err = cmd.Wait()
	rr.Elapsed = time.Since(start)
	close(done)
	<-sampled
	if err != nil || pid == 0 {
		return nil, fmt.Errorf("driver run (pid %d): %v; stderr tail:\n%s", pid, err, tail(stderr.String(), 2000))
	}
	f, err := os.Open(progressFile)
	if err != nil {
		return nil, fmt.Errorf("read progress: %w", err)
	}
	defer f.Close()
	ps := bufio.NewScanner(f)
	ps.Buffer(make([]byte, 1<<20), 16<<20)
	for ps.Scan() {
		var p progress.Report
		if err := json.Unmarshal(ps.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("decode progress: %w", err)
		}
		rr.InputRows += p.NumInputRows
		rr.Batches++
	}
	return rr, ps.Err()
}

type procStat struct{ rss, hwm int64 }

// procStatus reads a process's current and peak resident set size, KiB.
func procStatus(pid int) (procStat, bool) {
	var st procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, false
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		for _, f := range []struct {
			prefix string
			dst    *int64
		}{{"VmRSS:", &st.rss}, {"VmHWM:", &st.hwm}} {
			if v, ok := strings.CutPrefix(l, f.prefix); ok {
				if fs := strings.Fields(v); len(fs) > 0 {
					if x, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
						*f.dst = x
						n++
					}
				}
			}
		}
	}
	return st, n == 2
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// sampleSummary renders up to eight evenly spaced samples, MiB.
func sampleSummary(s []int64) string {
	if len(s) == 0 {
		return "-"
	}
	var parts []string
	k := min(len(s), 8)
	for i := range k {
		j := i * (len(s) - 1) / max(k-1, 1)
		parts = append(parts, fmt.Sprintf("%.0f", float64(s[j])/1024))
	}
	return strings.Join(parts, " ")
}

// kafkaLines are the Kafka figures as table rows.
func kafkaLines(k *KafkaResults) []line {
	var ls []line
	add := func(name, value, target string) { ls = append(ls, line{name, value, target}) }
	kc := k.Config
	for _, p := range k.Produce {
		add(fmt.Sprintf("kafka: preload %d records to %d partitions, M records/s", p.Rows, kc.Partitions), fmt.Sprintf("%.2f (%.1f s)", float64(p.Rows)/p.Elapsed.Seconds()/1e6, p.Elapsed.Seconds()), "")
	}
	if len(k.RawEPS) > 0 {
		pre := fmt.Sprintf("kafka catch-up of %d records, maxOffsetsPerTrigger %d (%d rounds)", kc.Rows, kc.MaxOffsets, len(k.RawEPS))
		add(pre+": (engine against the reference: see the kafka pair above)", "", "")
		add("kafka: engine cores used (CPU/wall, broker included)", rangeOf(k.EngineCores, "%.2f"), "")
		add("kafka: bytes the broker sent per event, reference / engine", rangeOf(k.RawSentPerEvent, "%.0f")+" / "+rangeOf(k.EngineSentPerEvent, "%.0f"), "")
		if len(k.BareSentPerEvent) > 0 {
			add("kafka: bytes the broker sent per event, bare loop", rangeOf(k.BareSentPerEvent, "%.0f"), "")
		}
		if len(kc.ClientOptions) > 0 {
			add("kafka: engine's kafka.* client options", fmt.Sprintf("%v", kc.ClientOptions), "")
		}
		add("kafka: engine batches (data + final no-data)", fmt.Sprintf("%d", k.EngineBatches), "")
		add("kafka: windows, reference / engine (emitted + open)", fmt.Sprintf("%d / %d", k.RawWindows, k.EngineWindows), "equal")
	}
	var firstRows int
	var first float64
	for _, n := range kc.RSSRows {
		var peaks, secs, samples, early, late []float64
		batches := 0
		for _, r := range k.RSS {
			if r.Rows == n {
				peaks = append(peaks, float64(r.MaxRSSKiB)/1024)
				secs = append(secs, r.Elapsed.Seconds())
				batches = r.Batches
				for _, x := range r.Samples {
					samples = append(samples, float64(x)/1024)
				}
				if h := len(r.Samples) / 2; h > 0 {
					early = append(early, float64(slices.Max(r.Samples[:h]))/1024)
					late = append(late, float64(slices.Max(r.Samples[h:]))/1024)
				}
			}
		}
		if len(peaks) == 0 {
			continue
		}
		name := fmt.Sprintf("kafka: driver run peak RSS, backlog %d, maxOffsetsPerTrigger %d (%d runs), MiB", n, kc.RSSMaxOffsets, len(peaks))
		v := rangeOf(peaks, "%.0f") + fmt.Sprintf(" (%d batches, %.1f s; VmRSS every %v: median %.0f, highest in the first / second half of the run %.0f / %.0f)",
			batches, median(secs), rssSampleEvery, median(samples), median(early), median(late))
		if firstRows == 0 {
			firstRows, first = n, median(peaks)
			add(name, v, "")
			continue
		}
		add(name, v+fmt.Sprintf(", %.2f× the %d backlog's", median(peaks)/first, firstRows), "≤ 1.5×")
	}
	return ls
}

// pair is the catch-up as a Pair (the engine against the fair
// reference, round by round).
func (k *KafkaResults) pair() *Pair {
	p := &Pair{Name: "kafka (kfake), in process", Cost: k.Cost, BareCost: k.BareCost}
	for i := range k.Ratio {
		p.add(k.RawEPS[i], k.EngineEPS[i], k.RawCPU[i], k.EngineCPU[i])
		if i < len(k.BareEPS) {
			p.addBare(k.BareEPS[i], k.BareCPU[i])
		}
	}
	return p
}
