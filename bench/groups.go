package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/scheduler"
)

// Bytes per open group in memory (-only groups): the engine in this
// process runs the tile over the generator with many distinct courses
// and a short event-time span, so that most groups stay open; after Run
// (the in-memory state still held by the job, before Close) the live heap
// is read after a GC. The figure is the difference between two sizes
// divided by the difference of their open groups, so that what the job
// holds whatever its state (clients, buffers, the runtime) cancels out.

// GroupsRun is one size.
type GroupsRun struct {
	Courses    int
	Rows       int
	OpenGroups int64
	HeapBytes  uint64 // live heap after a GC, job open
}

// GroupsResult is the measurement.
type GroupsResult struct {
	Runs          []GroupsRun
	BytesPerGroup float64 // (heap large − heap small) / (groups large − groups small)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// runGroups measures each course count and returns the difference
// between the smallest and the largest.
func runGroups(ctx context.Context, courses []int, parallelism int, dir string, out io.Writer) (*GroupsResult, error) {
	if len(courses) < 2 {
		return nil, fmt.Errorf("bytes per group needs two course counts, got %d", len(courses))
	}
	res := &GroupsResult{}
	for i, n := range courses {
		rows := 3 * n
		gopts := generatorOptions(int64(rows), 0)
		gopts.Courses = n
		// All rows within a few minutes of event time: nothing closes.
		gopts.EventTimePerRow = query.Duration(max(time.Minute/time.Duration(rows), time.Microsecond))
		gopts.Jitter = 0
		runDir := filepath.Join(dir, fmt.Sprintf("groups-%d", i))
		spec := tileSpec(query.Source{Generator: &gopts}, runDir, query.Trigger{AvailableNow: true})
		var open int64
		progress := func(p *scheduler.Progress) {
			for _, op := range p.StateOperators {
				open = op.NumRowsTotal
			}
		}
		job, err := engine.Build(ctx, spec, engine.Options{Parallelism: parallelism, Progress: progress})
		if err != nil {
			return nil, fmt.Errorf("build engine: %w", err)
		}
		err = job.Run(ctx)
		heap := liveHeap()
		err = errors.Join(err, job.Close())
		os.RemoveAll(runDir)
		if err != nil {
			return nil, fmt.Errorf("run engine: %w", err)
		}
		r := GroupsRun{Courses: n, Rows: rows, OpenGroups: open, HeapBytes: heap}
		res.Runs = append(res.Runs, r)
		fmt.Fprintf(out, "groups: %d courses, %d rows: %d open groups, live heap %.1f MiB\n", n, rows, open, float64(heap)/(1<<20))
	}
	a, b := res.Runs[0], res.Runs[len(res.Runs)-1]
	if b.OpenGroups <= a.OpenGroups {
		return nil, fmt.Errorf("bytes per group: %d courses gave %d open groups, no more than %d courses' %d", b.Courses, b.OpenGroups, a.Courses, a.OpenGroups)
	}
	res.BytesPerGroup = (float64(b.HeapBytes) - float64(a.HeapBytes)) / float64(b.OpenGroups-a.OpenGroups)
	return res, nil
}
