package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var linkRE = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// The README and the docs link only to files of the repository that exist
// (a user has no ../shared/ and no design notes), and every #anchor into a
// page names one of its headings.
func TestLinksStayInTheRepository(t *testing.T) {
	pages, _ := filepath.Glob("*.md")
	pages = append(pages, "../README.md")
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, bad := range []string{"../shared", "DESIGN.md", "SEMANTICS.md"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s mentions %s, which users do not have", p, bad)
			}
		}
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target, frag := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") {
				continue
			}
			path := filepath.Join(filepath.Dir(p), target)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", p, target, err)
				continue
			}
			if frag != "" && !hasAnchor(string(data), frag) {
				t.Errorf("%s links to %s#%s: no such heading", p, target, frag)
			}
		}
	}
}

// Comments and messages in the code cite the repository's own documents
// (docs/semantics.md, ...) or state the rule in place: a reader of the code
// has no ../shared/ design notes either.
func TestCodeCitesOnlyTheRepositorysDocuments(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "links_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, bad := range []string{"../shared", "DESIGN.md", "SEMANTICS.md", "STYLE.md", "TOOLS.md", "SEMANTICS rule"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s cites %s, which is not in the repository: cite docs/ or state the rule", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hasAnchor reports whether a Markdown page has a heading whose GitHub
// anchor is frag.
func hasAnchor(page, frag string) bool {
	for _, line := range strings.Split(page, "\n") {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		if b.String() == frag {
			return true
		}
	}
	return false
}
