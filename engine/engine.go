// Package engine assembles a runnable query from its spec: it opens the
// checkpoint, source, sink, state and bad-records stores the spec names,
// binds the query to its checkpoint, and runs it on a task runner (in this
// process by default).
//
// The command-line tools and tests call it; it holds no logic of its own
// beyond choosing implementations.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/console"
	"github.com/sluicehq/sluice/sink/jsonbatches"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/file"
	"github.com/sluicehq/sluice/source/generator"
	"github.com/sluicehq/sluice/statestore"
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
	Hook     func(point string, batch int64)
	Progress func(*scheduler.Progress)
	// AllowFirstStart and AllowReplay let a production query start on an
	// empty checkpoint.
	AllowFirstStart, AllowReplay bool
	// Parallelism bounds in-process tasks (default GOMAXPROCS).
	Parallelism int
	// WrapCheckpoint, if set, wraps the checkpoint store (counting, faults).
	WrapCheckpoint func(objstore.Store) objstore.Store
}

// Job is a query bound to its checkpoint, ready to run.
type Job struct {
	Spec   query.Spec
	Query  *scheduler.Query
	Env    *executor.Env
	Source source.Source
	closer []func() error
	opts   Options
}

// Build validates spec and assembles its parts.
func Build(ctx context.Context, spec query.Spec, opts Options) (*Job, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec = spec.WithDefaults()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	j := &Job{Spec: spec, opts: opts}
	ok := false
	defer func() {
		if !ok {
			j.Close()
		}
	}()
	cp, err := objstore.Open(ctx, spec.CheckpointLocation, opts.Store)
	if err != nil {
		return nil, fmt.Errorf("open checkpointLocation: %w", err)
	}
	if opts.WrapCheckpoint != nil {
		cp = opts.WrapCheckpoint(cp)
	}
	src, err := openSource(ctx, &spec, opts)
	if err != nil {
		return nil, err
	}
	j.Source = src
	j.closer = append(j.closer, src.Close)

	var badStore objstore.Store
	if spec.BadRecordsPath != "" {
		if badStore, err = objstore.Open(ctx, spec.BadRecordsPath, opts.Store); err != nil {
			return nil, fmt.Errorf("open badRecordsPath: %w", err)
		}
	} else {
		badStore = objstore.Prefixed(cp, "bad_records/")
	}

	var state statestore.Provider
	var layout *agg.Layout
	if spec.Aggregate != nil {
		if layout, err = agg.Compile(&spec); err != nil {
			return nil, err
		}
		switch spec.StateStore {
		case "memory":
			state = statestore.NewMemory(cp, statestore.MemoryOptions{SnapshotInterval: spec.SnapshotInterval})
		default:
			return nil, fmt.Errorf("stateStore %q is not available in this build", spec.StateStore)
		}
		j.closer = append(j.closer, state.Close)
	}

	cfg := scheduler.Config{
		Spec:                    spec,
		Checkpoint:              cp,
		CheckpointOnObjectStore: objstore.IsObjectStore(spec.CheckpointLocation),
		Source:                  src,
		State:                   state,
		AllowFirstStart:         opts.AllowFirstStart,
		AllowReplay:             opts.AllowReplay,
		Logger:                  opts.Logger,
		Progress:                opts.Progress,
		Hook:                    opts.Hook,
	}
	out := spec.OutputSchema()
	var fileSink *parquet.Sink
	switch {
	case opts.Writer != nil:
		cfg.Writer = opts.Writer
	case spec.Sink.Parquet != nil:
		st, err := objstore.Open(ctx, spec.Sink.Parquet.Path, opts.Store)
		if err != nil {
			return nil, fmt.Errorf("open sink.parquet.path: %w", err)
		}
		fileSink = parquet.New(st, out, parquet.Options{PartitionBy: spec.Sink.Parquet.PartitionBy, Path: spec.Sink.Parquet.Path, Environment: spec.Environment, Logger: opts.Logger})
		if err := fileSink.Err(); err != nil {
			return nil, err
		}
		cfg.FileSink = fileSink
	case spec.Sink.JSONBatches != nil:
		st, err := objstore.Open(ctx, spec.Sink.JSONBatches.Path, opts.Store)
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
	if fileSink != nil {
		if err := fileSink.Prepare(ctx, q.QueryID(), spec.Environment); err != nil {
			return nil, err
		}
	}
	j.Query = q
	j.Env = &executor.Env{
		QueryID:    q.QueryID(),
		Spec:       &j.Spec,
		Layout:     layout,
		Source:     src,
		State:      state,
		BadRecords: badStore,
		Logger:     opts.Logger,
		Hook:       opts.Hook,
	}
	if fileSink != nil {
		j.Env.FileSink = fileSink
	}
	ok = true
	return j, nil
}

// openSource opens the spec's source.
func openSource(ctx context.Context, spec *query.Spec, opts Options) (source.Source, error) {
	switch {
	case spec.Source.File != nil:
		path := spec.Source.File.Path
		if !objstore.IsObjectStore(path) {
			u, err := objstore.ParseURI(path)
			if err != nil {
				return nil, fmt.Errorf("source.file.path: %w", err)
			}
			if fi, err := os.Stat(u.Path); err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("source.file.path %q: not a readable directory", path)
			}
		}
		st, err := objstore.Open(ctx, path, opts.Store)
		if err != nil {
			return nil, fmt.Errorf("open source.file.path: %w", err)
		}
		return file.New(st, *spec.Source.File, opts.Logger), nil
	case spec.Source.Generator != nil:
		return generator.New(*spec.Source.Generator), nil
	case spec.Source.Kafka != nil:
		return nil, errors.New("source.kafka: not available in this build yet")
	}
	return nil, fmt.Errorf("source: none configured")
}

// Run runs the job in this process until its trigger stops or ctx ends.
func (j *Job) Run(ctx context.Context) error {
	return j.Query.Run(ctx, &executor.Local{Env: j.Env, Parallelism: j.opts.Parallelism})
}

// RunWith runs the job's batches on runner.
func (j *Job) RunWith(ctx context.Context, runner executor.Runner) error {
	return j.Query.Run(ctx, runner)
}

// Close releases the job's connections.
func (j *Job) Close() error {
	var errs []string
	for i := len(j.closer) - 1; i >= 0; i-- {
		if err := j.closer[i](); err != nil {
			errs = append(errs, err.Error())
		}
	}
	j.closer = nil
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
