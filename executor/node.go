package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/executor/shuffle"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/catalog"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
	"github.com/sluicehq/sluice/wire"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// NodeOptions configure an executor process's node.
type NodeOptions struct {
	// Driver is the driver's address (host:port).
	Driver string
	// Listen is the address to serve on (default 127.0.0.1:0).
	Listen string
	// Advertise is the address the driver and other executors dial
	// (default: the address Listen bound).
	Advertise string
	// DataDir holds local caches: pebble state (DataDir/state/<query>)
	// and shuffle spill files (DataDir/shuffle). Nothing in it must
	// survive the process. Required.
	DataDir string
	// Token is the cluster token ("" disables the check).
	Token string
	// TLS is the certificate source (nil: plaintext): the node serves
	// with it and presents it to the driver and to other executors.
	TLS *tlsconf.Source
	// Insecure accepts a non-loopback Listen with no authentication (it
	// logs a warning).
	Insecure bool
	// Slots bounds the map tasks run at once (default GOMAXPROCS).
	Slots int
	// ShuffleMemory bounds shuffle data held in memory before spilling
	// (default shuffle.DefaultMemoryLimit).
	ShuffleMemory int64
	// Task is the base of the options each query's task environment is
	// built with (object store settings, fault hook); Logger and StateDir
	// are set by the node.
	Task   task.OpenOptions
	Logger *slog.Logger
	// DrainTimeout bounds a drain on shutdown (default 60s).
	DrainTimeout time.Duration
	// ReduceWait bounds how long a reduce task waits for partials that
	// have not arrived (default 30s); they normally have.
	ReduceWait time.Duration
}

// Node is an executor process's cluster side: it registers with the
// driver, heartbeats, serves ExecutorService and ShuffleService, and on
// shutdown drains.
type Node struct {
	opts   NodeOptions
	log    *slog.Logger
	lis    net.Listener
	srv    *grpc.Server
	pool   *rpcauth.Pool // to the driver
	peers  *rpcauth.Pool // to other executors (the shuffle), verifying the peer name
	buffer *shuffle.Buffer
	slots  chan struct{}

	// life is cancelled when Run returns; query environments live in it.
	life    context.Context
	endLife context.CancelFunc

	mu        sync.Mutex
	id        ids.ExecutorID
	interval  time.Duration
	queries   map[string]*queryEnv
	prepareMu sync.Mutex

	tasks    sync.WaitGroup
	running  atomic.Int32
	draining atomic.Bool
	// lease gates this executor's writes (see lease.go).
	lease *writeLease
	// regCtx is cancelled when this executor's registration ends (the
	// driver forgot it): tasks of that registration stop, so they cannot
	// write after the executor registers again with a fresh lease.
	regMu     sync.Mutex
	regCtx    context.Context
	regCancel context.CancelFunc

	counters nodeCounters

	// aborted is closed by Kill: stop at once, without draining.
	aborted   chan struct{}
	abortOnce sync.Once
}

type queryEnv struct {
	env  *task.Env
	spec []byte
	run  string
	// parts serialises reduce tasks per partition: a state partition is
	// open once at a time.
	parts map[ids.PartitionID]*sync.Mutex
	// ahead holds the map tasks run ahead of their batch's log entry until
	// FinishMapTasks (n.mu).
	ahead map[aheadKey]*aheadMap
}

// aheadKey names a map attempt run ahead.
type aheadKey struct {
	run     string
	batch   ids.BatchID
	attempt uint64
}

// aheadMap is a map task run ahead: what FinishMapTasks finishes.
type aheadMap struct {
	task task.MapTask
	res  *task.MapResult // its Bad records only
}

// dropAheadLocked forgets q's maps run ahead of other runs, or of batches
// before from (n.mu held).
func (q *queryEnv) dropAheadLocked(run string, from ids.BatchID) {
	for k := range q.ahead {
		if k.run != run || k.batch < from {
			delete(q.ahead, k)
		}
	}
}

