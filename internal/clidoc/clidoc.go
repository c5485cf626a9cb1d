// Package clidoc renders a cobra command tree as a Markdown reference and
// checks a committed reference against it, for the CLI reference in docs/.
// It owns the format only; the commands are the binaries'.
package clidoc

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Render returns the Markdown reference of root and every visible command
// under it, depth first in name order.
func Render(root *cobra.Command) string {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var b strings.Builder
	name := root.Name()
	fmt.Fprintf(&b, "# `%s` command reference\n\n", name)
	b.WriteString("<!-- Generated from the command tree; do not edit. Regenerate with:\n")
	b.WriteString("     go test ./cmd/driver ./cmd/executor -run TestCLIReference -rewrite -->\n\n")
	if root.Long != "" {
		b.WriteString(root.Long + "\n\n")
	} else {
		b.WriteString(root.Short + "\n\n")
	}
	if fs := root.PersistentFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "Flags every `%s` command takes:\n\n```text\n%s```\n\n", name, fs.FlagUsages())
	}
	b.WriteString("Exit status: 0 when the command did what it says, non-zero with a message on stderr otherwise.\n\n")
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() { // cobra sorts them by name
			if !sub.IsAvailableCommand() || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			cmds = append(cmds, sub)
			walk(sub)
		}
	}
	walk(root)
	if root.Runnable() {
		cmds = append([]*cobra.Command{root}, cmds...)
	}
	if len(cmds) > 1 {
		b.WriteString("| command | what it does |\n|---|---|\n")
		for _, c := range cmds {
			fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.CommandPath(), anchor(c.CommandPath()), c.Short)
		}
		b.WriteString("\n")
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "## %s\n\n", c.CommandPath())
		if c.Long != "" {
			b.WriteString(c.Long + "\n\n")
		} else {
			b.WriteString(c.Short + "\n\n")
		}
		fmt.Fprintf(&b, "```text\n%s\n```\n\n", c.UseLine())
		if fs := c.LocalNonPersistentFlags(); fs.HasAvailableFlags() {
			fmt.Fprintf(&b, "```text\n%s```\n\n", fs.FlagUsagesWrapped(100))
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func anchor(s string) string { return strings.ReplaceAll(s, " ", "-") }

// CleanEnv unsets SLUICE_* and AWS_* for the rest of the test (restored
// after it), so a flag default taken from the environment does not make
// the reference differ by machine.
func CleanEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLUICE_") || strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "") // registers the restore
			os.Unsetenv(k)
		}
	}
}

// Check compares the reference of root with the file at path, or rewrites
// the file when update is set. A stale file fails with the command that
// regenerates it.
func Check(t *testing.T, root *cobra.Command, path string, update bool) {
	t.Helper()
	got := Render(root)
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: generate it with: go test ./cmd/driver ./cmd/executor -run TestCLIReference -rewrite", err)
	}
	if string(want) != got {
		t.Fatalf("%s is stale: the commands changed. Regenerate it with:\n  go test ./cmd/driver ./cmd/executor -run TestCLIReference -rewrite\nfirst difference near: %s", path, firstDiff(string(want), got))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: file has %q, commands give %q", i+1, x, y)
		}
	}
	return "(none)"
}
