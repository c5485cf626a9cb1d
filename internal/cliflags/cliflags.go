// Package cliflags holds the command-line flags the driver and executor
// binaries share, so both spell them the same way.
package cliflags

import (
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
}
