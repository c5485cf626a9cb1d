package cliflags

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// StartCPUProfile writes a CPU profile of what follows to path (go tool
// pprof reads it), until the returned stop; an empty path profiles
// nothing. It backs the --cpuprofile flag of driver run, driver serve and
// executor.
func StartCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}
