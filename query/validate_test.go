package query

import (
	"encoding/json"
	"errors"
	"github.com/sluicehq/sluice/internal/validatecases"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"sigs.k8s.io/yaml"
)

// TestValidate runs testdata/validate.txt. Commands:
//
//	spec name=NAME          store the YAML input as a base spec
//	validate [base=NAME]    parse and validate the YAML input; with base, the
//	                        input is a JSON merge patch (RFC 7386: null
//	                        deletes a key) applied to the stored spec
//
// The output is "ok", the validation problems one per line, or
// "parse error: ..." when the spec does not parse.
func TestValidate(t *testing.T) {
	bases := map[string]any{}
	datadriven.RunTest(t, "testdata/validate.txt", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "spec":
			var name string
			td.ScanArgs(t, "name", &name)
			bases[name] = yamlToGeneric(t, td.Input)
			return ""
		case "validate":
			data := []byte(td.Input)
			if td.HasArg("base") {
				var name string
				td.ScanArgs(t, "base", &name)
				base, ok := bases[name]
				if !ok {
					t.Fatalf("%s: no spec named %q", td.Pos, name)
				}
				patch := yamlToGeneric(t, td.Input)
				if patch == nil {
					patch = map[string]any{}
				}
				merged := validatecases.MergePatch(base, patch)
				var err error
				if data, err = json.Marshal(merged); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Parse(data)
			if err != nil {
				return "parse error: " + err.Error()
			}
			err = s.Validate()
			if err == nil {
				return "ok"
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("%s: Validate returned %T, want *ValidationError: %v", td.Pos, err, err)
			}
			if len(ve.Problems) == 0 {
				t.Fatalf("%s: ValidationError without problems", td.Pos)
			}
			return err.Error()
		default:
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			return ""
		}
	})
}

func yamlToGeneric(t *testing.T, in string) any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(in))
	if err != nil {
		t.Fatalf("test input is not YAML: %v", err)
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestValidateDoesNotChangeTheSpec(t *testing.T) {
	s := Spec{
		Name:               "gen",
		Source:             Source{Generator: &GeneratorSource{RowsPerSecond: 10}},
		OutputMode:         Append,
		Sink:               Sink{Console: &ConsoleSink{}},
		CheckpointLocation: "/tmp/ck",
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("generator spec without schema: %v", err)
	}
	if s.Source.Schema != nil || s.ShufflePartitions != 0 || s.Source.Format != "" {
		t.Fatalf("Validate changed the spec: %+v", s)
	}
}

func TestValidationErrorListsEveryProblemOnItsOwnLine(t *testing.T) {
	var s Spec
	err := s.Validate()
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
		{Problem{"name", "", "required"}, "name: required"},
		{Problem{"outputMode", "update", "is bad"}, `outputMode: "update" is bad`},
		{Problem{"shufflePartitions", "-1", "is bad"}, "shufflePartitions: -1 is bad"},
		{Problem{"generator.lateFraction", "1.5", "is bad"}, "generator.lateFraction: 1.5 is bad"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%#v: got %q, want %q", tc.p, got, tc.want)
		}
	}
}
