//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
)

// childMaxRSS returns a finished child's peak resident set size in KiB
// (getrusage ru_maxrss: KiB on Linux, bytes on Darwin), or 0.
func childMaxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss) / 1024
	}
	return int64(ru.Maxrss)
}
