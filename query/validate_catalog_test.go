package query_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/internal/testutil/validatecases"
	. "github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/catalog"
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
			bases[name] = validatecases.YAMLToGeneric(t, td.Input)
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
				patch := validatecases.YAMLToGeneric(t, td.Input)
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
			err = catalog.Validate(s)
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
