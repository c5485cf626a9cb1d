package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/driver/policy"
	"github.com/sluicehq/sluice/internal/testutil/validatecases"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/catalog"
)

// specFields lists every field path of query.Spec by its JSON name, as a
// user writes it: "source.kafka.maxOffsetsPerTrigger",
// "source.schema[].name". KafkaSource.Options is written as "kafka.*"
// keys inside source.kafka (see KafkaSource.UnmarshalJSON).
func specFields() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			if t.Kind() == reflect.Slice {
				prefix += "[]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeFor[query.Duration]() {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if t == reflect.TypeFor[query.KafkaSource]() && f.Name == "Options" {
				name = "kafka.*"
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			out = append(out, path)
			walk(f.Type, path)
		}
	}
	walk(reflect.TypeFor[query.Spec](), "")
	return out
}

var headingRE = regexp.MustCompile("(?m)^### `([^`]+)`\\s*$")

// entries splits query.md into its field entries, by heading.
func entries(t *testing.T) (map[string]string, []string) {
	t.Helper()
	b, err := os.ReadFile("query.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	locs := headingRE.FindAllStringSubmatchIndex(doc, -1)
	m := map[string]string{}
	var order []string
	for i, l := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		name := doc[l[2]:l[3]]
		if _, dup := m[name]; dup {
			t.Errorf("query.md documents %s twice", name)
		}
		m[name] = doc[l[1]:end]
		order = append(order, name)
	}
	return m, order
}

// Every spec field has an entry with its type, default, Spark's name, the
// output modes and sinks that accept it and an example; every entry is a
// field. Adding a field to query.Spec without documenting it fails here.
func TestQueryReferenceCoversEverySpecField(t *testing.T) {
	docs, order := entries(t)
	fields := specFields()
	if len(fields) < 40 {
		t.Fatalf("found only %d spec fields by reflection: %v", len(fields), fields)
	}
	known := map[string]bool{}
	for _, f := range fields {
		known[f] = true
		body, ok := docs[f]
		if !ok {
			t.Errorf("docs/query.md has no entry \"### `%s`\" (add one: type, default, Spark's name, accepted with, example)", f)
			continue
		}
		for _, want := range []string{"- type:", "- default:", "- Spark:", "- accepted with:", "```yaml"} {
			if !strings.Contains(body, want) {
				t.Errorf("docs/query.md entry %s lacks %q", f, want)
			}
		}
	}
	for _, name := range order {
		if !known[name] {
			t.Errorf("docs/query.md documents %s, which is not a field of query.Spec", name)
		}
	}
}

// fence is a fenced YAML block of a Markdown file.
type fence struct {
	file, info, body string
	line             int
}

var fenceRE = regexp.MustCompile("(?ms)^```yaml([^\\n]*)\\n(.*?)^```\\s*$")

func fences(t *testing.T) []fence {
	t.Helper()
	files, _ := filepathGlob("*.md")
	var out []fence
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fenceRE.FindAllSubmatchIndex(b, -1) {
			out = append(out, fence{
				file: f,
				info: strings.TrimSpace(string(b[m[2]:m[3]])),
				body: string(b[m[4]:m[5]]),
				line: bytes.Count(b[:m[0]], []byte("\n")) + 1,
			})
		}
	}
	return out
}

// Every YAML example in the docs validates. A block is a whole query
// (```yaml, or ```yaml base=NAME to let later blocks patch it), or a
// fragment (```yaml patch=NAME): a JSON merge patch on base NAME, as a
// field's example shows just that field. ```yaml invalid (or ```yaml
// invalid patch=NAME) marks an example of a refused query: it must be
// refused, and refused by validation, not by YAML. ```yaml policy is a
// location policy file, which must parse as one.
func TestEveryYAMLExampleValidates(t *testing.T) {
	all := fences(t)
	if len(all) < 20 {
		t.Fatalf("found only %d YAML examples", len(all))
	}
	bases := map[string]any{}
	for _, f := range all {
		if name, ok := option(f.info, "base"); ok {
			bases[name] = generic(t, f)
		}
	}
	for _, f := range all {
		where := fmt.Sprintf("%s:%d", f.file, f.line)
		data := []byte(f.body)
		if slices.Contains(strings.Fields(f.info), "policy") {
			// A location policy (driver serve --policy), not a query.
			if _, err := policy.Parse(data); err != nil {
				t.Errorf("%s: policy example does not parse: %v", where, err)
			}
			continue
		}
		if name, ok := option(f.info, "patch"); ok {
			base, ok := bases[name]
			if !ok {
				t.Errorf("%s: no ```yaml base=%s block", where, name)
				continue
			}
			merged, _ := json.Marshal(validatecases.MergePatch(base, generic(t, f)))
			data = merged
		}
		spec, err := query.Parse(data)
		if slices.Contains(strings.Fields(f.info), "invalid") {
			if err != nil {
				t.Errorf("%s: example marked invalid does not even parse: %v", where, err)
			} else if err := catalog.Validate(spec); err == nil {
				t.Errorf("%s: example marked invalid validates", where)
			}
			continue
		}
		if err == nil {
			err = catalog.Validate(spec)
		}
		if err != nil {
			t.Errorf("%s: example does not validate:\n%v\n%s", where, err, data)
		}
	}
}

// option returns the value of key=value in a fence's info string.
func option(info, key string) (string, bool) {
	for _, w := range strings.Fields(info) {
		if v, ok := strings.CutPrefix(w, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

func generic(t *testing.T, f fence) any {
	js, err := yaml.YAMLToJSON([]byte(f.body))
	if err != nil {
		t.Fatalf("%s:%d: not YAML: %v", f.file, f.line, err)
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func filepathGlob(p string) ([]string, error) {
	m, err := filepath.Glob(p)
	sort.Strings(m)
	return m, err
}

func TestPrintFields(t *testing.T) {
	if os.Getenv("PRINT_FIELDS") != "" {
		fmt.Println(strings.Join(specFields(), "\n"))
	}
}
