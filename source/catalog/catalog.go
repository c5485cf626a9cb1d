// Package catalog is the one list of Sluice's source kinds, and what goes
// through it: validating a spec's source section, resolving a schema
// entry's from: against the kind's record metadata, explaining a source
// and opening it. Adding a source is its package (a source.Kind) plus one
// line in kinds below.
package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/file"
	"github.com/sluicehq/sluice/source/generator"
	"github.com/sluicehq/sluice/source/kafka"
)

// kinds is every source Sluice has, in the order messages list them.
var kinds = []source.Kind{
	kafka.Kind{},
	file.Kind{},
	generator.Kind{},
}

// Kinds returns every source kind.
func Kinds() []source.Kind { return append([]source.Kind(nil), kinds...) }

// Sources is the query validator's view of the catalog (query.Sources).
var Sources query.Sources = sources{}

// Validate is the one validation of a spec: the query's own rules and its
// source's, every problem at once in the order of the spec's fields, as a
// *query.ValidationError. Nothing else needs to be called.
func Validate(spec query.Spec) error { return spec.Validate(Sources) }

// Of returns the kind src sets, or nil when it sets none or several.
func Of(src *query.Source) source.Kind {
	var found source.Kind
	for _, k := range kinds {
		if k.Configured(src) {
			if found != nil {
				return nil
			}
			found = k
		}
	}
	return found
}

// Open opens spec's source (spec validated).
func Open(ctx context.Context, spec *query.Spec, env source.Env) (source.Source, error) {
	k := Of(&spec.Source)
	if k == nil {
		return nil, fmt.Errorf("source: set exactly one of %s", names())
	}
	return k.Open(ctx, spec, env)
}

// Explain returns src's part of driver explain.
func Explain(src *query.Source) source.Explanation {
	if k := Of(src); k != nil {
		return k.Explain(src)
	}
	return source.Explanation{Title: "no source"}
}

// Locations returns the places src's kind reads and writes.
func Locations(src *query.Source) []source.Location {
	if k := Of(src); k != nil {
		return k.Locations(src)
	}
	return nil
}

// MetaColumn returns the index and the column of name (a schema entry's
// from:) among the metadata of src's kind.
func MetaColumn(src *query.Source, name string) (int, source.MetaColumn, bool) {
	if k := Of(src); k != nil {
		for i, c := range k.MetaColumns() {
			if c.Name == name {
				return i, c, true
			}
		}
	}
	return 0, source.MetaColumn{}, false
}

func names() string {
	n := make([]string, len(kinds))
	for i, k := range kinds {
		n[i] = k.Name()
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// sources implements query.Sources.
type sources struct{}

func (sources) Check(s *query.Spec) []query.Problem {
	var set []string
	for _, k := range kinds {
		if k.Configured(&s.Source) {
			set = append(set, k.Name())
		}
	}
	var problems []query.Problem
	switch len(set) {
	case 0:
		return []query.Problem{{Field: "source", Rule: "required: set exactly one of " + names()}}
	case 1:
	default:
		problems = append(problems, query.Problem{Field: "source", Value: strings.Join(set, ", "), Rule: "sets more than one source: set exactly one of " + names()})
	}
	for _, k := range kinds {
		if k.Configured(&s.Source) {
			problems = append(problems, k.Validate(s)...)
		}
	}
	return problems
}

func (sources) FixedSchema(src *query.Source) (string, []query.Field) {
	if k := Of(src); k != nil {
		return k.Name(), k.FixedSchema()
	}
	return "", nil
}

func (sources) MetaColumn(src *query.Source, name string) (typ string, problem string) {
	var all []string
	for _, k := range kinds {
		for _, c := range k.MetaColumns() {
			all = append(all, c.Name)
			if c.Name != name {
				continue
			}
			if !k.Configured(src) {
				return "", fmt.Sprintf("needs source.%s: only %s records have these columns", k.Name(), k.Name())
			}
			return c.Type.String(), ""
		}
	}
	return "", "is not a record column: use " + strings.Join(all[:len(all)-1], ", ") + " or " + all[len(all)-1] + ", or omit it to read the JSON value"
}
