package query

import (
	"errors"
	"strings"
	"testing"
)

// coreSources is the query validator's view of the sources for this
// package's own tests, which cannot import source/catalog (it imports this
// package): it checks that one source is set and knows the generator's
// schema. The real one (catalog.Sources) runs testdata/validate.txt in
// validate_catalog_test.go.
type coreSources struct{}

func (coreSources) Check(s *Spec) []Problem {
	if s.Source.Kafka == nil && s.Source.File == nil && s.Source.Generator == nil {
		return []Problem{{Field: "source", Rule: "required"}}
	}
	return nil
}

func (coreSources) FixedSchema(src *Source) (string, []Field) {
	if src.Generator != nil {
		return "generator", GeneratorSchema()
	}
	return "", nil
}

func (coreSources) MetaColumn(*Source, string) (string, string) { return "", "unknown" }

func TestValidateDoesNotChangeTheSpec(t *testing.T) {
	s := Spec{
		Name:               "gen",
		Source:             Source{Generator: &GeneratorSource{RowsPerSecond: 10}},
		OutputMode:         Append,
		Sink:               Sink{Console: &ConsoleSink{}},
		CheckpointLocation: "/tmp/ck",
	}
	if err := s.Validate(coreSources{}); err != nil {
		t.Fatalf("generator spec without schema: %v", err)
	}
	if s.Source.Schema != nil || s.ShufflePartitions != 0 || s.Source.Format != "" {
		t.Fatalf("Validate changed the spec: %+v", s)
	}
}

func TestValidationErrorListsEveryProblemOnItsOwnLine(t *testing.T) {
	var s Spec
	err := s.Validate(coreSources{})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want *ValidationError", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(ve.Problems) {
		t.Fatalf("%d lines for %d problems:\n%s", len(lines), len(ve.Problems), err)
	}
	want := map[string]bool{"name": true, "source": true, "source.schema": true, "outputMode": true, "sink": true, "checkpointLocation": true}
	for _, p := range ve.Problems {
		delete(want, p.Field)
	}
	if len(want) > 0 {
		t.Fatalf("no problem reported for %v in:\n%s", want, err)
	}
}

func TestProblemStringQuotesOnlyNonNumbers(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Field: "name", Rule: "required"}, "name: required"},
		{Problem{Field: "outputMode", Value: "update", Rule: "is bad"}, `outputMode: "update" is bad`},
		{Problem{Field: "shufflePartitions", Value: "-1", Rule: "is bad"}, "shufflePartitions: -1 is bad"},
		{Problem{Field: "generator.lateFraction", Value: "1.5", Rule: "is bad"}, "generator.lateFraction: 1.5 is bad"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%#v: got %q, want %q", tc.p, got, tc.want)
		}
	}
}
