//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes cmd killed when this process dies (a benchmark
// interrupted by a signal leaves no server behind).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
