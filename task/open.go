package task

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/dedup"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/catalog"
	"github.com/sluicehq/sluice/statestore"
)

// Store roles passed to OpenOptions.WrapStore.
const (
	RoleCheckpoint = "checkpoint"
	RoleSink       = "sink"
	RoleSource     = "source"
	RoleBadRecords = "badRecords"
	// RoleJoin is the store at join.path (read only, by the driver).
	RoleJoin = "join"
)

// OpenOptions are what opening a query's task environment in a process
// takes: the driver's own process (driver run, driver serve's planning
// handle) and every executor open one with Open.
type OpenOptions struct {
	Store  objstore.Options
	Logger *slog.Logger
	// Hook is the fault-injection hook (see package fault).
	Hook func(point string, batch ids.BatchID)
	// NoFileSink leaves the spec's Parquet sink unopened: the rows go to a
	// user BatchWriter (foreachBatch) instead.
	NoFileSink bool
	// WrapStore, if set, wraps every store the query opens (role is one of
	// the Role constants): counting, tracing, fault injection, an
	// executor's write lease.
	WrapStore func(role string, s objstore.Store) objstore.Store
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

// OpenStore opens the store at uri for role, wrapped by WrapStore.
func (o *OpenOptions) OpenStore(ctx context.Context, role, uri string) (objstore.Store, error) {
	st, err := objstore.Open(ctx, uri, o.Store)
	if err != nil {
		return nil, err
	}
	if o.WrapStore != nil {
		st = o.WrapStore(role, st)
	}
	return st, nil
}

// Open opens what tasks of spec need in this process: the checkpoint's
// store, the source, the state provider, the Parquet sink (when the spec
// has one) and the bad-records store. spec must be validated with
// defaults applied; queryID is the checkpoint's query id (empty until the
// driver has bound the checkpoint: it sets Env.QueryID then). Close
// releases what it opened.
func Open(ctx context.Context, spec *query.Spec, queryID string, opts OpenOptions) (_ *Env, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	env := &Env{QueryID: queryID, Spec: spec, Logger: opts.Logger, Hook: opts.Hook}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	cp, err := opts.OpenStore(ctx, RoleCheckpoint, spec.CheckpointLocation)
	if err != nil {
		return nil, fmt.Errorf("open checkpointLocation: %w", err)
	}
	env.Checkpoint = cp
	if env.Source, err = openSource(ctx, spec, opts); err != nil {
		return nil, err
	}
	env.closers = append(env.closers, env.Source.Close)
	if spec.BadRecordsPath != "" {
		if env.BadRecords, err = opts.OpenStore(ctx, RoleBadRecords, spec.BadRecordsPath); err != nil {
			return nil, fmt.Errorf("open badRecordsPath: %w", err)
		}
	} else {
		env.BadRecords = objstore.Prefixed(cp, "bad_records/")
	}
	plan, err := spec.Plan()
	if err != nil {
		return nil, fmt.Errorf("plan query %s: %w", spec.Name, err)
	}
	env.Plan, env.pipe = plan, &pipeOnce{}
	if plan.Join != nil {
		// Tasks load the snapshot their batch names from the checkpoint;
		// only the driver reads join.path.
		env.Dimension = join.NewCache(spec, cp)
	}
	if plan.Aggregate != nil {
		if env.Layout, err = agg.CompilePlan(plan, spec.OutputMode); err != nil {
			return nil, err
		}
	}
	if plan.Dedup != nil {
		if env.Dedup, err = dedup.CompilePlan(plan, spec.Watermark.Delay.Micros()); err != nil {
			return nil, err
		}
	}
	if _, err := env.pipeline(); err != nil {
		return nil, err
	}
	if plan.Stateful() {
		if env.State, err = openState(spec, cp, opts, env); err != nil {
			return nil, err
		}
		env.closers = append(env.closers, env.State.Close)
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
			env.closers = append(env.closers, func() error { cancel(); <-done; return nil })
		}
	}
	if spec.Sink.Parquet != nil && !opts.NoFileSink {
		st, err := opts.OpenStore(ctx, RoleSink, spec.Sink.Parquet.Path)
		if err != nil {
			return nil, fmt.Errorf("open sink.parquet.path: %w", err)
		}
		po := parquet.Options{PartitionBy: spec.Sink.Parquet.PartitionBy, Path: spec.Sink.Parquet.Path, Environment: spec.Environment, Logger: opts.Logger,
			CompactInterval: spec.Sink.Parquet.CompactInterval, MinBatchesToRetain: spec.MinBatchesToRetain}
		if spec.Sink.Parquet.CompactClosedDates {
			po.ClosedWatermark = func(ctx context.Context) (eventtime.Watermark, error) {
				_, wm, err := checkpoint.ClosedWatermark(ctx, cp)
				return wm, err
			}
		}
		ps := parquet.New(st, spec.OutputSchema(), po)
		if err := ps.Err(); err != nil {
			return nil, err
		}
		env.closers = append(env.closers, ps.Close)
		env.ParquetSink, env.FileSink = ps, ps
	}
	return env, nil
}

// Close releases what Open opened (nothing for an Env built otherwise).
func (e *Env) Close() error {
	var errs []string
	for i := len(e.closers) - 1; i >= 0; i-- {
		if err := e.closers[i](); err != nil {
			errs = append(errs, err.Error())
		}
	}
	e.closers = nil
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func openState(spec *query.Spec, cp objstore.Store, opts OpenOptions, env *Env) (statestore.Provider, error) {
	switch spec.StateStore {
	case "memory":
		// Dedup's state keys all start with an expiry or its primary
		// rows' prefix (dedup package comment).
		return statestore.NewMemory(cp, statestore.MemoryOptions{SnapshotInterval: spec.SnapshotInterval, Limit: opts.StateMemoryLimit,
			BoundPrefix: env.Dedup != nil || env.Layout != nil && env.Layout.BoundPrefix()}), nil
	case "pebble":
		dir := opts.StateDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "sluice-state-")
			if err != nil {
				return nil, fmt.Errorf("stateStore pebble: %w", err)
			}
			dir = tmp
			env.closers = append(env.closers, func() error { return os.RemoveAll(tmp) })
		}
		p, err := statestore.NewPebble(cp, statestore.PebbleOptions{SnapshotInterval: spec.SnapshotInterval, DataDir: dir, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("stateStore pebble: %w", err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("stateStore %q is not available in this build", spec.StateStore)
}

// openSource opens the spec's source through the catalog.
func openSource(ctx context.Context, spec *query.Spec, opts OpenOptions) (source.Source, error) {
	return catalog.Open(ctx, spec, source.Env{
		Logger: opts.Logger,
		OpenStore: func(ctx context.Context, uri string) (objstore.Store, error) {
			return opts.OpenStore(ctx, RoleSource, uri)
		},
		Shared: opts.SharedClients,
	})
}
