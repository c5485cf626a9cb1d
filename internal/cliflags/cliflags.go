// Package cliflags holds the command-line flags the driver and executor
// binaries share, so both spell them the same way.
package cliflags

import (
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
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", "S3 endpoint URL (MinIO and similar; path-style addressing is then the default)")
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
	AllowFirstStartHelp = "a production query (environment: production in its spec) refuses to start on an empty checkpoint, " +
		"because a lost checkpoint would silently start it over; this flag says the empty checkpoint is expected: " +
		"it is the query's first start (startingOffsets apply). Lab queries never need it"
	AllowReplayHelp = "like --allow-first-start, but says the empty checkpoint is an intended replay of a query that ran before: " +
		"it reprocesses from startingOffsets and writes its windows again next to the earlier output (a production " +
		"Parquet sink that holds another query's log still refuses). Lab queries never need it"
)

// ProductionGuards adds --allow-first-start and --allow-replay to fs.
func ProductionGuards(fs *pflag.FlagSet, allowFirst, allowReplay *bool) {
	fs.BoolVar(allowFirst, "allow-first-start", false, AllowFirstStartHelp)
	fs.BoolVar(allowReplay, "allow-replay", false, AllowReplayHelp)
}
