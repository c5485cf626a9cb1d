package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// How a measurement adds itself to the report (see "Adding a mode" in
// bench/README.md):
//
//  1. write func(ctx context.Context, e *ModeEnv) (*Section, error) in its
//     own file; it prints progress to e.Out, works under e.Dir, reads its
//     flags (declared in main with the others) from e.Config, and picks
//     smaller sizes when e.Quick and the user did not set them (e.Set);
//  2. add one entry to the modes list below.
//
// `-only NAME` runs it, `-report` runs it (unless the entry says
// notInReport), and the report renders the returned Section: a heading,
// its text, a table, its rows in the results table, its targets in the
// targets table and its plots. A mode that returns an error is recorded
// under "Failures" with whatever Section it returned, and the rest of the
// suite runs on.

// Section is one measurement's part of the report.
type Section struct {
	Mode  string // the -only name
	Title string // heading
	Text  string // Markdown under the heading: what ran, sizes, caveats
	Table *Table `json:",omitempty"`
	// Rows go into the results table (and the console table).
	Rows    []Row    `json:",omitempty"`
	Targets []Target `json:",omitempty"`
	Plots   []Plot   `json:",omitempty"`
	// Data is the mode's own result, kept whole in report.json.
	Data any `json:",omitempty"`
}

// Row is one line of the results table.
type Row struct{ Name, Value, Target string }

// Table is a Markdown table.
type Table struct {
	Header []string
	Rows   [][]string
}

// Plot is a line plot with points, one line per series; Marks are
// vertical dashed lines (events such as kills) at those X values.
type Plot struct {
	File                  string // PNG name in the report directory
	Title, XLabel, YLabel string
	LogX                  bool
	Series                []Series
	Marks                 []float64 `json:",omitempty"`
	MarksLabel            string    `json:",omitempty"`
}

// Series is one line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

// Failure is a mode that returned an error.
type Failure struct{ Mode, Err string }

// ModeEnv is what a mode is given.
type ModeEnv struct {
	Config *config
	Dir    string // the run's work directory (the mode makes its own subdirectory)
	Out    io.Writer
	Quick  bool
	// Set reports whether the user set the named flag (so -quick does not
	// override it).
	Set func(flag string) bool
	// Driver and Executor build the binaries once per invocation.
	Driver, Executor func(context.Context) (string, error)
}

// Mode is a measurement the modes list runs.
type Mode struct {
	Name        string
	Run         func(context.Context, *ModeEnv) (*Section, error)
	notInReport bool // run only when named with -only
}

// modes are the measurements that report through a Section, in the order
// they run (after the older measurements in run).
var modes = []Mode{
	{Name: "executor-recovery", Run: runExecutorRecoveryMode},
	{Name: "s3-requests", Run: runS3RequestsMode},
	{Name: "backlog", Run: runBacklogMode},
	{Name: "state", Run: runStateMode},
	{Name: "bigfile-s3", Run: runBigFileS3Mode},
	{Name: "sql", Run: runSQLMode},
}

func modeNames() []string {
	var ns []string
	for _, m := range modes {
		ns = append(ns, m.Name)
	}
	return ns
}

// setFlags returns which flags the command line set.
func setFlags() map[string]bool {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// sectionMarkdown writes a section.
func sectionMarkdown(w io.Writer, s *Section, plots map[string]bool) {
	fmt.Fprintf(w, "\n## %s\n\n", s.Title)
	if s.Text != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(s.Text))
	}
	if t := s.Table; t != nil && len(t.Header) > 0 {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(t.Header, " | "), strings.Repeat("---|", len(t.Header)))
		for _, r := range t.Rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		fmt.Fprintln(w)
	}
	for _, p := range s.Plots {
		if plots[p.File] {
			fmt.Fprintf(w, "![%s](%s)\n\n", p.Title, p.File)
		}
	}
}

// drawPlot writes p as a PNG into dir.
func drawPlot(dir string, p Plot) error {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	if p.LogX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	var args []any
	ymax := 0.0
	for _, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plot %s: series %s has %d x and %d y", p.File, s.Name, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, len(s.X))
		for i := range s.X {
			pts[i] = plotter.XY{X: s.X[i], Y: s.Y[i]}
			ymax = max(ymax, s.Y[i])
		}
		args = append(args, s.Name, pts)
	}
	if err := plotutil.AddLinePoints(pl, args...); err != nil {
		return fmt.Errorf("plot %s: %w", p.File, err)
	}
	for i, x := range p.Marks {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: max(ymax, 1)}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		l.Color = plotutil.Color(len(p.Series))
		pl.Add(l)
		if i == 0 && p.MarksLabel != "" {
			pl.Legend.Add(p.MarksLabel, l)
		}
	}
	pl.Y.Min = 0
	pl.Legend.Top = true
	pl.Legend.Left = true
	if err := pl.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(dir, p.File)); err != nil {
		return fmt.Errorf("plot %s: %w", p.File, err)
	}
	return nil
}
