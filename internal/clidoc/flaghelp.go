package clidoc

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// MaxShort is the longest one-line summary a command may have: `driver
// --help` lists them one per line, so the detail goes in the command's
// own help.
const MaxShort = 60

// addressFlags are the flags that take an address (HOST:PORT or a URL),
// besides every *-addr flag.
var addressFlags = map[string]bool{"listen": true, "advertise": true, "driver": true, "server": true, "s3-endpoint": true}

// CheckFlagHelp fails t for every command of root's tree whose summary is
// longer than MaxShort, and for every visible flag whose help does not
// read the way a user types: a duration, size or address without an
// example ("e.g."), a duration default shown as Go prints it (5m0s), an
// optional-value bracket, or a NUL byte (pflag's internals).
func CheckFlagHelp(t *testing.T, root *cobra.Command) {
	t.Helper()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if n := utf8.RuneCountInString(c.Short); n > MaxShort {
			t.Errorf("%s: its summary is %d characters, over %d (put the detail in its Long help): %q", c.CommandPath(), n, MaxShort, c.Short)
		}
		check := func(f *pflag.Flag) {
			if f.Hidden || f.Deprecated != "" {
				return
			}
			name := c.CommandPath() + " --" + f.Name
			line := f.Usage + " " + f.DefValue + " " + f.NoOptDefVal
			if strings.ContainsRune(line, 0) {
				t.Errorf("%s: its help holds a NUL byte: %q", name, line)
			}
			typ := f.Value.Type()
			if f.NoOptDefVal != "" && typ != "bool" {
				t.Errorf("%s: takes an optional value (%q), shown as a bracket in help", name, f.NoOptDefVal)
			}
			needsExample := typ == "duration" || typ == "size" || addressFlags[f.Name] || strings.HasSuffix(f.Name, "-addr")
			if needsExample && !strings.Contains(f.Usage, "e.g.") {
				t.Errorf("%s (%s): its help gives no example (e.g. ...): %q", name, typ, f.Usage)
			}
			if typ == "duration" && (strings.HasSuffix(f.DefValue, "m0s") || strings.HasSuffix(f.DefValue, "h0m")) {
				t.Errorf("%s: its default is shown as %q, not as a user types it", name, f.DefValue)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(root)
}
