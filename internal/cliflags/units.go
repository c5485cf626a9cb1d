package cliflags

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Bytes adds a size flag to fs: a count of bytes written as a user types
// it, 512MiB, 2GiB, 64KiB or a bare number of bytes; its default is shown
// the same way. Negative sizes are refused when the command line is
// parsed.
func Bytes(fs *pflag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var((*bytesValue)(p), name, usage)
}

// bytesValue is a size flag's value.
type bytesValue int64

func (b *bytesValue) String() string { return FormatBytes(int64(*b)) }
func (b *bytesValue) Type() string   { return "size" }
func (b *bytesValue) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = bytesValue(n)
	return nil
}

var byteUnits = []struct {
	suffix string
	size   int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseBytes reads a size: a whole number followed by B, KiB, MiB, GiB or
// TiB (1024-based, the unit optional: bytes), e.g. 512MiB.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.size
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size: write a whole number of bytes or of KiB, MiB, GiB, e.g. 512MiB", s)
	}
	if n > 0 && mult > 1 && n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// FormatBytes writes a size in the largest unit that holds it as a whole
// number: 268435456 is 256MiB, 2048 is 2KiB, 1536 is 1536B.
func FormatBytes(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range byteUnits {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// FormatDuration writes a duration as a user types it: 5m rather than
// Go's 5m0s, 72h rather than 72h0m0s; 1m30s and 500ms stay as they are.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// TidyDefaults rewrites the shown default of every duration flag of root
// and its commands the way a user types it (FormatDuration): "(default
// 5m)" rather than "(default 5m0s)". Call it once the tree is built.
func TidyDefaults(root *cobra.Command) {
	var walk func(c *cobra.Command)
	tidy := func(f *pflag.Flag) {
		if f.Value.Type() != "duration" {
			return
		}
		if d, err := time.ParseDuration(f.DefValue); err == nil && d != 0 {
			f.DefValue = FormatDuration(d)
		}
	}
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(tidy)
		c.PersistentFlags().VisitAll(tidy)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
