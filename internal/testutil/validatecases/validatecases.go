// Package validatecases replays the validation test cases of
// query/testdata/validate.txt for other tests, so that every command that
// validates a spec (run, explain, ...) can be checked against the same
// messages Validate gives. It is used by tests only and owns no rules.
package validatecases

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cockroachdb/datadriven"
	"sigs.k8s.io/yaml"
)

// Path is the absolute path of query/testdata/validate.txt.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "query", "testdata", "validate.txt")
}

// Each calls fn for every validate case with the spec document (JSON, or
// the YAML as written when it has no base) and the recorded output: "ok",
// the problems one per line, or "parse error: ...".
func Each(t *testing.T, fn func(t *testing.T, pos string, spec []byte, want string)) {
	bases := map[string]any{}
	datadriven.RunTest(t, Path(), func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "spec":
			var name string
			td.ScanArgs(t, "name", &name)
			bases[name] = YAMLToGeneric(t, td.Input)
		case "validate":
			data := []byte(td.Input)
			if td.HasArg("base") {
				var name string
				td.ScanArgs(t, "base", &name)
				patch := YAMLToGeneric(t, td.Input)
				if patch == nil {
					patch = map[string]any{}
				}
				var err error
				if data, err = json.Marshal(MergePatch(bases[name], patch)); err != nil {
					t.Fatal(err)
				}
			}
			fn(t, td.Pos, data, td.Expected)
			return td.Expected
		}
		return td.Expected
	})
}

// YAMLToGeneric decodes a YAML test input into the generic JSON form
// (maps, slices, numbers, strings) MergePatch works on.
func YAMLToGeneric(t *testing.T, in string) any {
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

// MergePatch applies an RFC 7386 JSON merge patch.
func MergePatch(base, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	out := map[string]any{}
	if bm, ok := base.(map[string]any); ok {
		for k, v := range bm {
			out[k] = v
		}
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = MergePatch(out[k], v)
	}
	return out
}
