package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/generator"
)

// The sql mode: the tile written in SQL against the tile in YAML over the
// same files in the same invocation (they compile to one plan, so their
// throughputs should be equal within noise), and the SQL tile with a
// WHERE that keeps about a tenth of the rows against the tile without it
// (the filter runs in the map task before the aggregate: dropping rows
// should make the query faster, not slower).

// sqlTile is the tile in SQL over the generator's columns.
const sqlTile = `SELECT window.start AS window_start, window.end AS window_end, course_id, count(*) AS event_count
FROM events
GROUP BY window(event_time, '5 minutes'), course_id`

// sqlWhere keeps the courses c-073 and up: the generator draws course
// floor(u³·100), so P(course >= 73) = 1 - 0.73^(1/3), about 10 %. The
// conjunct does not read the event time: it runs below the watermark.
const sqlWhere = "course_id >= 'c-073'"

// sqlFiltered is sqlTile with sqlWhere.
var sqlFiltered = strings.Replace(sqlTile, "FROM events\n", "FROM events\nWHERE "+sqlWhere+"\n", 1)

// SQLRun is one round of the sql mode: events per second of each
// variant, of wall time and of the process's CPU time (steadier on a
// shared machine).
type SQLRun struct {
	YAML, SQL, Where          float64
	YAMLCPU, SQLCPU, WhereCPU float64
}

// SQLResult is the sql mode's data.
type SQLResult struct {
	Rows       int
	Kept       float64 // the share of rows the WHERE keeps
	Rounds     []SQLRun
	OutputRows map[string]int64
}

