package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/task"
)

// A query that runs for a long time (-only longrun, in -report):
// -longrun-batches micro-batches (mostly small, some no-data) of the tile
// over the generator, checkpoint and Parquet sink on the S3-compatible test
// server (versitygw, as a process on loopback; $SLUICE_VERSITYGW or
// scripts/test.sh's install), in this process. Every -longrun-sample
// batches it counts the objects under the checkpoint (by kind) and under
// the sink's _sink_log/, and this process's RSS. A new driver (a fresh
// microbatch.Build on the same checkpoint, as a restarted driver would) is timed
// from its start to its first commit after batch 100 and after the last
// batch, with the objects it read on the way.

// LongRunConfig is the longrun mode's command line.
type LongRunConfig struct {
	Batches     int   // batches to run
	SampleEvery int   // batches between two samples
	Retain      int   // minBatchesToRetain
	Rows        int64 // rows per second the generator makes (and per batch at most)
}

// LongRunSample is the checkpoint and the process after Batch committed.
type LongRunSample struct {
	Batch ids.BatchID
	// Checkpoint counts every object under the checkpoint, Offsets,
	// Commits and State those under offsets/, commits/ and state/;
	// SinkLog those under the sink's _sink_log/.
	Checkpoint, Offsets, Commits, State, SinkLog int
	RSSBytes                                     int64
	Seconds                                      float64 // since the run started
}

// LongRunRestart is a new driver's start after AfterBatch committed.
type LongRunRestart struct {
	AfterBatch ids.BatchID
	// FirstCommitMs is from microbatch.Build to the first batch's progress.
	FirstCommitMs float64
	// Gets and Lists are the requests the new driver made to the
	// checkpoint until then, SinkGets and SinkLists to the sink (its log:
	// package sink/parquet's).
	Gets, Lists, SinkGets, SinkLists int64
}

// LongRunResult is the longrun mode's figures.
type LongRunResult struct {
	Batches, Retain, NoDataBatches int
	Samples                        []LongRunSample
	Restarts                       []LongRunRestart
	// StateWritesPer10 are the state files batches wrote (their progress's
	// numStateStoreWrites) per 10 batches: deltas only, on the batch path;
	// SnapshotsPer10 are those the background maintenance wrote.
	StateWritesPer10, SnapshotsPer10 float64
	// CleanupDeleted and CleanupErrors are the background cleaner's.
	CleanupDeleted, CleanupErrors int64
}

// versitygw is a test S3 server process for the benchmark.
type versitygw struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	dataDir string
	opts    objstore.S3Options
}

func startVersitygw(ctx context.Context, dir string) (*versitygw, error) {
	bin, err := s3test.Binary()
	if err != nil {
		return nil, fmt.Errorf("longrun needs the S3 test server: %w (run ./scripts/test.sh once, or set SLUICE_VERSITYGW)", err)
	}
	data := filepath.Join(dir, "s3data")
	if err := os.MkdirAll(filepath.Join(data, "longrun"), 0o755); err != nil { // a bucket is a directory
		return nil, err
	}
	port, err := freeTCPPort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	key, secret := "LONGRUNKEY", "longrun-secret-key-for-the-test-server"
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", addr, "-a", key, "-s", secret, "posix", data)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	g := &versitygw{cmd: cmd, exited: make(chan struct{}), dataDir: data}
	go func() { cmd.Wait(); logf.Close(); close(g.exited) }()
	pathStyle := true
	g.opts = objstore.S3Options{Region: s3test.Region, Endpoint: "http://" + addr, AccessKeyID: key, SecretAccessKey: secret, PathStyle: &pathStyle}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := objstore.NewS3(ctx, "longrun", "probe/", g.opts)
		if err == nil {
			if _, err = st.List(ctx, ""); err == nil {
				return g, nil
			}
		}
		select {
		case <-g.exited:
			return nil, fmt.Errorf("versitygw exited at start: see %s", filepath.Join(dir, "versitygw.log"))
		default:
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("versitygw not ready after 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (g *versitygw) stop() {
	g.cmd.Process.Kill()
	<-g.exited
}

// longRunSpec is the tile over the generator: event time one second per
// row, so a five-minute window closes every 300 rows and the watermark
// moves often enough for no-data batches when the generator is behind.
func longRunSpec(c LongRunConfig) query.Spec {
	f := false
	return query.Spec{
		Name: "longrun",
		Source: query.Source{
			Generator: &query.GeneratorSource{RowsPerSecond: c.Rows, Courses: 20, Seed: 7, EventTimePerRow: query.Duration(time.Second), MaxRowsPerTrigger: c.Rows},
			Format:    "json",
			Schema: []query.Field{
				{Name: "event_id", Type: "string", Nullable: &f},
				{Name: "course_id", Type: "string", Nullable: &f},
				{Name: "lesson_id", Type: "string"},
				{Name: "event_time", Type: "timestamp", Nullable: &f},
			},
		},
		Watermark: &query.Watermark{Column: "event_time", Delay: query.Duration(time.Minute)},
		Aggregate: &query.Aggregate{
			Window:   &query.Window{Column: "event_time", Size: query.Duration(5 * time.Minute)},
			GroupBy:  []string{"course_id"},
			Measures: []query.Measure{{Name: "event_count", Fn: query.FnCount}},
		},
		OutputMode:         query.Append,
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: "s3://longrun/out/", PartitionBy: "window_date"}},
		CheckpointLocation: "s3://longrun/cp/",
		ShufflePartitions:  4,
		MinBatchesToRetain: c.Retain,
	}
}