// NewNode listens; Run registers and serves.
func NewNode(opts NodeOptions) (*Node, error) {
	if opts.Driver == "" {
		return nil, errors.New("executor: --driver HOST:PORT is required")
	}
	if opts.DataDir == "" {
		return nil, errors.New("executor: --data-dir is required")
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.Slots <= 0 {
		opts.Slots = runtime.GOMAXPROCS(0)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 60 * time.Second
	}
	if opts.ReduceWait <= 0 {
		opts.ReduceWait = 30 * time.Second
	}
	if opts.Task.SharedClients == nil {
		// One client per Kafka cluster for all the queries this executor
		// runs, kept across their batches, closed with the last of them.
		opts.Task.SharedClients = source.NewShared()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := rpcauth.CheckListen(opts.Listen, opts.Token, opts.TLS, opts.Insecure, opts.Logger); err != nil {
		return nil, err
	}
	serverTLS, clientTLS, err := rpcauth.Transport(opts.TLS)
	if err != nil {
		return nil, err
	}
	spill := filepath.Join(opts.DataDir, "shuffle")
	if err := os.RemoveAll(spill); err != nil {
		return nil, fmt.Errorf("clear shuffle spill directory: %w", err)
	}
	if err := os.MkdirAll(spill, 0o755); err != nil {
		return nil, fmt.Errorf("create shuffle spill directory: %w", err)
	}
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Listen, err)
	}
	if opts.Advertise == "" {
		opts.Advertise = lis.Addr().String()
	}
	n := &Node{
		opts: opts, log: opts.Logger, lis: lis, pool: rpcauth.NewPool(opts.Token, clientTLS),
		peers:   rpcauth.NewPool(opts.Token, clientTLS, rpcauth.PeerDialOptions(opts.TLS)...),
		buffer:  shuffle.NewBuffer(shuffle.BufferOptions{MemoryLimit: opts.ShuffleMemory, SpillDir: spill, Logger: opts.Logger}),
		slots:   make(chan struct{}, opts.Slots),
		queries: map[string]*queryEnv{},
		aborted: make(chan struct{}),
		lease:   newWriteLease(),
	}
	n.life, n.endLife = context.WithCancel(context.Background())
	n.srv = grpc.NewServer(rpcauth.ServerOptions(opts.Token, serverTLS, opts.Logger)...)
	sluicepb.RegisterExecutorServiceServer(n.srv, &executorService{n: n})
	sluicepb.RegisterShuffleServiceServer(n.srv, &shuffle.Server{Buffer: n.buffer, Accept: n.accept, Logger: opts.Logger})
	return n, nil
}

// Addr returns the address the node advertises.
func (n *Node) Addr() string { return n.opts.Advertise }

// ID returns the id the driver gave the node ("" before registering).
func (n *Node) ID() ids.ExecutorID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.id
}

// Run registers with the driver and serves until ctx ends, then drains:
// it asks the driver to stop giving it work, waits until no running batch
// needs it, finishes its tasks and stops. It returns an error when the
// driver refuses it (a wrong token) or serving fails.
func (n *Node) Run(ctx context.Context) error {
	defer n.close()
	serveErr := make(chan error, 1)
	go func() { serveErr <- n.srv.Serve(n.lis) }()
	n.log.Info("executor listening", "address", n.Addr(), "slots", n.opts.Slots)
	conn, err := n.pool.Conn(n.opts.Driver)
	if err != nil {
		return fmt.Errorf("dial driver %s: %w", n.opts.Driver, err)
	}
	driver := sluicepb.NewDriverServiceClient(conn)
	if err := n.register(ctx, driver); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	hbCtx, stopHB := context.WithCancel(context.Background())
	hbDone := make(chan error, 1)
	go func() { hbDone <- n.heartbeat(hbCtx, driver) }()
	select {
	case <-ctx.Done():
	case <-n.aborted:
		stopHB()
		<-hbDone
		return errAborted
	case err := <-hbDone:
		stopHB()
		return err
	case err := <-serveErr:
		stopHB()
		<-hbDone
		return fmt.Errorf("serve executor: %w", err)
	}
	n.drain(driver)
	stopHB()
	<-hbDone
	return nil
}

var errAborted = errors.New("executor aborted")

// Kill stops the node at once, as a crash would: connections drop, no
// drain, no deregistration (for tests).
func (n *Node) Kill() {
	n.abortOnce.Do(func() {
		n.srv.Stop()
		close(n.aborted)
	})
}

func (n *Node) close() {
	done := make(chan struct{})
	go func() { n.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		n.srv.Stop()
	}
	n.endLife()
	n.mu.Lock()
	qs := n.queries
	n.queries = map[string]*queryEnv{}
	n.mu.Unlock()
	for id, q := range qs {
		if err := q.env.Close(); err != nil {
			n.log.Warn("close query environment", "query", id, "err", err)
		}
	}
	n.buffer.Close()
	n.pool.Close()
	n.peers.Close()
}

