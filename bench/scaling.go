package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/query"
)

// Scaling (-only scaling): the generator in process against its fair
// reference as the work grows, one series per dimension (events, distinct
// courses, state partitions), the other dimensions at their base values.

// ScaleConfig is the scaling part of the command line.
type ScaleConfig struct {
	Rows       []int // events per run (the courses and partitions series use c.rows)
	Courses    []int
	Partitions []int
	Runs       int
}

// ScalePoint is one point of a series.
type ScalePoint struct {
	X    int
	Pair *Pair
}

// ScaleSeries is one dimension's curve.
type ScaleSeries struct {
	Name   string // "events", "courses", "state partitions"
	Points []ScalePoint
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runScaling measures each series point sc.Runs rounds, alternating the
// order of engine and reference.
func runScaling(ctx context.Context, c config, sc ScaleConfig, dir string, out io.Writer) ([]ScaleSeries, error) {
	point := func(name string, rows, courses, partitions int) (*Pair, error) {
		gopts := generatorOptions(int64(rows), c.maxRowsPerTrigger)
		gopts.Courses = courses
		p := &Pair{Name: name}
		for r := range max(sc.Runs, 1) {
			var ref *RawResult
			var er *EngineRun
			runDir := filepath.Join(dir, fmt.Sprintf("scale-%d", r))
			err := alternate(r, func() (err error) {
				ref, err = refGenerator(fairRef, gopts, rows, refParallelism())
				return err
			}, func() error {
				g := gopts
				spec := tileSpec(query.Source{Generator: &g}, runDir, query.Trigger{AvailableNow: true})
				spec.ShufflePartitions = partitions
				var err error
				if er, err = runEngine(ctx, spec, c.parallelism); err == nil {
					err = checkRun(er, rows)
				}
				return err
			})
			os.RemoveAll(runDir)
			if err == nil {
				err = sameWindows(er, ref)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			p.add(eps(rows, ref.Elapsed), eps(rows, er.Elapsed), nsPer(rows, ref.CPU), nsPer(rows, er.CPU))
			printPairRound(out, r, p, er)
		}
		return p, nil
	}
	var series []ScaleSeries
	add := func(name string, xs []int, at func(x int) (rows, courses, partitions int)) error {
		s := ScaleSeries{Name: name}
		for _, x := range xs {
			rows, courses, parts := at(x)
			p, err := point(fmt.Sprintf("scaling %s=%d (%d events, %d courses, %d partitions)", name, x, rows, courses, parts), rows, courses, parts)
			if err != nil {
				return err
			}
			s.Points = append(s.Points, ScalePoint{X: x, Pair: p})
		}
		series = append(series, s)
		return nil
	}
	// Courses and partitions 0: the generator's and the spec's defaults.
	if err := add("events", sc.Rows, func(x int) (int, int, int) { return x, 0, 0 }); err != nil {
		return nil, err
	}
	if err := add("courses", sc.Courses, func(x int) (int, int, int) { return c.rows, x, 0 }); err != nil {
		return nil, err
	}
	if err := add("state partitions", sc.Partitions, func(x int) (int, int, int) { return c.rows, 0, x }); err != nil {
		return nil, err
	}
	return series, nil
}

// scalingLines are the scaling rows of the results table.
func scalingLines(series []ScaleSeries) []line {
	var ls []line
	for _, s := range series {
		for _, pt := range s.Points {
			p := pt.Pair
			ls = append(ls, line{fmt.Sprintf("scaling, %s = %d: reference / engine M events/s (ratio)", s.Name, pt.X),
				rangeOf(millions(p.RefEPS), "%.2f") + " / " + rangeOf(millions(p.EngEPS), "%.2f") + " (" + rangeOf(p.Ratio, "%.2f") + ")", ""})
			ls = append(ls, line{fmt.Sprintf("scaling, %s = %d: CPU ns/event reference / engine", s.Name, pt.X),
				rangeOf(p.RefCPU, "%.0f") + " / " + rangeOf(p.EngCPU, "%.0f"), ""})
		}
	}
	return ls
}

// flatness returns the engine's median throughput at the series' last
// point over its first, or 0.
func flatness(series []ScaleSeries, name string) (float64, string) {
	for _, s := range series {
		if s.Name == name && len(s.Points) > 1 {
			a, b := s.Points[0], s.Points[len(s.Points)-1]
			return median(b.Pair.EngEPS) / median(a.Pair.EngEPS), fmt.Sprintf("%d → %d", a.X, b.X)
		}
	}
	return 0, ""
}

// profileCourses profiles one engine run at the fewest and one at the most
// distinct courses of the courses series (c.rows events each) and returns
// `go tool pprof -top -diff_base fewest most`: the CPU the larger key space
// costs beyond the smaller, function by function.
func profileCourses(ctx context.Context, c config, fewest, most int, dir, outDir string) (string, error) {
	files := map[int]string{}
	for _, n := range []int{fewest, most} {
		gopts := generatorOptions(int64(c.rows), c.maxRowsPerTrigger)
		gopts.Courses = n
		runDir := filepath.Join(dir, fmt.Sprintf("profile-courses-%d", n))
		files[n] = filepath.Join(outDir, fmt.Sprintf("scaling-courses-%d.pprof", n))
		_, err := profileTop(files[n], func() error {
			spec := tileSpec(query.Source{Generator: &gopts}, runDir, query.Trigger{AvailableNow: true})
			_, err := runEngine(ctx, spec, c.parallelism)
			return err
		})
		os.RemoveAll(runDir)
		if err != nil {
			return "", err
		}
	}
	diff, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", "-diff_base", files[fewest], files[most]).Output()
	if err != nil {
		return "", nil
	}
	// The leaves above are runtime and map internals; the engine's own
	// functions, by cumulative difference, say whose work they are.
	cum, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=15", "-show=sluicehq", "-diff_base", files[fewest], files[most]).Output()
	if err == nil {
		diff = append(append(diff, "\nThe engine's functions, cumulative:\n"...), dropHeader(string(cum))...)
	}
	return string(diff), nil
}

// dropHeader removes pprof -top's header (File:, Type:, ... lines).
func dropHeader(s string) string {
	if i := strings.Index(s, "      flat  flat%"); i >= 0 {
		return s[i:]
	}
	return s
}
