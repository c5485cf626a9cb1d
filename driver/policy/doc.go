// Package policy owns the driver's location policy: which sources, Kafka
// topics, sinks, checkpoints and bad-record locations a submitted query
// may use, for everyone and per principal, and the path-aware prefix
// comparison (Under, Overlap) the driver also uses to keep two queries off
// one checkpoint.
//
// Check is a pure function of the policy, a spec and a principal: it
// opens, lists and creates nothing (a relative local path is made
// absolute against the working directory, as the engine would). Load
// reads the policy file; that is its only I/O. The package does not know
// who the principal is (package cluster authenticates) nor refuse
// anything itself (package driver does, at submit).
package policy
