// Package e2e builds the sluice binaries once and drives them as real
// processes: crash points with SIGKILL, restarts in fresh working
// directories, and output checked against an independent oracle.
package e2e
