// Package rewrite gives every test in the repository one flag for
// rewriting golden files: -rewrite, the flag cockroachdb/datadriven already
// defines for its testdata files. A package that defined its own flag of
// that name would panic as soon as its test binary also linked datadriven,
// and a second name (-update) would mean two commands to remember.
//
//	go test ./driver/microbatch -run Trace -rewrite
package rewrite

import (
	"flag"

	// Defines -rewrite (datadriven's flag for rewriting its testdata).
	_ "github.com/cockroachdb/datadriven"
)

// Enabled reports whether the test binary was run with -rewrite. It must be
// called after flag.Parse, that is, from a test, not from a package-level
// variable's initialiser.
func Enabled() bool {
	f := flag.Lookup("rewrite")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}
