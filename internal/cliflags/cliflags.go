// Package cliflags holds the command-line flags the driver and executor
// binaries share, so both spell them the same way.
package cliflags

import (
	"fmt"
	"strconv"

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
