// Package query owns the streaming query spec: its Go types (spec.go), its
// output schema (output.go), loading it from YAML or JSON (Parse, Load),
// checking it once before anything starts (Spec.Validate, which reports every
// problem with the field, the value and the rule), and the fingerprints that
// tie a checkpoint to a definition (Spec.Fingerprint, Spec.StateFingerprint).
//
// It performs no I/O except Load reading one local file, reads no clock, and
// knows nothing about how a query is executed: the event-time arithmetic
// lives in eventtime, the aggregation in agg.
package query