// register registers with the driver, retrying while it is unreachable.
func (n *Node) register(ctx context.Context, driver sluicepb.DriverServiceClient) error {
	host, _ := os.Hostname()
	req := &sluicepb.RegisterRequest{Address: n.Addr(), Name: fmt.Sprintf("%s/%d", host, os.Getpid()), Slots: int32(n.opts.Slots)}
	wait := 50 * time.Millisecond
	warned := false
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		sentAt := time.Now()
		resp, err := driver.Register(rctx, req)
		cancel()
		if err == nil {
			n.mu.Lock()
			n.id = ids.ExecutorID(resp.ExecutorId)
			n.interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
			n.mu.Unlock()
			n.newRegistration()
			n.lease.renew(sentAt, n.leaseDuration())
			n.log.Info("executor registered", "executor", resp.ExecutorId, "driver", n.opts.Driver, "address", n.Addr())
			return nil
		}
		if rpcauth.IsUnauthenticated(err) {
			n.log.Error("the driver refused this executor", "driver", n.opts.Driver, "err", status.Convert(err).Message())
			return fmt.Errorf("register with driver %s: %s", n.opts.Driver, status.Convert(err).Message())
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !warned {
			n.log.Warn("driver not reachable; retrying", "driver", n.opts.Driver, "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// newRegistration starts the context of a new registration, ending the
// previous one.
func (n *Node) newRegistration() {
	n.regMu.Lock()
	defer n.regMu.Unlock()
	if n.regCancel != nil {
		n.regCancel()
	}
	n.regCtx, n.regCancel = context.WithCancel(n.life)
}

// endRegistration cancels the tasks of the current registration.
func (n *Node) endRegistration() {
	n.regMu.Lock()
	defer n.regMu.Unlock()
	if n.regCancel != nil {
		n.regCancel()
	}
}

// beginTask starts a task of the query's run: its context (see
// taskContext), the query's environment, and the counts a drain waits on;
// end ends it.
func (n *Node) beginTask(ctx context.Context, queryID, run string) (_ context.Context, _ *queryEnv, end func(), _ error) {
	ctx, cancel := n.taskContext(ctx)
	q, err := n.query(queryID, run)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	n.tasks.Add(1)
	n.running.Add(1)
	return ctx, q, func() { n.running.Add(-1); n.tasks.Done(); cancel() }, nil
}

// taskContext returns ctx, also cancelled when the current registration
// ends.
func (n *Node) taskContext(ctx context.Context) (context.Context, context.CancelFunc) {
	n.regMu.Lock()
	reg := n.regCtx
	n.regMu.Unlock()
	tctx, cancel := context.WithCancel(ctx)
	if reg == nil {
		return tctx, cancel
	}
	stop := context.AfterFunc(reg, cancel)
	return tctx, func() { stop(); cancel() }
}

// leaseDuration is how long a heartbeat the driver acknowledged lets this
// executor write: leaseFraction of the driver's timeout (heartbeats come
// every fifth of it).
func (n *Node) leaseDuration() time.Duration {
	n.mu.Lock()
	interval := n.interval
	n.mu.Unlock()
	if interval <= 0 {
		interval = time.Second
	}
	return time.Duration(float64(5*interval) * leaseFraction)
}

// heartbeat keeps the registration alive, registering again when the
// driver forgot this executor (it expired, or the driver restarted).
func (n *Node) heartbeat(ctx context.Context, driver sluicepb.DriverServiceClient) error {
	failing := false
	for {
		n.mu.Lock()
		id, interval := n.id, n.interval
		n.mu.Unlock()
		if interval <= 0 {
			interval = time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
		hctx, cancel := context.WithTimeout(ctx, interval*4)
		sentAt := time.Now()
		resp, err := driver.Heartbeat(hctx, &sluicepb.HeartbeatRequest{ExecutorId: string(id), RunningTasks: n.running.Load(), Address: n.Addr()})
		cancel()
		if err == nil && resp.Known {
			n.lease.renew(sentAt, n.leaseDuration())
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case rpcauth.IsUnauthenticated(err):
			return fmt.Errorf("heartbeat to driver %s: %s", n.opts.Driver, status.Convert(err).Message())
		case err != nil:
			if !failing {
				n.log.Warn("heartbeat failed; retrying", "driver", n.opts.Driver, "err", err)
				failing = true
			}
		case !resp.Known && !n.draining.Load():
			failing = false
			n.log.Warn("the driver does not know this executor (it expired or the driver restarted); stopping its tasks and registering again", "executor", id)
			n.endRegistration()
			if err := n.register(ctx, driver); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		default:
			if failing {
				n.log.Info("heartbeat restored", "driver", n.opts.Driver)
			}
			failing = false
		}
	}
}

// drain leaves the pool: the driver answers Deregister once no running
// batch uses this executor; then the tasks still running finish.
func (n *Node) drain(driver sluicepb.DriverServiceClient) {
	n.draining.Store(true)
	n.log.Info("executor draining: finishing tasks and handing partitions back", "executor", n.ID(), "running", n.running.Load())
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.DrainTimeout)
	defer cancel()
	if _, err := driver.Deregister(ctx, &sluicepb.DeregisterRequest{ExecutorId: string(n.ID())}); err != nil {
		n.log.Warn("deregister from the driver failed; stopping anyway", "err", err)
	}
	done := make(chan struct{})
	go func() { n.tasks.Wait(); close(done) }()
	select {
	case <-done:
		n.log.Info("executor drained", "executor", n.ID())
	case <-ctx.Done():
		n.log.Warn("drain timed out with tasks running", "running", n.running.Load())
	}
}

// accept admits shuffle data of prepared queries in their current run.
func (n *Node) accept(queryID, run string) error {
	_, err := n.query(queryID, run)
	return err
}

func (n *Node) query(id, run string) (*queryEnv, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.queries[id]
	if q == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "query %s is not prepared on this executor", id)
	}
	if q.run != run {
		return nil, status.Errorf(codes.FailedPrecondition, "query %s is prepared for driver run %s, not %s", id, q.run, run)
	}
	return q, nil
}

func (n *Node) partLock(q *queryEnv, p ids.PartitionID) *sync.Mutex {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := q.parts[p]
	if m == nil {
		m = &sync.Mutex{}
		q.parts[p] = m
	}
	return m
}

func (n *Node) acquire(ctx context.Context) error {
	select {
	case n.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Node) releaseSlot() { <-n.slots }

func (n *Node) shuffleClient(addr string) (sluicepb.ShuffleServiceClient, error) {
	c, err := n.peers.Conn(addr)
	if err != nil {
		return nil, err
	}
	return sluicepb.NewShuffleServiceClient(c), nil
}

type executorService struct {
	sluicepb.UnimplementedExecutorServiceServer
	n *Node
}

func (s *executorService) PrepareQuery(ctx context.Context, req *sluicepb.PrepareQueryRequest) (*sluicepb.PrepareQueryResponse, error) {
	n := s.n
	n.prepareMu.Lock()
	defer n.prepareMu.Unlock()
	n.mu.Lock()
	q := n.queries[req.QueryId]
	n.mu.Unlock()
	if q != nil && bytes.Equal(q.spec, req.SpecJson) {
		n.mu.Lock()
		changed := q.run != req.RunId
		q.run = req.RunId
		n.mu.Unlock()
		if changed {
			n.buffer.ReleaseOlder(req.QueryId, req.RunId, math.MinInt64)
			n.log.Info("query prepared for a new driver run", "query", req.QueryId, "run", req.RunId)
		}
		return &sluicepb.PrepareQueryResponse{}, nil
	}
	spec, err := query.Parse(req.SpecJson)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "prepare query %s: %v", req.QueryId, err)
	}
	spec = spec.WithDefaults()
	if err := catalog.Validate(spec); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "prepare query %s: %v", req.QueryId, err)
	}
	opts := n.opts.Task
	opts.Logger = n.log
	opts.StateDir = filepath.Join(n.opts.DataDir, "state", req.QueryId)
	// Every write this executor makes for the query (state, sink files,
	// bad records) is refused once its lease has lapsed.
	inner := opts.WrapStore
	opts.WrapStore = func(role string, st objstore.Store) objstore.Store {
		if inner != nil {
			st = inner(role, st)
		}
		return newLeasedStore(st, n.lease)
	}
	env, err := task.Open(n.life, &spec, req.QueryId, opts)
	if err != nil {
		err = fmt.Errorf("prepare query %s: %w", req.QueryId, err)
		if derr, ok := wire.EncodeDomain(err); ok {
			return nil, derr
		}
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	n.mu.Lock()
	n.queries[req.QueryId] = &queryEnv{env: env, spec: req.SpecJson, run: req.RunId, parts: map[ids.PartitionID]*sync.Mutex{}}
	n.mu.Unlock()
	n.buffer.ReleaseOlder(req.QueryId, req.RunId, math.MinInt64)
	if q != nil {
		n.log.Info("query definition changed; task environment rebuilt", "query", req.QueryId)
		if err := q.env.Close(); err != nil {
			n.log.Warn("close old query environment", "query", req.QueryId, "err", err)
		}
	}
	n.log.Info("query prepared", "query", req.QueryId, "name", spec.Name, "run", req.RunId)
	return &sluicepb.PrepareQueryResponse{}, nil
}

