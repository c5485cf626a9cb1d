package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// Bytes per open group in memory (-only groups): the engine in this
// process runs the tile over the generator with many distinct courses
// and a short event-time span, so that most groups stay open; after Run
// (the in-memory state still held by the job, before Close) the live heap
// is read after a GC. The figure is the difference between two sizes
// divided by the difference of their open groups, so that what the job
// holds whatever its state (clients, buffers, the runtime) cancels out:
// each size is taken against a baseline run of baseCourses courses.

// GroupsRun is one size.
type GroupsRun struct {
	Courses    int
	Rows       int
	OpenGroups int64
	HeapBytes  uint64 // live heap after a GC, job open
	// BytesPerGroup is (heap − baseline heap) / (groups − baseline groups).
	BytesPerGroup float64
}

// baseCourses is the baseline run's courses.
const baseCourses = 100

// GroupsResult is the measurement.
type GroupsResult struct {
	Base          GroupsRun
	Runs          []GroupsRun
	BytesPerGroup float64 // the largest size's
	// HeapProfile and HeapTop: the live heap of the largest size (written
	// when runGroups is given a profile path), the top of `go tool pprof
	// -top -sample_index=inuse_space`.
	HeapProfile, HeapTop string `json:",omitempty"`
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// groupsOptions are the generator's rows and options for n courses: three
// rows each, all within about a minute of event time, so nothing closes.
func groupsOptions(n int) (int, query.GeneratorSource) {
	rows := 3 * n
	gopts := generatorOptions(int64(rows), 0)
	gopts.Courses = n
	gopts.EventTimePerRow = query.Duration(max(time.Minute/time.Duration(rows), time.Microsecond))
	gopts.Jitter = 0
	return rows, gopts
}

// runGroups measures the baseline and each course count. With profile
// set, the largest size's live heap is written there as a heap profile.
func runGroups(ctx context.Context, courses []int, parallelism int, dir, profile string, out io.Writer) (*GroupsResult, error) {
	if len(courses) < 1 {
		return nil, fmt.Errorf("bytes per group needs a course count")
	}
	res := &GroupsResult{}
	sizes := append([]int{baseCourses}, courses...)
	largest := slices.Max(courses)
	for i, n := range sizes {
		rows, gopts := groupsOptions(n)
		runDir := filepath.Join(dir, fmt.Sprintf("groups-%d", i))
		spec := tileSpec(query.Source{Generator: &gopts}, runDir, query.Trigger{AvailableNow: true})
		var open int64
		onReport := func(p *progress.Report) {
			for _, op := range p.StateOperators {
				open = op.NumRowsTotal
			}
		}
		job, err := microbatch.Build(ctx, spec, microbatch.Options{Parallelism: parallelism, Observer: progress.Committed(onReport)})
		if err != nil {
			return nil, fmt.Errorf("build engine: %w", err)
		}
		err = job.Run(ctx, nil)
		heap := liveHeap()
		if profile != "" && n == largest && err == nil {
			if perr := writeHeapProfile(profile); perr == nil {
				res.HeapProfile = profile
				if top, terr := exec.Command("go", "tool", "pprof", "-top", "-nodecount=12", "-sample_index=inuse_space", profile).Output(); terr == nil {
					res.HeapTop = string(top)
				}
			}
		}
		err = errors.Join(err, job.Close())
		os.RemoveAll(runDir)
		if err != nil {
			return nil, fmt.Errorf("run engine: %w", err)
		}
		r := GroupsRun{Courses: n, Rows: rows, OpenGroups: open, HeapBytes: heap}
		if i == 0 {
			res.Base = r
			fmt.Fprintf(out, "groups: baseline %d courses, %d rows: %d open groups, live heap %.1f MiB\n", n, rows, open, float64(heap)/(1<<20))
			continue
		}
		if r.OpenGroups <= res.Base.OpenGroups {
			return res, fmt.Errorf("bytes per group: %d courses gave %d open groups, no more than the baseline's %d", n, r.OpenGroups, res.Base.OpenGroups)
		}
		r.BytesPerGroup = (float64(r.HeapBytes) - float64(res.Base.HeapBytes)) / float64(r.OpenGroups-res.Base.OpenGroups)
		res.Runs = append(res.Runs, r)
		if n == largest {
			res.BytesPerGroup = r.BytesPerGroup
		}
		fmt.Fprintf(out, "groups: %d courses, %d rows: %d open groups, live heap %.1f MiB, %.0f bytes per open group\n", n, rows, open, float64(heap)/(1<<20), r.BytesPerGroup)
	}
	return res, nil
}

func writeHeapProfile(file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
