// Package fault stops a process abruptly at a named point of a batch, for
// crash tests. It is compiled into every build and inert unless configured.
//
// SLUICE_FAULT=point[:batch][,point[:batch]...] kills the process with
// SIGKILL when it reaches point during batch (any batch when omitted).
// Points: after-offsets, map-done, maps-done, state-commit,
// before-sink-gather (the driver is about to stage the small outputs
// reduce tasks handed back), before-sink-commit, after-sink-commit,
// after-commit, and the background
// cleaner's cleanup-state and cleanup-log (batch: the commit that started
// the pass).
package fault

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/ids"
)

// EnvVar names the environment variable read by FromEnv.
const EnvVar = "SLUICE_FAULT"

type rule struct {
	point string
	batch ids.BatchID // -1: any
}

// Parse reads a SLUICE_FAULT value.
func Parse(spec string) ([]rule, error) {
	var rules []rule
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		point, b, hasBatch := strings.Cut(part, ":")
		r := rule{point: point, batch: -1}
		if hasBatch {
			n, err := ids.ParseBatchID(b)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: batch %q is not a number", EnvVar, spec, b)
			}
			r.batch = n
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// Hook returns a hook that calls kill when a rule matches, or nil when
// spec is empty.
func Hook(spec string, kill func(point string, batch ids.BatchID)) (func(point string, batch ids.BatchID), error) {
	rules, err := Parse(spec)
	if err != nil || len(rules) == 0 {
		return nil, err
	}
	return func(point string, batch ids.BatchID) {
		for _, r := range rules {
			if r.point == point && (r.batch < 0 || r.batch == batch) {
				kill(point, batch)
			}
		}
	}, nil
}

// FromEnv returns the hook SLUICE_FAULT configures (nil when unset): it
// SIGKILLs this process at the named point.
func FromEnv() (func(point string, batch ids.BatchID), error) {
	return Hook(os.Getenv(EnvVar), func(point string, batch ids.BatchID) {
		fmt.Fprintf(os.Stderr, "fault: killing process at %s of batch %d\n", point, batch)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns
	})
}
