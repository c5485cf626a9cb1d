package microbatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/console"
	"github.com/sluicehq/sluice/sink/jsonbatches"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
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
	Hook func(point string, batch ids.BatchID)
	// Observer is told what the loop did (see Config.Observer).
	Observer progress.Observer
	// StopTimeout bounds a graceful stop's wait for the batch in flight
	// (see Config.StopTimeout).
	StopTimeout time.Duration
	// AllowFirstStart and AllowReplay let a production query start on an
	// empty checkpoint.
	AllowFirstStart, AllowReplay bool
	// Ticket and ApprovedBy are recorded with the approval in a new
	// checkpoint's metadata (see Config.Ticket).
	Ticket, ApprovedBy string
	// Parallelism bounds in-process tasks (default GOMAXPROCS).
	Parallelism int
	// WrapStore, if set, wraps every store the query opens (role is one of
	// task's Role constants): counting, tracing, fault injection.
	WrapStore func(role string, s objstore.Store) objstore.Store
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

// TaskOptions are the options of the query's task environment in this
// process (task.Open).
func (o *Options) TaskOptions() task.OpenOptions {
	return task.OpenOptions{
		Store: o.Store, Logger: o.Logger, Hook: o.Hook, NoFileSink: o.Writer != nil, WrapStore: o.WrapStore,
		StateDir: o.StateDir, SharedClients: o.SharedClients, StateMemoryLimit: o.StateMemoryLimit,
		StateMaintenanceInterval: o.StateMaintenanceInterval, StateMaintenanceDone: o.StateMaintenanceDone,
	}
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
}

// Job is a query bound to its checkpoint, ready to run.
type Job struct {
	Spec  query.Spec
	Query *Query
	Env   *task.Env
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
	env, err := task.Open(ctx, &j.Spec, "", opts.TaskOptions())
	if err != nil {
		return nil, err
	}
	j.Env = env
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	cfg := Config{
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
		Observer:                opts.Observer,
		StopTimeout:             opts.StopTimeout,
		Hook:                    opts.Hook,
		PlanRetryFor:            opts.SourceRetryFor,
		NewQueryID:              opts.QueryID,
	}
	if spec.Join != nil && env.Plan.Join != nil {
		// (A sql: that never JOINs the view declared in join: reads no
		// snapshot.)
		topts := opts.TaskOptions()
		dim, err := topts.OpenStore(ctx, task.RoleJoin, spec.Join.Path)
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
		topts := opts.TaskOptions()
		st, err := topts.OpenStore(ctx, task.RoleSink, spec.Sink.JSONBatches.Path)
		if err != nil {
			return nil, fmt.Errorf("open sink.jsonBatches.path: %w", err)
		}
		cfg.Writer = jsonbatches.New(st, out)
	case spec.Sink.Console != nil:
		cfg.Writer = console.New(opts.Stdout, out)
	}
	q, err := Open(ctx, cfg)
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

// Run runs the job in this process until its trigger stops, a signal
// stops it or ctx ends (Query.Run); signals may be nil.
func (j *Job) Run(ctx context.Context, signals <-chan Signal) error {
	return j.Query.Run(ctx, &task.Local{Env: j.Env, Parallelism: j.opts.Parallelism}, signals)
}

// RunWith runs the job's batches on runner (Query.Run).
func (j *Job) RunWith(ctx context.Context, runner task.Runner, signals <-chan Signal) error {
	return j.Query.Run(ctx, runner, signals)
}

// Close releases the job's connections.
func (j *Job) Close() error { return j.Env.Close() }
