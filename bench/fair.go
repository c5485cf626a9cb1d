package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/sluicehq/sluice/query"
)

// Pair is one source measured against its fair reference, round by
// round: every ratio is taken within one round, and the rounds alternate
// which side runs first so that a drift of the machine's load does not
// favour one side.
type Pair struct {
	Name           string
	RefEPS, EngEPS []float64 // events/s
	Ratio          []float64 // engine / reference of the same round
	RefCPU, EngCPU []float64 // CPU ns per event
	CPUDiff        []float64 // engine − reference CPU ns per event: what exactly-once (and the engine around it) costs
	// RefRSS, EngRSS are peak RSS in MiB (whole-process pairs only).
	RefRSS, EngRSS []float64
	// Overhead is (engine − reference) / reference CPU per event.
	Overhead []float64
	// Cost compares one profiled run of each side (with -report), where
	// the pair has profiles.
	Cost *CostCompare `json:",omitempty"`
	// The bare loop (bare.go), run in the same rounds: events/s, CPU ns
	// per event and engine / bare loop of the same round; BareCost
	// compares profiles of the engine and the bare loop, where the pair
	// has them.
	BareEPS, BareCPU, BareRatio []float64    `json:",omitempty"`
	BareRSS                     []float64    `json:",omitempty"` // whole-process pairs
	BareCost                    *CostCompare `json:",omitempty"`
}

// cores is the engine's median cores busy (CPU / wall) over the rounds.
func (p *Pair) cores() float64 {
	var c []float64
	for i := range p.EngCPU {
		if i < len(p.EngEPS) {
			c = append(c, p.EngCPU[i]*p.EngEPS[i]/1e9)
		}
	}
	if len(c) == 0 {
		return 0
	}
	return median(c)
}

func (p *Pair) add(ref, eng, refCPU, engCPU float64) {
	p.RefEPS = append(p.RefEPS, ref)
	p.EngEPS = append(p.EngEPS, eng)
	p.Ratio = append(p.Ratio, eng/ref)
	p.RefCPU = append(p.RefCPU, refCPU)
	p.EngCPU = append(p.EngCPU, engCPU)
	p.CPUDiff = append(p.CPUDiff, engCPU-refCPU)
	p.Overhead = append(p.Overhead, (engCPU-refCPU)/refCPU)
}

// addBare records the bare loop's run of the round last added.
func (p *Pair) addBare(bare, bareCPU float64) {
	p.BareEPS = append(p.BareEPS, bare)
	p.BareCPU = append(p.BareCPU, bareCPU)
	p.BareRatio = append(p.BareRatio, p.EngEPS[len(p.EngEPS)-1]/bare)
}

// bareView is the pair's engine / bare loop figures as a pair of their
// own (for a target), or nil when the bare loop did not run.
func (p *Pair) bareView() *Pair {
	if p == nil || len(p.BareRatio) == 0 {
		return nil
	}
	return &Pair{Name: p.Name, Ratio: p.BareRatio, Cost: p.BareCost, EngEPS: p.EngEPS, EngCPU: p.EngCPU}
}

// alternate runs a then b in even rounds and b then a in odd ones.
func alternate(round int, a, b func() error) error {
	return inTurn(round, a, b)
}