func (s *executorService) RunMapTask(ctx context.Context, req *sluicepb.RunMapTaskRequest) (*sluicepb.RunMapTaskResponse, error) {
	n := s.n
	ctx, q, end, err := n.beginTask(ctx, req.QueryId, req.RunId)
	if err != nil {
		return nil, err
	}
	defer end()
	if int(req.Partitions) != len(req.Owners) || req.Partitions <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "map task %d of batch %d: %d partitions but %d owners", req.MapIndex, req.Batch, req.Partitions, len(req.Owners))
	}
	batch := ids.BatchID(req.Batch)
	// The batch before may still be reducing while this one runs ahead:
	// what is older than it is left over from failed attempts.
	n.buffer.ReleaseOlder(req.QueryId, req.RunId, batch-1)
	n.mu.Lock()
	q.dropAheadLocked(req.RunId, batch-1)
	n.mu.Unlock()
	if err := n.acquire(ctx); err != nil {
		return nil, wire.TaskStatus(ctx, err)
	}
	mt := task.MapTask{
		Batch: batch, Index: int(req.MapIndex), Split: source.Split{ID: req.Split.GetId(), Desc: req.Split.GetDesc()},
		Late: eventtime.Watermark(req.LateWatermarkUs), Partitions: int(req.Partitions), BatchTimestampMs: req.BatchTimestampMs,
		Manifest: join.Ref{ID: req.ManifestId, Hash: req.ManifestHash}, Ahead: req.Ahead,
	}
	res, err := task.RunMap(ctx, q.env, mt)
	n.releaseSlot()
	if err != nil {
		n.counters.failures.Add(1)
		return nil, wire.TaskStatus(ctx, err)
	}
	owners := make([]shuffle.Owner, len(req.Owners))
	for p, o := range req.Owners {
		owners[p] = shuffle.Owner{ID: o.ExecutorId, Address: o.Address}
	}
	pusher := &shuffle.Pusher{Self: string(n.ID()), Local: n.buffer, Dial: n.shuffleClient}
	tag := shuffle.Tag{BatchKey: shuffle.BatchKey{Query: req.QueryId, Run: req.RunId, Batch: batch}, Map: int(req.MapIndex), Attempt: req.Attempt}
	stats, err := pusher.Push(ctx, tag, &shuffle.Output{Layout: q.env.Layout, Partials: res.Partials, Rows: res.Rows}, owners)
	if err != nil {
		n.counters.failures.Add(1)
		return nil, pushError(ctx, err, string(n.ID()))
	}
	if req.Ahead {
		n.mu.Lock()
		if q.ahead == nil {
			q.ahead = map[aheadKey]*aheadMap{}
		}
		q.ahead[aheadKey{run: req.RunId, batch: batch, attempt: req.Attempt}] = &aheadMap{task: mt, res: &task.MapResult{Index: res.Index, Bad: res.Bad}}
		n.mu.Unlock()
	}
	n.counters.maps.Add(1)
	n.counters.shuffle.Add(stats.Bytes)
	return &sluicepb.RunMapTaskResponse{Metrics: &sluicepb.MapMetrics{
		InputRows: res.InputRows, Malformed: res.Malformed, DroppedByWatermark: res.DroppedByWatermark,
		HasEventTime: res.HasEventTime, MinEventTimeUs: res.MinEventTime, MaxEventTimeUs: res.MaxEventTime,
		ShuffleBytes: stats.Bytes, ShuffleRecords: stats.Records, TooFarAhead: res.TooFarAhead, JoinUnmatched: res.JoinUnmatched,
		Duplicates: res.Duplicates,
	}}, nil
}

