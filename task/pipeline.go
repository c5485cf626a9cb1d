package task

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/dedup"
	"github.com/sluicehq/sluice/expr"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// pipeline is a query's plan (query.Plan, the same for sql: and
// aggregate:) compiled for its tasks, once per Env:
//
//	map:    decode -> pre (below the watermark) -> event time ->
//	        dedup's map side, or join -> filter -> computed -> the
//	        aggregate's partials, or the projection (rows pass through)
//	reduce: the aggregate's merge -> having -> projection, or dedup's
//	        reduce -> join -> filter -> projection, or the rows as they
//	        came
//
// Every expression is compiled once here; a row whose evaluation fails
// (*expr.EvalError) is set aside as malformed with the reason.
type pipeline struct {
	plan   *query.Plan
	pre    *expr.Filter
	filter *expr.Filter
	// computed appends the map row's computed columns to the Input row.
	computed *expr.Projection
	// project makes the output row: of the Input row without an aggregate
	// (in the map task, or after dedup in the reduce task), of the
	// aggregate's output row with one (in the reduce task).
	project *expr.Projection
	having  *expr.Filter
	dedup   *dedup.Layout
	// simple: the map row is the Input row as it is (no filter, no
	// computed column, no projection): the row goes to the partial
	// aggregate or the output as it is.
	simple bool
	// out are the output columns (bad records of the reduce side name
	// them); in the columns of the rows the reduce side evaluates.
	out, reduceIn []query.Column
}

type pipeOnce struct {
	once sync.Once
	p    *pipeline
	err  error
}

// pipeline compiles the Env's plan on first use (an Env built by hand,
// as tests do, has only Spec and Layout).
func (e *Env) pipeline() (*pipeline, error) {
	if e.pipe == nil {
		// An Env literal: compiled per call (tests only; Open sets pipe).
		return compilePipeline(e)
	}
	e.pipe.once.Do(func() { e.pipe.p, e.pipe.err = compilePipeline(e) })
	return e.pipe.p, e.pipe.err
}

func compilePipeline(e *Env) (*pipeline, error) {
	p := e.Plan
	if p == nil {
		var err error
		if p, err = e.Spec.Plan(); err != nil {
			return nil, fmt.Errorf("plan query %s: %w", e.Spec.Name, err)
		}
	}
	env := expr.Env{Zone: e.Spec.SessionZone()}
	pl := &pipeline{plan: p, out: p.OutputColumns(), dedup: e.Dedup}
	var err error
	if len(p.PreFilter) > 0 {
		if pl.pre, err = expr.CompileFilter(p.PreFilter, env); err != nil {
			return nil, err
		}
	}
	if len(p.Filter) > 0 {
		if pl.filter, err = expr.CompileFilter(p.Filter, env); err != nil {
			return nil, err
		}
	}
	if len(p.Computed) > 0 {
		es := make([]*expr.Expr, len(p.Computed))
		for i, c := range p.Computed {
			es[i] = c.Expr
		}
		if pl.computed, err = expr.CompileProjection(es, env); err != nil {
			return nil, err
		}
	}
	if p.Project != nil {
		es := make([]*expr.Expr, len(p.Project))
		for i, c := range p.Project {
			es[i] = c.Expr
		}
		if pl.project, err = expr.CompileProjection(es, env); err != nil {
			return nil, err
		}
	}
	if len(p.Having) > 0 {
		if pl.having, err = expr.CompileFilter(p.Having, env); err != nil {
			return nil, err
		}
	}
	if p.Dedup != nil && pl.dedup == nil {
		if e.Spec.Watermark == nil {
			return nil, fmt.Errorf("plan query %s: dedup without a watermark", e.Spec.Name)
		}
		if pl.dedup, err = dedup.CompilePlan(p, e.Spec.Watermark.Delay.Micros()); err != nil {
			return nil, err
		}
	}
	if p.Aggregate != nil && e.Layout == nil {
		return nil, fmt.Errorf("plan query %s: the query aggregates but the task environment has no aggregate layout", e.Spec.Name)
	}
	pl.simple = pl.filter == nil && pl.computed == nil && (p.Aggregate != nil || pl.project == nil)
	if p.Aggregate != nil {
		pl.reduceIn = query.Columns(p.Aggregate.Output)
	} else {
		pl.reduceIn = query.Columns(p.Input())
	}
	return pl, nil
}

// mapRows turns one Input row into what the map task folds or passes on:
// the filter, then the computed columns appended (with an aggregate) or
// the projection (without one). It appends to dst and reports whether the
// row passed the filter; an error is an evaluation failure of the row.
// With an aggregate the appended row reuses scratch (the table copies
// what it keeps); without one it is new.
func (pl *pipeline) mapRow(in row.Row, scratch row.Row) (row.Row, bool, error) {
	if pl.filter != nil {
		keep, err := pl.filter.Keep(in)
		if err != nil || !keep {
			return nil, false, err
		}
	}
	if pl.plan.Aggregate != nil {
		if pl.computed == nil {
			return in, true, nil
		}
		vals, err := pl.computed.Apply(scratch[len(in):len(in)], in)
		if err != nil {
			return nil, false, err
		}
		// vals is scratch's tail: put the Input row in front of it.
		out := scratch[:len(in)+len(vals)]
		copy(out, in)
		copy(out[len(in):], vals)
		return out, true, nil
	}
	if pl.project == nil {
		return append(row.Row(nil), in...), true, nil
	}
	out, err := pl.project.Apply(make(row.Row, 0, len(pl.out)), in)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// afterAggregate applies Having and the projection to the aggregate's
// output rows; rows whose evaluation fails are returned as bad records.
func (pl *pipeline) afterAggregate(rows []row.Row) ([]row.Row, []BadRecord) {
	if pl.having == nil && pl.project == nil {
		return rows, nil
	}
	out := rows[:0]
	var bad []BadRecord
	for _, r := range rows {
		if pl.having != nil {
			keep, err := pl.having.Keep(r)
			if err != nil {
				bad = append(bad, pl.badRow(r, err))
				continue
			}
			if !keep {
				continue
			}
		}
		if pl.project != nil {
			p, err := pl.project.Apply(make(row.Row, 0, len(pl.out)), r)
			if err != nil {
				bad = append(bad, pl.badRow(r, err))
				continue
			}
			r = p
		}
		out = append(out, r)
	}
	return out, bad
}

// badRow is a reduce-side bad record: the row the failing expression
// read, as a JSON object of its columns.
func (pl *pipeline) badRow(r row.Row, err error) BadRecord {
	m := make(map[string]any, len(r))
	for i, v := range r {
		name := fmt.Sprint(i)
		if i < len(pl.reduceIn) {
			name = pl.reduceIn[i].Name
		}
		if v.Kind == row.Null {
			m[name] = nil
		} else {
			m[name] = v.String()
		}
	}
	b, _ := json.Marshal(m)
	return BadRecord{Source: "reduce", Offset: -1, Reason: err.Error(), Record: string(b)}
}

// stateful reports whether the reduce side keeps state.
func (pl *pipeline) stateful(l *agg.Layout) bool { return l != nil || pl.dedup != nil }