// inTurn runs fns in order in even rounds and in reverse order in odd
// ones, stopping at the first error: of any two sides, each runs first
// in half the rounds.
func inTurn(round int, fns ...func() error) error {
	for i := range fns {
		f := fns[i]
		if round%2 == 1 {
			f = fns[len(fns)-1-i]
		}
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// runRounds runs c.runs rounds of the in-process measurements: the
// decode-only yardstick (raw), and the generator and the file source
// each against its fair reference.
func runRounds(ctx context.Context, c config, res *Results, lines *Lines, srcDir, dir string, do func(string) bool, out io.Writer) error {
	gopts := generatorOptions(int64(c.rows), c.maxRowsPerTrigger)
	filesPerTrigger := max(int(c.maxRowsPerTrigger)/c.rowsPerFile, 1)
	p := refParallelism()
	if do("gen") {
		res.GenPair = &Pair{Name: "generator, in process"}
	}
	if do("file") {
		res.FilePair = &Pair{Name: "file source, in process"}
	}
	// Warm-ups, not counted.
	if do("raw") {
		if _, err := rawLoop(lines); err != nil {
			return err
		}
	}
	if do("gen") {
		if _, err := refGenerator(fairRef, gopts, min(c.rows, 200_000), p); err != nil {
			return err
		}
	}
	for r := range c.runs {
		if do("raw") {
			rr, err := rawLoop(lines)
			if err != nil {
				return err
			}
			raw := eps(c.rows, rr.Elapsed)
			res.RawEPS = append(res.RawEPS, raw)
			res.RawCPU = append(res.RawCPU, nsPer(c.rows, rr.CPU))
			res.RawWindows = len(rr.Counts)
			pr, err := rawLoopParallel(lines, p)
			if err != nil {
				return err
			}
			par := eps(c.rows, pr.Elapsed)
			res.ParEPS = append(res.ParEPS, par)
			res.ParSpeedup = append(res.ParSpeedup, par/raw)
			fmt.Fprintf(out, "round %d decode only, lines in memory: 1 goroutine %.3f M events/s, %d goroutines %.3f M events/s, speedup %.2f\n",
				r+1, raw/1e6, p, par/1e6, par/raw)
		}
		if do("gen") {
			var ref, bare *RawResult
			var er *EngineRun
			runDir := filepath.Join(dir, fmt.Sprintf("gen-%d", r))
			err := inTurn(r, func() (err error) {
				labelled(ctx, "reference", "gen", func(context.Context) { ref, err = refGenerator(fairRef, gopts, c.rows, p) })
				return err
			}, func() (err error) {
				labelled(ctx, "bare", "gen", func(context.Context) { bare, err = refGenerator(bareRef, gopts, c.rows, p) })
				return err
			}, func() error {
				g := gopts
				var err error
				labelled(ctx, "engine", "gen", func(ctx context.Context) {
					er, err = runEngine(ctx, tileSpec(query.Source{Generator: &g}, runDir, query.Trigger{AvailableNow: true}), c.parallelism)
				})
				if err == nil {
					err = checkRun(er, c.rows)
				}
				if err != nil {
					return fmt.Errorf("engine with generator source: %w", err)
				}
				return nil
			})
			os.RemoveAll(runDir)
			if err != nil {
				return err
			}
			if err := sameWindows(er, ref); err != nil {
				return fmt.Errorf("engine with generator source: %w", err)
			}
			if err := sameWindows(er, bare); err != nil {
				return fmt.Errorf("engine with generator source against the bare loop: %w", err)
			}
			res.recordEngine(&res.GenEPS, &res.GenCPU, &res.GenCores, &res.Gen, er, c.rows)
			res.GenPair.add(eps(c.rows, ref.Elapsed), eps(c.rows, er.Elapsed), nsPer(c.rows, ref.CPU), nsPer(c.rows, er.CPU))
			res.GenPair.addBare(eps(c.rows, bare.Elapsed), nsPer(c.rows, bare.CPU))
			printPairRound(out, r, res.GenPair, er)
		}
		if do("file") {
			var ref, bare *RawResult
			var er *EngineRun
			runDir := filepath.Join(dir, fmt.Sprintf("file-%d", r))
			refRun := func(kind refKind, side string, dst **RawResult) func() error {
				return func() error {
					var n int64
					var err error
					labelled(ctx, side, "file", func(context.Context) { *dst, n, err = refFiles(kind, srcDir, p) })
					if err == nil && n != int64(c.rows) {
						err = fmt.Errorf("%s read %d lines, want %d", kind, n, c.rows)
					}
					return err
				}
			}
			err := inTurn(r, refRun(fairRef, "reference", &ref), refRun(bareRef, "bare", &bare), func() error {
				spec := tileSpec(query.Source{File: &query.FileSource{Path: srcDir, MaxFilesPerTrigger: filesPerTrigger}, Schema: query.GeneratorSchema()},
					runDir, query.Trigger{AvailableNow: true})
				var err error
				labelled(ctx, "engine", "file", func(ctx context.Context) { er, err = runEngine(ctx, spec, c.parallelism) })
				if err == nil {
					err = checkRun(er, c.rows)
				}
				if err != nil {
					return fmt.Errorf("engine with file source: %w", err)
				}
				return nil
			})
			os.RemoveAll(runDir)
			if err != nil {
				return err
			}
			if err := sameWindows(er, ref); err != nil {
				return fmt.Errorf("engine with file source: %w", err)
			}
			if err := sameWindows(er, bare); err != nil {
				return fmt.Errorf("engine with file source against the bare loop: %w", err)
			}
			res.recordEngine(&res.FileEPS, &res.FileCPU, &res.FileCores, &res.File, er, c.rows)
			res.FilePair.add(eps(c.rows, ref.Elapsed), eps(c.rows, er.Elapsed), nsPer(c.rows, ref.CPU), nsPer(c.rows, er.CPU))
			res.FilePair.addBare(eps(c.rows, bare.Elapsed), nsPer(c.rows, bare.CPU))
			printPairRound(out, r, res.FilePair, er)
		}
	}
	return nil
}

// labelled runs fn with the profiler labels side (reference, bare, engine) and
// source (gen, file), which every goroutine fn starts inherits, so a
// -cpuprofile tells the sides apart: go tool pprof -tagfocus side=engine.
func labelled(ctx context.Context, side, src string, fn func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("side", side, "source", src), fn)
}

// sameWindows refuses an engine run whose emitted + open windows are not
// the reference's windows (the full window-by-window check is in the
// tests; this one is cheap enough for every timed round).
func sameWindows(er *EngineRun, ref *RawResult) error {
	if got := int(er.OutputRows + er.StateRows); got != len(ref.Counts) {
		return fmt.Errorf("emitted %d + open %d windows, the reference counted %d", er.OutputRows, er.StateRows, len(ref.Counts))
	}
	return nil
}

func (res *Results) recordEngine(epsv, cpu, cores *[]float64, runs *[]*EngineRun, er *EngineRun, rows int) {
	*epsv = append(*epsv, eps(rows, er.Elapsed))
	*cpu = append(*cpu, nsPer(rows, er.CPU))
	*cores = append(*cores, er.CPU.Seconds()/er.Elapsed.Seconds())
	*runs = append(*runs, er)
	res.EngineGroups = int(er.OutputRows + er.StateRows)
}

func printPairRound(out io.Writer, r int, p *Pair, er *EngineRun) {
	i := len(p.Ratio) - 1
	first := "reference first"
	if r%2 == 1 {
		first = "engine first"
	}
	line := fmt.Sprintf("round %d %-24s reference %6.3f M events/s %5.0f CPU ns/event | engine %6.3f M events/s %5.0f CPU ns/event",
		r+1, p.Name, p.RefEPS[i]/1e6, p.RefCPU[i], p.EngEPS[i]/1e6, p.EngCPU[i])
	if er != nil {
		line += fmt.Sprintf(" %.2f cores %d batches", er.CPU.Seconds()/er.Elapsed.Seconds(), len(er.Batches))
	}
	fmt.Fprintf(out, "%s | ratio %.2f, CPU +%.0f ns/event (%s)\n", line, p.Ratio[i], p.CPUDiff[i], first)
	if i < len(p.BareRatio) {
		fmt.Fprintf(out, "round %d %-24s bare loop %6.3f M events/s %5.0f CPU ns/event | engine / bare loop %.2f\n",
			r+1, p.Name, p.BareEPS[i]/1e6, p.BareCPU[i], p.BareRatio[i])
	}
}

// pairs are the in-process and whole-process pairs measured, in report
// order (Kafka's is added from its own results).
func (res *Results) pairs() []*Pair {
	var out []*Pair
	for _, p := range []*Pair{res.GenPair, res.FilePair, res.ProcessPair, res.ProcessGenPair} {
		if p != nil && len(p.Ratio) > 0 {
			out = append(out, p)
		}
	}
	if k := res.Kafka; k != nil && len(k.Ratio) > 0 {
		out = append(out, k.pair())
	}
	if k := res.Kafka; k != nil && k.Process != nil && len(k.Process.Ratio) > 0 {
		out = append(out, k.Process)
	}
	return out
}

// pairLines are one pair's rows of the results table.
func pairLines(p *Pair) []line {
	ls := []line{
		{p.Name + ": fair reference, M events/s", rangeOf(millions(p.RefEPS), "%.2f"), ""},
		{p.Name + ": engine, M events/s", rangeOf(millions(p.EngEPS), "%.2f"), ""},
		{p.Name + ": engine / reference (within each round)", rangeOf(p.Ratio, "%.2f"), ""},
		{p.Name + ": CPU ns/event, reference / engine", rangeOf(p.RefCPU, "%.0f") + " / " + rangeOf(p.EngCPU, "%.0f"), ""},
		{p.Name + ": engine − reference CPU ns/event (exactly-once and the engine)", rangeOf(p.CPUDiff, "%.0f") + " (" + rangeOf(percent(p.Overhead), "%.0f") + " %)", ""},
	}
	if len(p.RefRSS) > 0 {
		ls = append(ls, line{p.Name + ": peak RSS MiB, reference / engine", rangeOf(p.RefRSS, "%.0f") + " / " + rangeOf(p.EngRSS, "%.0f"), ""})
	}
	if len(p.BareRatio) > 0 {
		ls = append(ls,
			line{p.Name + ": bare loop (fastjson + time.Parse), M events/s", rangeOf(millions(p.BareEPS), "%.2f"), ""},
			line{p.Name + ": engine / bare loop (within each round)", rangeOf(p.BareRatio, "%.2f"), ""},
			line{p.Name + ": CPU ns/event, bare loop / engine", rangeOf(p.BareCPU, "%.0f") + " / " + rangeOf(p.EngCPU, "%.0f"), ""},
		)
		if len(p.BareRSS) > 0 {
			ls = append(ls, line{p.Name + ": peak RSS MiB, bare loop", rangeOf(p.BareRSS, "%.0f"), ""})
		}
	}
	return ls
}

func percent(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = 100 * x
	}
	return out
}