// pushError reports a failed push: an owner that could not be reached is
// UNAVAILABLE with a ShuffleFailure detail naming it, so the driver can
// reassign its partitions; other failures are the task's.
func pushError(ctx context.Context, err error, self string) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	var pe *shuffle.PushError
	if !errors.As(err, &pe) || pe.Owner.ID == self {
		return wire.TaskStatus(ctx, err)
	}
	switch status.Code(pe.Err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return wire.ShuffleFailureStatus(err, pe.Owner.ID, pe.Owner.Address)
	}
	return status.Error(codes.Aborted, err.Error())
}

// reduceRowChunkBytes is the size of one message of a reduce task's rows
// (the last one smaller), far below MaxMessageBytes.
const reduceRowChunkBytes = 256 << 10

func (s *executorService) RunReduceTask(req *sluicepb.RunReduceTaskRequest, stream grpc.ServerStreamingServer[sluicepb.RunReduceTaskResponse]) error {
	resp, err := s.runReduceTask(stream.Context(), req)
	if err != nil {
		return err
	}
	// The driver concatenates the chunks before decoding, so a chunk is
	// cut at reduceRowChunkBytes wherever that falls, through a row too:
	// no message exceeds it, whatever a row's size.
	var chunk []byte
	for _, r := range resp.rows {
		chunk = wire.AppendRow(chunk, r)
		for len(chunk) >= reduceRowChunkBytes {
			if err := stream.Send(&sluicepb.RunReduceTaskResponse{Rows: chunk[:reduceRowChunkBytes]}); err != nil {
				return err
			}
			chunk = append([]byte(nil), chunk[reduceRowChunkBytes:]...)
		}
	}
	resp.last.Rows, resp.last.Last = chunk, true
	return stream.Send(resp.last)
}

