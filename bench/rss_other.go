//go:build !unix

package main

import "os"

// childMaxRSS is not known on this platform.
func childMaxRSS(*os.ProcessState) int64 { return 0 }
