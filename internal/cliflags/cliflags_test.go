package cliflags

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/objstore"
)

func TestS3PathStyleIsUnsetTrueOrFalse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for unset
	}{
		{nil, ""},
		{[]string{"--s3-path-style"}, "true"},
		{[]string{"--s3-path-style=true"}, "true"},
		{[]string{"--s3-path-style=false"}, "false"},
	} {
		var o objstore.S3Options
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		S3(fs, &o)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		got := ""
		if o.PathStyle != nil {
			got = map[bool]string{true: "true", false: "false"}[*o.PathStyle]
		}
		if got != c.want {
			t.Errorf("%v: PathStyle %q, want %q", c.args, got, c.want)
		}
	}
	var o objstore.S3Options
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	S3(fs, &o)
	err := fs.Parse([]string{"--s3-path-style=maybe"})
	if err == nil || !strings.Contains(err.Error(), "s3-path-style") || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("bad value: %v", err)
	}
}

// An approval flag reads as plain words in help, and without its ticket it
// is refused in plain words too: never pflag's internals.
func TestApprovalFlagsReadAsPlainWords(t *testing.T) {
	newFS := func() (*pflag.FlagSet, *Guards) {
		var g Guards
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		ProductionGuards(fs, &g)
		fs.String("query", "", "")
		return fs, &g
	}
	fs, _ := newFS()
	help := fs.FlagUsages()
	for _, want := range []string{"--allow-first-start TICKET ", "--allow-replay TICKET ", "e.g. --allow-first-start=CHG-1234"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.ContainsAny(help, "\x00[]") {
		t.Errorf("help shows an internal value or an optional-value bracket:\n%q", help)
	}
	for _, args := range [][]string{{"--allow-first-start"}, {"--allow-first-start", "--query", "q.yaml"}, {"--allow-first-start="}, {"--allow-replay", "-x"}} {
		fs, _ := newFS()
		err := PlainFlagError(fs.Parse(args))
		name := strings.TrimSuffix(strings.TrimPrefix(args[0], "--"), "=")
		want := "--" + name + ": the approval needs its ticket: write --" + name + "=TICKET"
		if err == nil || !errors.Is(err, ErrNoTicket) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "invalid argument") || strings.ContainsRune(err.Error(), 0) {
			t.Errorf("%v: %v; want it to start %q", args, err, want)
		}
	}
	for _, args := range [][]string{{"--allow-first-start=CHG-1"}, {"--allow-first-start", "CHG-1"}} {
		fs, g := newFS()
		if err := fs.Parse(args); err != nil || g.FirstStart != "CHG-1" || !g.AllowFirstStart() {
			t.Errorf("%v: %v, ticket %q", args, err, g.FirstStart)
		}
	}
	// Other errors pass through unchanged.
	fs, _ = newFS()
	if err := PlainFlagError(fs.Parse([]string{"--nope"})); err == nil || !strings.Contains(err.Error(), "unknown flag: --nope") {
		t.Errorf("unknown flag: %v", err)
	}
}

func TestSizesAndDurationsReadAsTyped(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		out  string
	}{
		{"0", 0, "0"}, {"512MiB", 512 << 20, "512MiB"}, {"2GiB", 2 << 30, "2GiB"}, {"1536", 1536, "1536B"},
		{"64KiB", 64 << 10, "64KiB"}, {" 3 MiB ", 3 << 20, "3MiB"}, {"1048576", 1 << 20, "1MiB"}, {"7B", 7, "7B"},
	} {
		n, err := ParseBytes(c.in)
		if err != nil || n != c.want || FormatBytes(n) != c.out {
			t.Errorf("ParseBytes(%q) = %d, %v (shown %q); want %d shown %q", c.in, n, err, FormatBytes(n), c.want, c.out)
		}
	}
	for _, bad := range []string{"-1", "1.5GiB", "lots", "12MB", "9999999999TiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", 72 * time.Hour: "72h", 90 * time.Second: "1m30s",
		500 * time.Millisecond: "500ms", 10 * time.Second: "10s", time.Hour + time.Minute: "1h1m", 0: "0s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	var n int64
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	Bytes(fs, &n, "mem", 256<<20, "memory, e.g. 512MiB")
	if help := fs.FlagUsages(); !strings.Contains(help, "--mem size") || !strings.Contains(help, "(default 256MiB)") {
		t.Errorf("help:\n%s", help)
	}
	if err := fs.Parse([]string{"--mem=-5"}); err == nil || !strings.Contains(err.Error(), "not a size") {
		t.Errorf("--mem=-5: %v", err)
	}
	if err := fs.Parse([]string{"--mem", "1GiB"}); err != nil || n != 1<<30 {
		t.Errorf("--mem 1GiB: %v, %d", err, n)
	}
}