// reduceOutput is a reduce task's result before it is streamed.
type reduceOutput struct {
	last *sluicepb.RunReduceTaskResponse
	rows []row.Row
}

func (s *executorService) runReduceTask(ctx context.Context, req *sluicepb.RunReduceTaskRequest) (*reduceOutput, error) {
	n := s.n
	ctx, q, end, err := n.beginTask(ctx, req.QueryId, req.RunId)
	if err != nil {
		return nil, err
	}
	defer end()
	p, batch := ids.PartitionID(req.Partition), ids.BatchID(req.Batch)
	key := shuffle.BatchKey{Query: req.QueryId, Run: req.RunId, Batch: batch}
	wctx, cancel := context.WithTimeout(ctx, n.opts.ReduceWait)
	chunks, err := n.buffer.Wait(wctx, key, p, req.MapAttempts)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Aborted, "reduce partition %d of batch %d: %v", p, batch, err)
	}
	// Reduce tasks take no task slot: they mostly wait on writes (state
	// deltas, sink files), and an executor runs one per partition it owns.
	lock := n.partLock(q, p)
	lock.Lock()
	defer lock.Unlock()
	env := q.env
	var partials [][]agg.Entry
	var rows [][]row.Row
	if env.Layout != nil {
		partials, err = wire.DecodePartials(env.Layout, chunks)
	} else {
		rows, err = wire.DecodeRowsByMap(chunks)
	}
	if err != nil {
		return nil, status.Errorf(codes.DataLoss, "reduce partition %d of batch %d: %v", p, batch, err)
	}
	rr, err := task.RunReduce(ctx, env, task.ReduceTask{
		Batch: batch, Partition: p, SkipSink: req.SkipSink,
		StateAttempt: statestore.AttemptID(req.RunId, batch, req.MapAttempts),
		Watermark:    eventtime.Batch{Late: eventtime.Watermark(req.LateWatermarkUs), Evict: eventtime.Watermark(req.EvictWatermarkUs)},
		GatherBelow:  req.GatherBelowBytes,
		Manifest:     join.Ref{ID: req.ManifestId, Hash: req.ManifestHash},
	}, partials, rows)
	if err != nil {
		n.counters.failures.Add(1)
		return nil, wire.TaskStatus(ctx, err)
	}
	n.counters.reduces.Add(1)
	n.counters.setStateRows(req.QueryId, p, batch, rr.StateRows)
	return &reduceOutput{rows: rr.Rows, last: &sluicepb.RunReduceTaskResponse{
		Files: rr.Files, NumOutputRows: rr.NumOutputRows, StateRows: rr.StateRows, Updated: rr.Updated,
		Removed: rr.Removed, MemoryBytes: rr.MemoryBytes, StateWrites: int32(rr.StateWrites), Gathered: rr.Gathered,
		Malformed: rr.Malformed, Duplicates: rr.Duplicates, JoinUnmatched: rr.JoinUnmatched,
	}}, nil
}

