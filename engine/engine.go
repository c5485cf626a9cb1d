// Package engine assembles a runnable query from its spec: it opens the
// checkpoint, source, sink, state and bad-records stores the spec names,
// binds the query to its checkpoint, and runs it on a task runner (in this
// process by default).
//
// Build is the driver's side (the batch loop over a runner); NewEnv is what
// any process that runs tasks needs (an executor builds only that). The
// command-line tools and tests call it; it holds no logic of its own beyond
// choosing implementations.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/console"
	"github.com/sluicehq/sluice/sink/jsonbatches"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/catalog"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
)

// Store roles passed to Options.WrapStore.
const (
	RoleCheckpoint = "checkpoint"
	RoleSink       = "sink"
	RoleSource     = "source"
	RoleBadRecords = "badRecords"
	// RoleJoin is the store at join.path (read only, by the driver).
	RoleJoin = "join"
)

// Options are the process-level settings of a run.
type Options struct {
	Store  objstore.Options
	Logger *slog.Logger
	// Stdout receives the console sink's output (default os.Stdout).
	Stdout io.Writer
	// Writer, if set, replaces the spec's sink with a user BatchWriter
	// (foreachBatch).
	Writer sink.BatchWriter
	// Hook is the fault-injection hook (see package fault).
	Hook     func(point string, batch ids.BatchID)
	Progress func(*progress.Report)
	// Idle is called when the query finds nothing to run (see
	// scheduler.Config.Idle).
	Idle func(scheduler.Idle)
	// AllowFirstStart and AllowReplay let a production query start on an
	// empty checkpoint.
	AllowFirstStart, AllowReplay bool
	// Ticket and ApprovedBy are recorded with the approval in a new
	// checkpoint's metadata (see scheduler.Config.Ticket).
	Ticket, ApprovedBy string
	// Parallelism bounds in-process tasks (default GOMAXPROCS).
	Parallelism int
	// WrapStore, if set, wraps every store the query opens (role is one of
	// the Role constants): counting, tracing, fault injection.
	WrapStore func(role string, s objstore.Store) objstore.Store
	// OnRetry is told when a batch fails for a retryable reason and is
	// retried (see scheduler.Config.OnRetry).
	OnRetry func(batch ids.BatchID, attempt int, err error)
	// QueryID, if set, is the id a new checkpoint records.
	QueryID string
	// SourceRetryFor is how long the query keeps retrying when it cannot
	// plan a batch because the source is unreachable (zero: fail at once).
	SourceRetryFor time.Duration
	// StateDir is the local directory for the pebble state provider's
	// databases (a cache); empty means a temporary directory removed on
	// Close.
	StateDir string
	// SharedClients, if set, is the process's source client cache: queries
	// reading the same Kafka cluster with the same connection settings
	// share a client (nil: one client per query).
	SharedClients *source.Shared
	// StateMemoryLimit, when set, bounds the in-memory state provider's
	// state (shared by every query of the process that uses it): a batch
	// past it fails with statestore.ErrMemoryLimit, whose message says to
	// switch to stateStore pebble. Nil: no limit.
	StateMemoryLimit *statestore.MemoryLimit
	// StateMaintenanceInterval is the longest wait between background
	// state maintenance passes (snapshots); zero means 1s. A pass also runs
	// when a batch opens a committed version.
	StateMaintenanceInterval time.Duration
	// StateMaintenanceDone, if set, is told after each maintenance pass how
	// many snapshots it wrote and its error.
	StateMaintenanceDone func(written int, err error)
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
}

func (o *Options) open(ctx context.Context, role, uri string) (objstore.Store, error) {
	st, err := objstore.Open(ctx, uri, o.Store)
	if err != nil {
		return nil, err
	}
	if o.WrapStore != nil {
		st = o.WrapStore(role, st)
	}
	return st, nil
}

// Env is a query's task environment in one process, with what it opened.
type Env struct {
	*task.Env
	// Checkpoint is the checkpoint store; ParquetSink is set for the
	// Parquet sink.
	Checkpoint  objstore.Store
	ParquetSink *parquet.Sink
	closer      []func() error
}