// longRunStores counts the requests a driver makes to its checkpoint and
// sink, and the state files it writes.
type longRunStores struct {
	gets, lists, snapshots atomic.Int64
}

// countingStore is an objstore.Forward, so the run it measures takes the
// same store paths (streams, ranges, multipart) as one without it.
type countingStore struct {
	objstore.Forward
	c *longRunStores
}

func (s countingStore) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	s.c.gets.Add(1)
	return s.Forward.GetStream(ctx, key)
}

func (s countingStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	s.c.gets.Add(1)
	return s.Forward.GetRange(ctx, key, off, n)
}

func (s countingStore) GetRangeStream(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.c.gets.Add(1)
	return s.Forward.GetRangeStream(ctx, key, off, n)
}

func (s countingStore) PutStream(ctx context.Context, key string, r io.Reader) error {
	if strings.HasSuffix(key, ".snapshot") {
		s.c.snapshots.Add(1)
	}
	return s.Forward.PutStream(ctx, key, r)
}

func (s countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.c.gets.Add(1)
	return s.Forward.Get(ctx, key)
}

func (s countingStore) List(ctx context.Context, prefix string) ([]string, error) {
	s.c.lists.Add(1)
	return s.Forward.List(ctx, prefix)
}

func (s countingStore) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasSuffix(key, ".snapshot") {
		s.c.snapshots.Add(1)
	}
	return s.Forward.Put(ctx, key, data)
}