// FinishMapTasks finishes the map attempts run ahead here, in order: their
// malformed records are set aside and their map-done hook is called.
func (s *executorService) FinishMapTasks(ctx context.Context, req *sluicepb.FinishMapTasksRequest) (*sluicepb.FinishMapTasksResponse, error) {
	n := s.n
	ctx, q, end, err := n.beginTask(ctx, req.QueryId, req.RunId)
	if err != nil {
		return nil, err
	}
	defer end()
	batch := ids.BatchID(req.Batch)
	for _, a := range req.Attempts {
		k := aheadKey{run: req.RunId, batch: batch, attempt: a}
		n.mu.Lock()
		m := q.ahead[k]
		n.mu.Unlock()
		if m == nil {
			return nil, status.Errorf(codes.NotFound, "batch %d: map attempt %d was not run ahead here (or its batch was released)", batch, a)
		}
		if err := task.FinishMap(ctx, q.env, m.task, m.res); err != nil {
			n.counters.failures.Add(1)
			return nil, wire.TaskStatus(ctx, err)
		}
		n.mu.Lock()
		delete(q.ahead, k)
		n.mu.Unlock()
	}
	return &sluicepb.FinishMapTasksResponse{}, nil
}

func (s *executorService) ReleaseBatch(ctx context.Context, req *sluicepb.ReleaseBatchRequest) (*sluicepb.ReleaseBatchResponse, error) {
	if q, err := s.n.query(req.QueryId, req.RunId); err == nil {
		s.n.mu.Lock()
		for k := range q.ahead {
			if k.batch == ids.BatchID(req.Batch) {
				delete(q.ahead, k)
			}
		}
		s.n.mu.Unlock()
	}
	s.n.buffer.Release(shuffle.BatchKey{Query: req.QueryId, Run: req.RunId, Batch: ids.BatchID(req.Batch)})
	s.n.releaseMovedState(req.QueryId, req.RunId, req.PartitionOwners)
	return &sluicepb.ReleaseBatchResponse{}, nil
}

// releaseMovedState drops the cached state of the query's partitions that
// owners (one per partition) give to another executor, so state that moved
// away stops holding memory and disk here. A partition whose reduce task
// is running is left for the next release.
func (n *Node) releaseMovedState(queryID, run string, owners []string) {
	q, err := n.query(queryID, run)
	if err != nil || len(owners) == 0 {
		return
	}
	cache, ok := q.env.State.(statestore.Cache)
	if !ok {
		return
	}
	self := string(n.ID())
	for p := range cache.Held() {
		if int(p) < len(owners) && owners[p] == self {
			continue
		}
		lock := n.partLock(q, p)
		if !lock.TryLock() {
			continue
		}
		released, err := cache.Release(p)
		lock.Unlock()
		switch {
		case err != nil:
			n.log.Warn("release state of a partition that moved away", "query", queryID, "partition", p, "err", err)
		case released:
			n.log.Info("released state of a partition that moved away", "query", queryID, "partition", p, "owner", ownerOf(owners, p))
		}
	}
}

func ownerOf(owners []string, p ids.PartitionID) string {
	if int(p) < len(owners) {
		return owners[p]
	}
	return ""
}

// HeldState returns, for a prepared query, the state partitions this
// executor caches and the bytes each holds (nil when the query is not
// prepared or its provider caches nothing).
func (n *Node) HeldState(queryID string) map[ids.PartitionID]int64 {
	n.mu.Lock()
	q := n.queries[queryID]
	n.mu.Unlock()
	if q == nil {
		return nil
	}
	if cache, ok := q.env.State.(statestore.Cache); ok {
		return cache.Held()
	}
	return nil
}