// Close releases what NewEnv opened.
func (e *Env) Close() error {
	var errs []string
	for i := len(e.closer) - 1; i >= 0; i-- {
		if err := e.closer[i](); err != nil {
			errs = append(errs, err.Error())
		}
	}
	e.closer = nil
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// NewEnv opens what tasks of spec need in this process: the source, the
// state provider, the Parquet sink (when the spec has one) and the
// bad-records store. spec must be validated with defaults applied; queryID
// is the checkpoint's query id.
func NewEnv(ctx context.Context, spec *query.Spec, queryID string, opts Options) (_ *Env, err error) {
	opts.defaults()
	env := &Env{Env: &task.Env{QueryID: queryID, Spec: spec, Logger: opts.Logger, Hook: opts.Hook}}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	cp, err := opts.open(ctx, RoleCheckpoint, spec.CheckpointLocation)
	if err != nil {
		return nil, fmt.Errorf("open checkpointLocation: %w", err)
	}
	env.Checkpoint = cp
	if env.Source, err = openSource(ctx, spec, opts); err != nil {
		return nil, err
	}
	env.closer = append(env.closer, env.Source.Close)
	if spec.BadRecordsPath != "" {
		if env.BadRecords, err = opts.open(ctx, RoleBadRecords, spec.BadRecordsPath); err != nil {
			return nil, fmt.Errorf("open badRecordsPath: %w", err)
		}
	} else {
		env.BadRecords = objstore.Prefixed(cp, "bad_records/")
	}
	if spec.Join != nil {
		// Tasks load the snapshot their batch names from the checkpoint;
		// only the driver reads join.path (Build).
		env.Dimension = join.NewCache(spec, cp)
	}
	if spec.Aggregate != nil {
		if env.Layout, err = agg.Compile(spec); err != nil {
			return nil, err
		}
		if env.State, err = openState(spec, cp, opts, env); err != nil {
			return nil, err
		}
		env.closer = append(env.closer, env.State.Close)
		if m, ok := env.State.(statestore.Maintainer); ok {
			// Snapshots are written in the background, off the batch path,
			// for the partitions this process holds; stopped before the
			// provider closes.
			mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			done := make(chan struct{})
			go func() {
				defer close(done)
				statestore.RunMaintenance(mctx, m, statestore.MaintenanceOptions{Interval: opts.StateMaintenanceInterval, Logger: opts.Logger.With("query", spec.Name), Done: opts.StateMaintenanceDone})
			}()
			env.closer = append(env.closer, func() error { cancel(); <-done; return nil })
		}
	}
	if spec.Sink.Parquet != nil && opts.Writer == nil {
		st, err := opts.open(ctx, RoleSink, spec.Sink.Parquet.Path)
		if err != nil {
			return nil, fmt.Errorf("open sink.parquet.path: %w", err)
		}
		po := parquet.Options{PartitionBy: spec.Sink.Parquet.PartitionBy, Path: spec.Sink.Parquet.Path, Environment: spec.Environment, Logger: opts.Logger,
			CompactInterval: spec.Sink.Parquet.CompactInterval, MinBatchesToRetain: spec.MinBatchesToRetain}
		if spec.Sink.Parquet.CompactClosedDates {
			po.ClosedWatermark = func(ctx context.Context) (eventtime.Watermark, error) {
				_, wm, err := ClosedWatermark(ctx, cp)
				return wm, err
			}
		}
		ps := parquet.New(st, spec.OutputSchema(), po)
		if err := ps.Err(); err != nil {
			return nil, err
		}
		env.closer = append(env.closer, ps.Close)
		env.ParquetSink, env.FileSink = ps, ps
	}
	return env, nil
}

func openState(spec *query.Spec, cp objstore.Store, opts Options, env *Env) (statestore.Provider, error) {
	switch spec.StateStore {
	case "memory":
		return statestore.NewMemory(cp, statestore.MemoryOptions{SnapshotInterval: spec.SnapshotInterval, Limit: opts.StateMemoryLimit,
			BoundPrefix: env.Layout != nil && env.Layout.BoundPrefix()}), nil
	case "pebble":
		dir := opts.StateDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "sluice-state-")
			if err != nil {
				return nil, fmt.Errorf("stateStore pebble: %w", err)
			}
			dir = tmp
			env.closer = append(env.closer, func() error { return os.RemoveAll(tmp) })
		}
		p, err := statestore.NewPebble(cp, statestore.PebbleOptions{SnapshotInterval: spec.SnapshotInterval, DataDir: dir, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("stateStore pebble: %w", err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("stateStore %q is not available in this build", spec.StateStore)
}

// Job is a query bound to its checkpoint, ready to run.
type Job struct {
	Spec  query.Spec
	Query *scheduler.Query
	Env   *Env
	opts  Options
}

// Build checks spec (Check: nothing is created for a refused spec), binds it to its checkpoint (creating the metadata
// of a new one) and opens its parts in this process.
func Build(ctx context.Context, spec query.Spec, opts Options) (_ *Job, err error) {
	if err := Check(spec); err != nil {
		return nil, err
	}
	spec = spec.WithDefaults()
	opts.defaults()
	j := &Job{Spec: spec, opts: opts}
	// The driver's own source handle plans batches; tasks read through the
	// Env's. They are the same object in one process.
	env, err := NewEnv(ctx, &j.Spec, "", opts)
	if err != nil {
		return nil, err
	}
	j.Env = env
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	cfg := scheduler.Config{
		Spec:                    spec,
		Checkpoint:              env.Checkpoint,
		CheckpointOnObjectStore: objstore.IsObjectStore(spec.CheckpointLocation),
		Source:                  env.Source,
		State:                   env.State,
		AllowFirstStart:         opts.AllowFirstStart,
		AllowReplay:             opts.AllowReplay,
		Ticket:                  opts.Ticket,
		ApprovedBy:              opts.ApprovedBy,
		Logger:                  opts.Logger,
		Progress:                opts.Progress,
		Idle:                    opts.Idle,
		Hook:                    opts.Hook,
		PlanRetryFor:            opts.SourceRetryFor,
		OnRetry:                 opts.OnRetry,
		NewQueryID:              opts.QueryID,
	}
	if spec.Join != nil {
		dim, err := opts.open(ctx, RoleJoin, spec.Join.Path)
		if err != nil {
			return nil, fmt.Errorf("open join.path: %w", err)
		}
		cfg.Manifests = &join.Taker{Spec: &j.Spec, Dim: dim, Checkpoint: env.Checkpoint, Logger: opts.Logger}
	}
	out := spec.OutputSchema()
	switch {
	case opts.Writer != nil:
		cfg.Writer = opts.Writer
	case env.FileSink != nil:
		cfg.FileSink = env.FileSink
	case spec.Sink.JSONBatches != nil:
		st, err := opts.open(ctx, RoleSink, spec.Sink.JSONBatches.Path)
		if err != nil {
			return nil, fmt.Errorf("open sink.jsonBatches.path: %w", err)
		}
		cfg.Writer = jsonbatches.New(st, out)
	case spec.Sink.Console != nil:
		cfg.Writer = console.New(opts.Stdout, out)
	}
	q, err := scheduler.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if env.ParquetSink != nil {
		if err := env.ParquetSink.Prepare(ctx, q.QueryID(), spec.Environment); err != nil {
			return nil, err
		}
	}
	j.Query = q
	env.QueryID = q.QueryID()
	return j, nil
}

// openSource opens the spec's source through the catalog.
func openSource(ctx context.Context, spec *query.Spec, opts Options) (source.Source, error) {
	return catalog.Open(ctx, spec, source.Env{
		Logger: opts.Logger,
		OpenStore: func(ctx context.Context, uri string) (objstore.Store, error) {
			return opts.open(ctx, RoleSource, uri)
		},
		Shared: opts.SharedClients,
	})
}

// Run runs the job in this process until its trigger stops or ctx ends.
func (j *Job) Run(ctx context.Context) error {
	return j.Query.Run(ctx, &task.Local{Env: j.Env.Env, Parallelism: j.opts.Parallelism})
}

// RunWith runs the job's batches on runner.
func (j *Job) RunWith(ctx context.Context, runner task.Runner) error {
	return j.Query.Run(ctx, runner)
}

// Close releases the job's connections.
func (j *Job) Close() error { return j.Env.Close() }