func runSQLMode(ctx context.Context, e *ModeEnv) (*Section, error) {
	c := e.Config
	n, runs := c.sqlRows, c.sqlRuns
	sec := &Section{Title: "The tile in SQL against the tile in YAML, and a WHERE that drops 90 % of the rows"}
	dir := filepath.Join(e.Dir, "sql")
	opts := generatorOptions(int64(n), c.maxRowsPerTrigger)
	lines := generateLines(opts, n)
	in := filepath.Join(dir, "in")
	if _, err := writeFiles(in, lines, c.rowsPerFile); err != nil {
		return sec, err
	}
	g := generator.New(opts)
	kept := 0
	for i := range n {
		_, course, _, _ := g.Event(int64(i))
		if course >= "c-073" {
			kept++
		}
	}
	res := &SQLResult{Rows: n, Kept: float64(kept) / float64(n), OutputRows: map[string]int64{}}
	sec.Data = res
	spec := func(name, sql string, round int) query.Spec {
		s := tileSpec(query.Source{File: &query.FileSource{Path: in, MaxFilesPerTrigger: max(1, int(c.maxRowsPerTrigger)/c.rowsPerFile)}, Schema: query.GeneratorSchema()}, filepath.Join(dir, fmt.Sprintf("%s-%d", name, round)), query.Trigger{AvailableNow: true})
		if sql != "" {
			s.Aggregate, s.SQL = nil, sql
		}
		return s
	}
	fmt.Fprintf(e.Out, "sql: %d events in files of %d, %d rounds; the WHERE keeps %.1f %%\n", n, c.rowsPerFile, runs, 100*res.Kept)
	variants := []struct {
		name, sql string
		eps, cpu  func(*SQLRun) *float64
	}{
		{"yaml", "", func(r *SQLRun) *float64 { return &r.YAML }, func(r *SQLRun) *float64 { return &r.YAMLCPU }},
		{"sql", sqlTile, func(r *SQLRun) *float64 { return &r.SQL }, func(r *SQLRun) *float64 { return &r.SQLCPU }},
		{"where", sqlFiltered, func(r *SQLRun) *float64 { return &r.Where }, func(r *SQLRun) *float64 { return &r.WhereCPU }},
	}
	for round := range runs {
		var r SQLRun
		// Each round runs the three in another order, so that a slower
		// first (or last) run of a round is shared.
		for k := range variants {
			v := variants[(k+round)%len(variants)]
			runtime.GC() // the last run's garbage is not this one's work
			er, err := runEngine(ctx, spec(v.name, v.sql, round), c.parallelism)
			if err != nil {
				return sec, fmt.Errorf("%s round %d: %w", v.name, round, err)
			}
			if er.InputRows != int64(n) {
				return sec, fmt.Errorf("%s round %d read %d rows, want %d", v.name, round, er.InputRows, n)
			}
			*v.eps(&r) = float64(er.InputRows) / er.Elapsed.Seconds()
			*v.cpu(&r) = float64(er.InputRows) / er.CPU.Seconds()
			res.OutputRows[v.name] = er.OutputRows
			fmt.Fprintf(e.Out, "  round %d %-5s %.2f M events/s, %.2f M events per CPU second, %d rows out\n", round+1, v.name, *v.eps(&r)/1e6, *v.cpu(&r)/1e6, er.OutputRows)
		}
		res.Rounds = append(res.Rounds, r)
	}
	if res.OutputRows["yaml"] != res.OutputRows["sql"] {
		return sec, fmt.Errorf("the tile in SQL wrote %d rows, in YAML %d", res.OutputRows["sql"], res.OutputRows["yaml"])
	}
	var yaml, sql, where, yamlCPU, sqlCPU, whereCPU, sqlRatio, whereRatio, sqlCPURatio, whereCPURatio []float64
	for _, r := range res.Rounds {
		yaml, sql, where = append(yaml, r.YAML/1e6), append(sql, r.SQL/1e6), append(where, r.Where/1e6)
		yamlCPU, sqlCPU, whereCPU = append(yamlCPU, r.YAMLCPU/1e6), append(sqlCPU, r.SQLCPU/1e6), append(whereCPU, r.WhereCPU/1e6)
		sqlRatio, whereRatio = append(sqlRatio, r.SQL/r.YAML), append(whereRatio, r.Where/r.SQL)
		sqlCPURatio, whereCPURatio = append(sqlCPURatio, r.SQLCPU/r.YAMLCPU), append(whereCPURatio, r.WhereCPU/r.SQLCPU)
	}
	batchRows := max(1, int(c.maxRowsPerTrigger)/c.rowsPerFile) * c.rowsPerFile
	sec.Text = fmt.Sprintf("The course-activity tile over %d generator events in JSON-lines files of %d (%d per batch), in process (`runEngine`: Build, Run, Close), "+
		"%d rounds, each running the three variants in a rotated order after a GC. *yaml* is the tile's `aggregate:`, *sql* the same query in `sql:` (docs/sql.md: one plan, "+
		"so the same work), *where* the SQL tile with `WHERE %s`, which keeps %.1f %% of the rows and runs in the map task below the watermark, before the partial aggregate. "+
		"Events per second of wall time and per second of the process's CPU time (steadier on a shared machine); ratios are per round, then the median. "+
		"The filter saves the aggregate and the output of the rows it drops, not their decoding (most of a map task's work).",
		n, c.rowsPerFile, batchRows, runs, sqlWhere, 100*res.Kept)
	sec.Table = &Table{Header: []string{"variant", "M events/s, median [min–max]", "M events per CPU s", "rows out"}}
	for _, v := range []struct {
		name    string
		xs, cpu []float64
	}{{"yaml", yaml, yamlCPU}, {"sql", sql, sqlCPU}, {"where", where, whereCPU}} {
		sec.Table.Rows = append(sec.Table.Rows, []string{v.name, rangeOf(v.xs, "%.2f"), rangeOf(v.cpu, "%.2f"), fmt.Sprint(res.OutputRows[v.name])})
	}
	sec.Rows = []Row{
		{Name: "sql: tile in SQL / tile in YAML, same files, events/s", Value: rangeOf(sqlRatio, "%.3f") + fmt.Sprintf(" (%.2f vs %.2f M events/s)", median(sql), median(yaml)), Target: "1 within noise"},
		{Name: "sql: tile in SQL / tile in YAML, events per CPU second", Value: rangeOf(sqlCPURatio, "%.3f") + fmt.Sprintf(" (%.2f vs %.2f M)", median(sqlCPU), median(yamlCPU)), Target: "1 within noise"},
		{Name: fmt.Sprintf("sql: WHERE keeping %.0f %% / no WHERE, events/s", 100*res.Kept), Value: rangeOf(whereRatio, "%.3f") + fmt.Sprintf(" (%.2f vs %.2f M events/s)", median(where), median(sql)), Target: "> 1"},
		{Name: fmt.Sprintf("sql: WHERE keeping %.0f %% / no WHERE, events per CPU second", 100*res.Kept), Value: rangeOf(whereCPURatio, "%.3f") + fmt.Sprintf(" (%.2f vs %.2f M)", median(whereCPU), median(sqlCPU)), Target: "> 1"},
	}
	status := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}
	sr, wr := median(sqlRatio), median(whereRatio)
	sec.Targets = []Target{
		{Name: sqlTargetName, Want: "0.95–1.05", Measured: rangeOf(sqlRatio, "%.3f"), Status: status(sr >= 0.95 && sr <= 1.05), Gap: fmt.Sprintf("%+.1f %%", 100*(sr-1))},
		{Name: whereTargetName, Want: "> 1", Measured: rangeOf(whereRatio, "%.3f"), Status: status(wr > 1)},
	}
	return sec, nil
}

// The targets the sql mode measures.
const (
	sqlTargetName   = "tile in SQL / tile in YAML, events/s"
	whereTargetName = "WHERE dropping 90 % / no WHERE, events/s"
)
