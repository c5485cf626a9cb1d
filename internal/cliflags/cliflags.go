// Package cliflags holds the command-line flags the driver and executor
// binaries share, so both spell them the same way.
package cliflags

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/objstore"
)

// S3 adds the object-store settings to fs. Anything unset comes from the
// standard AWS settings (AWS_REGION, AWS_ENDPOINT_URL_S3, keys, profiles,
// web identity).
func S3(fs *pflag.FlagSet, o *objstore.S3Options) {
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", "S3 endpoint URL, e.g. http://minio.minio:9000 (MinIO and similar; path-style addressing is then the default)")
	fs.StringVar(&o.Region, "s3-region", "", "S3 region (default from AWS settings, else us-east-1)")
	fs.Float64Var(&o.RequestsPerSecond, "s3-requests-per-second", 0, "limit object-store requests per second (0: no limit)")
	fs.IntVar(&o.MaxRetries, "s3-max-retries", 0, "retries of a throttled or failed S3 request (0: default)")
	fs.Var(pathStyle{&o.PathStyle}, "s3-path-style", "path-style bucket addressing: true or false (default: true exactly when an endpoint is set)")
	fs.Lookup("s3-path-style").NoOptDefVal = "true"
}

// pathStyle is the tri-state --s3-path-style: unset leaves the choice to
// the endpoint, as objstore.S3Options.PathStyle documents.
type pathStyle struct{ p **bool }

func (v pathStyle) String() string {
	if v.p == nil || *v.p == nil {
		return ""
	}
	return strconv.FormatBool(**v.p)
}

func (v pathStyle) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	*v.p = &b
	return nil
}

func (v pathStyle) Type() string { return "bool" }

// LogLevels are the values --log-level takes.
var LogLevels = []string{"debug", "info", "warn", "error"}

// ParseLogLevel reads a --log-level value: exactly one of LogLevels (any
// case). Anything else is refused rather than read as info, so a typo
// (verbose, trace, warning) is not silently ignored.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q is not a level: use %s", s, strings.Join(LogLevels, ", "))
}

// LogLevel adds --log-level to fs. The flag refuses an unknown level when
// the command line is parsed, before any command runs.
func LogLevel(fs *pflag.FlagSet, p *string) {
	*p = "info"
	fs.Var((*levelValue)(p), "log-level", "log level: "+strings.Join(LogLevels, ", ")+" (anything else is refused)")
}

// levelValue is a --log-level value: a string that only takes LogLevels.
type levelValue string

func (l *levelValue) String() string { return string(*l) }
func (l *levelValue) Type() string   { return "string" }
func (l *levelValue) Set(s string) error {
	if _, err := ParseLogLevel(s); err != nil {
		return fmt.Errorf("not a level: use %s", strings.Join(LogLevels, ", "))
	}
	*l = levelValue(s)
	return nil
}

// Help text of the production guards, shared by every command that starts
// queries.
const (
	AllowFirstStartHelp = "approve a production query's first start under this change ticket, e.g. --allow-first-start=CHG-1234. " +
		"A production query (environment: production in its spec) refuses to start on an empty checkpoint, " +
		"because a lost checkpoint would silently start it over; this flag says the empty checkpoint is expected: " +
		"it is the query's first start (startingOffsets apply). The new checkpoint's metadata and the registry's " +
		"history record the ticket, who (--approved-by) and when. Lab queries never need it"
	AllowReplayHelp = "approve an intended replay under this change ticket, e.g. --allow-replay=CHG-1234: like --allow-first-start, " +
		"but says the empty checkpoint is a replay of a query that ran before: " +
		"it reprocesses from startingOffsets and writes its windows again next to the earlier output (a production " +
		"Parquet sink that holds another query's log still refuses); recorded like --allow-first-start. Lab queries never need it"
	ApprovedByHelp = "who approved --allow-first-start or --allow-replay, as recorded with the ticket (default: user@host)"
)

// Guards are the production guards' values: each is the ticket the
// consent is given under, empty when the flag is not set.
type Guards struct {
	FirstStart, Replay string
	ApprovedBy         string
}

// AllowFirstStart reports whether --allow-first-start was given.
func (g *Guards) AllowFirstStart() bool { return g.FirstStart != "" }

// AllowReplay reports whether --allow-replay was given.
func (g *Guards) AllowReplay() bool { return g.Replay != "" }

// Ticket is the ticket of the consent given (replay's when both are).
func (g *Guards) Ticket() string {
	if g.Replay != "" {
		return g.Replay
	}
	return g.FirstStart
}

// By is --approved-by, or who (user@host) when it is unset and a consent
// is given.
func (g *Guards) By(who func() string) string {
	if g.ApprovedBy != "" || (g.FirstStart == "" && g.Replay == "") {
		return g.ApprovedBy
	}
	return who()
}

// ProductionGuards adds --allow-first-start TICKET, --allow-replay TICKET
// and --approved-by to fs. An approval without its ticket is refused when
// the command line is parsed, in plain words (PlainFlagError): a bare
// --allow-first-start at the end of the line, or followed by another flag
// (which it would otherwise take as its ticket).
func ProductionGuards(fs *pflag.FlagSet, g *Guards) {
	fs.Var(&ticketValue{p: &g.FirstStart, name: "allow-first-start"}, "allow-first-start", AllowFirstStartHelp)
	fs.Var(&ticketValue{p: &g.Replay, name: "allow-replay"}, "allow-replay", AllowReplayHelp)
	fs.StringVar(&g.ApprovedBy, "approved-by", "", ApprovedByHelp)
}

// ErrNoTicket: a production guard was given without its ticket.
var ErrNoTicket = errors.New("the approval needs its ticket")

func noTicket(name string) error {
	return fmt.Errorf("--%s: %w: write --%s=TICKET (the change ticket this start is approved under, e.g. --%s=CHG-1234; it is recorded in the checkpoint's metadata and the registry's history)", name, ErrNoTicket, name, name)
}

// PlainFlagError rewrites a command-line error about an approval flag in
// plain words: "--allow-first-start: the approval needs its ticket: write
// --allow-first-start=TICKET ..." rather than pflag's "invalid argument
// ... for ... flag" or "flag needs an argument". Other errors are
// returned as they are. Give it to cobra's SetFlagErrorFunc.
func PlainFlagError(err error) error {
	var missing *pflag.ValueRequiredError
	if errors.As(err, &missing) {
		if _, ok := missing.GetFlag().Value.(*ticketValue); ok {
			return noTicket(missing.GetFlag().Name)
		}
	}
	var invalid *pflag.InvalidValueError
	if errors.As(err, &invalid) && errors.Is(err, ErrNoTicket) {
		return errors.Unwrap(invalid)
	}
	return err
}

// ticketValue is a guard's flag: a non-empty ticket, given as
// --flag=TICKET.
type ticketValue struct {
	p    *string
	name string
}

func (v *ticketValue) String() string { return *v.p }
func (v *ticketValue) Type() string   { return "TICKET" }
func (v *ticketValue) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasPrefix(s, "-") {
		return noTicket(v.name)
	}
	if strings.ContainsAny(s, "\n\r\t") || len(s) > 200 {
		return fmt.Errorf("--%s=%q: a ticket is one line of at most 200 characters", v.name, s)
	}
	*v.p = s
	return nil
}
