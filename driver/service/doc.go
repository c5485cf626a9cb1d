// Package service is the driver service: it holds the driver lease of a
// query registry, loads the registry, runs every query whose desired state
// is running (each from its own checkpoint) and stops those whose desired
// state is stopped, recording each query's observed state in a
// monitor.Tracker. It implements the CLI's ControlService (submit, stop,
// list, status, progress) and watches a directory of specs.
//
// It owns the reconciliation of desired against observed state, the
// admission of a submitted or changed spec (validation, production guards,
// "new checkpoint required"), and the stop semantics: a stop finishes the
// batch in flight, a stop --now abandons it (the next start re-runs it from
// its logged offsets), a shutdown changes no desired state.
//
// It does not plan or run batches (package microbatch), dispatch tasks
// (package dispatch), keep the registry's storage format (package
// registry), or serve HTTP.
package service
