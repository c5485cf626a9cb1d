package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	diffRefRE     = regexp.MustCompile(`spark-differences\.md#([a-z0-9-]+)`)
	diffHeadingRE = regexp.MustCompile(`(?m)^### ([a-z0-9-]+)\s*$`)
)

// docs/spark-differences.md stays in step with the code: every difference
// the code names (spark-differences.md#ID, in a comment or a bad-record
// reason) has an entry, every entry is named by some non-test Go code, and
// every entry says what Spark does, what Sluice does and why.
func TestSparkDifferencesPageMatchesTheCode(t *testing.T) {
	b, err := os.ReadFile("spark-differences.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	_, diffs, ok := strings.Cut(page, "\n## Differences\n")
	if !ok {
		t.Fatal("spark-differences.md has no \"## Differences\" section")
	}
	entries := map[string]string{}
	locs := diffHeadingRE.FindAllStringSubmatchIndex(diffs, -1)
	for i, l := range locs {
		end := len(diffs)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		id := diffs[l[2]:l[3]]
		if _, dup := entries[id]; dup {
			t.Errorf("entry %s appears twice", id)
		}
		entries[id] = diffs[l[1]:end]
	}
	if len(entries) < 5 {
		t.Fatalf("found only %d entries: %v", len(entries), entries)
	}
	for id, body := range entries {
		for _, want := range []string{"\n- Spark", "\n- Sluice:", "\n- Why:"} {
			if !strings.Contains(body, want) {
				t.Errorf("entry %s lacks %q", id, strings.TrimSpace(want))
			}
		}
	}

	inCode := map[string][]string{} // ID -> files naming it
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		isGo := strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
		isDoc := strings.HasSuffix(name, ".md") && name != "spark-differences.md"
		if !isGo && !isDoc {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range diffRefRE.FindAllStringSubmatch(string(data), -1) {
			if _, ok := entries[m[1]]; !ok {
				t.Errorf("%s names spark-differences.md#%s, which has no entry", path, m[1])
			}
			if isGo {
				inCode[m[1]] = append(inCode[m[1]], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range entries {
		if len(inCode[id]) == 0 {
			t.Errorf("entry %s is named by no Go code: name it (spark-differences.md#%s) where the difference is implemented, or remove the entry", id, id)
		}
	}
}
