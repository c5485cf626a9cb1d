// Package s3test runs a real S3-compatible server (versitygw, on a POSIX
// data directory) as a child process for tests: Start picks a free port on
// 127.0.0.1, generates credentials, waits until the server answers, and
// kills it when the test ends.
//
// It owns only the test server's lifecycle and bucket creation. It must not
// be imported by non-test code, and it never talks to any host but
// 127.0.0.1.
//
// The binary comes from $SLUICE_VERSITYGW, else the newest
// versitygw-* in the Sluice cache ($SLUICE_CACHE, else
// $XDG_CACHE_HOME/sluice or ~/.cache/sluice, under bin/), which
// ./scripts/test.sh installs. Without one, tests skip (or fail when $CI is
// set). Under go test -short (scripts/test.sh --quick) Start skips and
// Available reports false: the fast loop runs no process.
package s3test