// runLongRun runs the longrun mode.
func runLongRun(ctx context.Context, c LongRunConfig, dir string, out io.Writer) (*LongRunResult, error) {
	if c.Batches < 200 {
		return nil, fmt.Errorf("-longrun-batches %d: must be at least 200 (the first restart is after batch 100)", c.Batches)
	}
	c.SampleEvery = max(c.SampleEvery, 1)
	gw, err := startVersitygw(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	spec := longRunSpec(c)
	cp, err := objstore.NewS3(ctx, "longrun", "cp/", gw.opts)
	if err != nil {
		return nil, err
	}
	sinkLog, err := objstore.NewS3(ctx, "longrun", "out/_sink_log/", gw.opts)
	if err != nil {
		return nil, err
	}
	res := &LongRunResult{Batches: c.Batches, Retain: c.Retain}
	start := time.Now()
	var mu sync.Mutex
	sample := func(batch ids.BatchID) error {
		keys, err := cp.List(ctx, "")
		if err != nil {
			return err
		}
		s := LongRunSample{Batch: batch, Checkpoint: len(keys), RSSBytes: selfRSS(), Seconds: time.Since(start).Seconds()}
		for _, k := range keys {
			switch {
			case strings.HasPrefix(k, "offsets/"):
				s.Offsets++
			case strings.HasPrefix(k, "commits/"):
				s.Commits++
			case strings.HasPrefix(k, "state/"):
				s.State++
			}
		}
		logKeys, err := sinkLog.List(ctx, "")
		if err != nil {
			return err
		}
		s.SinkLog = len(logKeys)
		mu.Lock()
		res.Samples = append(res.Samples, s)
		mu.Unlock()
		fmt.Fprintf(out, "longrun: after batch %d: %d checkpoint objects (%d offsets, %d commits, %d state), %d sink log entries, RSS %.0f MiB\n",
			batch, s.Checkpoint, s.Offsets, s.Commits, s.State, s.SinkLog, float64(s.RSSBytes)/(1<<20))
		return nil
	}

	// One driver run: from Build to the batch until, or (restart) to its
	// first commit. The sampler runs beside the batch loop.
	var stateWrites, batches int64
	drive := func(until ids.BatchID, restart bool) error {
		counts, sinkCounts := &longRunStores{}, &longRunStores{}
		opts := microbatch.Options{
			Store: objstore.Options{S3: gw.opts},
			WrapStore: func(role string, s objstore.Store) objstore.Store {
				switch role {
				case task.RoleCheckpoint:
					return countingStore{Forward: objstore.Forward{Store: s}, c: counts}
				case task.RoleSink:
					return countingStore{Forward: objstore.Forward{Store: s}, c: sinkCounts}
				}
				return s
			},
		}
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		samples := make(chan ids.BatchID, 1)
		var sampleErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range samples {
				if err := sample(b); err != nil && sampleErr == nil {
					sampleErr = err
				}
			}
		}()
		began := time.Now()
		var first atomic.Bool
		opts.Observer = progress.Committed(func(p *progress.Report) {
			if !first.Swap(true) && restart {
				mu.Lock()
				rs := LongRunRestart{AfterBatch: p.BatchID - 1, FirstCommitMs: float64(time.Since(began).Microseconds()) / 1000,
					Gets: counts.gets.Load(), Lists: counts.lists.Load(), SinkGets: sinkCounts.gets.Load(), SinkLists: sinkCounts.lists.Load()}
				res.Restarts = append(res.Restarts, rs)
				mu.Unlock()
				fmt.Fprintf(out, "longrun: a new driver after batch %d reached its first commit in %.0f ms (checkpoint: %d gets, %d lists; sink: %d gets, %d lists)\n",
					rs.AfterBatch, rs.FirstCommitMs, rs.Gets, rs.Lists, rs.SinkGets, rs.SinkLists)
				cancel()
			}
			batches++
			if p.NoData {
				res.NoDataBatches++
			}
			res.CleanupDeleted += p.RetentionDeleted
			res.CleanupErrors += p.RetentionErrors
			for _, op := range p.StateOperators {
				stateWrites += int64(op.NumStateStoreWrites)
			}
			if (p.BatchID+1)%ids.BatchID(c.SampleEvery) == 0 {
				select {
				case samples <- p.BatchID:
				default: // the sampler is behind: skip this one
				}
			}
			if p.BatchID >= until {
				cancel()
			}
		})
		job, err := microbatch.Build(runCtx, spec, opts)
		if err == nil {
			err = job.Run(runCtx, nil)
			if cerr := job.Close(); err == nil {
				err = cerr
			}
			res.SnapshotsPer10 += float64(counts.snapshots.Load())
		}
		close(samples)
		wg.Wait()
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return sampleErr
	}
	last := ids.BatchID(c.Batches - 1)
	for _, step := range []struct {
		until   ids.BatchID
		restart bool
	}{{99, false}, {0, true}, {0, true}, {0, true}, {last, false}, {0, true}, {0, true}, {0, true}} {
		if err := drive(step.until, step.restart); err != nil {
			return nil, err
		}
	}
	if batches > 0 {
		res.StateWritesPer10 = float64(stateWrites) * 10 / float64(batches)
		res.SnapshotsPer10 = res.SnapshotsPer10 * 10 / float64(batches)
	}
	if err := sample(last + 1); err != nil {
		return nil, err
	}
	return res, nil
}

