package docs_test

import (
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/expr"
)

// Every scalar function the SQL front end resolves has a row in sql.md's
// function table, with an example.
func TestSQLReferenceCoversEveryFunction(t *testing.T) {
	b, err := os.ReadFile("sql.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, f := range expr.Functions() {
		if !strings.Contains(doc, "| `"+f.Name+"(") {
			t.Errorf("docs/sql.md has no row \"| `%s(...)`\" in its function table", f.Name)
		}
	}
}
