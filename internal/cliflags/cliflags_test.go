package cliflags

import (
	"strings"
	"testing"

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