// freeTCPPort returns a port free on 127.0.0.1 when asked.
func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// selfRSS is this process's resident set size (Linux), or 0.
func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// longRunLines are the results table's rows.
func longRunLines(r *LongRunResult) []line {
	if r == nil || len(r.Samples) == 0 {
		return nil
	}
	var ls []line
	add := func(name, value, target string) { ls = append(ls, line{name, value, target}) }
	maxOf := func(f func(LongRunSample) int) int {
		m := 0
		for _, s := range r.Samples {
			m = max(m, f(s))
		}
		return m
	}
	lastS := r.Samples[len(r.Samples)-1]
	add(fmt.Sprintf("longrun, S3: checkpoint objects over %d batches (minBatchesToRetain %d), max / at the end", r.Batches, r.Retain),
		fmt.Sprintf("%d / %d", maxOf(func(s LongRunSample) int { return s.Checkpoint }), lastS.Checkpoint), "bounded")
	add("longrun, S3: _sink_log/ entries, max / at the end", fmt.Sprintf("%d / %d", maxOf(func(s LongRunSample) int { return s.SinkLog }), lastS.SinkLog), "bounded")
	rss := make([]float64, len(r.Samples))
	for i, s := range r.Samples {
		rss[i] = float64(s.RSSBytes) / (1 << 20)
	}
	add("longrun: process RSS over the run, MiB", rangeOf(rss, "%.0f"), "flat")
	for _, rs := range r.Restarts {
		add(fmt.Sprintf("longrun: new driver → first commit after batch %d, ms (checkpoint gets / lists; sink gets / lists)", rs.AfterBatch),
			fmt.Sprintf("%.0f (%d / %d; %d / %d)", rs.FirstCommitMs, rs.Gets, rs.Lists, rs.SinkGets, rs.SinkLists), "")
	}
	add("longrun: state files written per 10 batches on the batch path / by the background maintenance", fmt.Sprintf("%.1f / %.1f", r.StateWritesPer10, r.SnapshotsPer10), "")
	add("longrun: no-data batches; cleaner deletions / failed passes", fmt.Sprintf("%d; %d / %d", r.NoDataBatches, r.CleanupDeleted, r.CleanupErrors), "")
	return ls
}

// longRunTargets is the restart target: within 1.5x after the last batch
// of the time after batch 100 (medians of the restarts at each point).
func longRunTargets(r *LongRunResult) []Target {
	t := Target{Name: "new driver → first commit after the last longrun batch / after batch 100 (medians)", Want: "≤ 1.5×", Status: "not measured"}
	var early, late []float64
	var lateAt ids.BatchID
	for _, rs := range r.restarts() {
		if rs.AfterBatch < 200 {
			early = append(early, rs.FirstCommitMs)
		} else {
			late, lateAt = append(late, rs.FirstCommitMs), rs.AfterBatch
		}
	}
	if len(early) > 0 && len(late) > 0 && median(early) > 0 {
		ratio := median(late) / median(early)
		t.Measured = fmt.Sprintf("%.2f× (%.0f ms after batch %d, %.0f ms after batch 100)", ratio, median(late), lateAt, median(early))
		if ratio <= 1.5 {
			t.Status, t.Gap = "met", fmt.Sprintf("%.2f× under", 1.5-ratio)
		} else {
			t.Status, t.Gap = "missed", fmt.Sprintf("%.2f× over", ratio-1.5)
			t.Why = "one start-up on a shared machine each: compare the objects read (gets / lists in the results), which retention bounds"
		}
	}
	return []Target{t}
}

func (r *LongRunResult) restarts() []LongRunRestart {
	if r == nil {
		return nil
	}
	return r.Restarts
}

// longRunPlots draws the object counts and RSS against the batch.
func longRunPlots(dir string, r *LongRunResult) ([]string, error) {
	if r == nil || len(r.Samples) < 2 {
		return nil, nil
	}
	series := func(f func(LongRunSample) float64) plotter.XYs {
		pts := make(plotter.XYs, len(r.Samples))
		for i, s := range r.Samples {
			pts[i] = plotter.XY{X: float64(s.Batch), Y: f(s)}
		}
		return pts
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("objects over %d batches on S3 (minBatchesToRetain %d)", r.Batches, r.Retain)
	p.X.Label.Text = "batch"
	p.Y.Label.Text = "objects"
	if err := plotutil.AddLinePoints(p,
		"checkpoint", series(func(s LongRunSample) float64 { return float64(s.Checkpoint) }),
		"state/", series(func(s LongRunSample) float64 { return float64(s.State) }),
		"offsets/+commits/", series(func(s LongRunSample) float64 { return float64(s.Offsets + s.Commits) }),
		"_sink_log/", series(func(s LongRunSample) float64 { return float64(s.SinkLog) })); err != nil {
		return nil, fmt.Errorf("plot longrun objects: %w", err)
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "longrun-objects.png")); err != nil {
		return nil, err
	}
	m := plot.New()
	m.Title.Text = "process RSS over the long run"
	m.X.Label.Text = "batch"
	m.Y.Label.Text = "MiB"
	if err := plotutil.AddLinePoints(m, "RSS", series(func(s LongRunSample) float64 { return float64(s.RSSBytes) / (1 << 20) })); err != nil {
		return nil, fmt.Errorf("plot longrun RSS: %w", err)
	}
	if err := m.Save(8*vg.Inch, 3*vg.Inch, filepath.Join(dir, "longrun-rss.png")); err != nil {
		return nil, err
	}
	return []string{"longrun-objects.png", "longrun-rss.png"}, nil
}
