package generator

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
)

// Kind is the event generator as the catalog lists it (source.generator).
type Kind struct{}

var _ source.Kind = Kind{}

func (Kind) Name() string                           { return "generator" }
func (Kind) Configured(src *query.Source) bool      { return src.Generator != nil }
func (Kind) MetaColumns() []source.MetaColumn       { return nil }
func (Kind) FixedSchema() []query.Field             { return query.GeneratorSchema() }
func (Kind) Validate(s *query.Spec) []query.Problem { return check(*s.Source.Generator) }

// Open builds the generator.
func (Kind) Open(_ context.Context, s *query.Spec, _ source.Env) (source.Source, error) {
	return New(*s.Source.Generator), nil
}

// Locations: the generator reads and writes nothing.
func (Kind) Locations(*query.Source) []source.Location { return nil }

// Explain says how the generator plans and caps batches.
func (Kind) Explain(src *query.Source) source.Explanation {
	g := src.Generator
	title := fmt.Sprintf("GeneratorSource rowsPerSecond %d, seed %d", g.RowsPerSecond, g.Seed)
	detail := []string{"plan: the offset is a row number; the rows due by wall time since the start (deterministic from the seed)"}
	if g.Rows > 0 {
		detail = append(detail, fmt.Sprintf("stops after %d rows", g.Rows))
	}
	if g.LateFraction > 0 {
		detail = append(detail, fmt.Sprintf("lateFraction %g of the rows get an event time older than the watermark would accept", g.LateFraction))
	}
	if g.MaxRowsPerTrigger > 0 {
		detail = append(detail, fmt.Sprintf("cap: maxRowsPerTrigger %d rows per batch", g.MaxRowsPerTrigger))
	} else {
		detail = append(detail, "cap: none (maxRowsPerTrigger unset)")
	}
	cap := ""
	if g.MaxRowsPerTrigger > 0 {
		cap = fmt.Sprintf("%d rows (maxRowsPerTrigger)", g.MaxRowsPerTrigger)
	}
	return source.Explanation{Title: title, Detail: detail, Cap: cap}
}

// Description is progress's sources[].description.
func (s *Source) Description() string {
	return "Generator[seed=" + strconv.FormatInt(s.opts.Seed, 10) + "]"
}
