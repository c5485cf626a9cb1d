// Package registry owns the driver service's durable record of queries and
// the driver lease, both kept in an objstore.Store at a location of their
// own (never inside a checkpoint).
//
// A query's record holds its name, a stable id (a version-4 UUID), the spec
// as submitted, the desired state (running or stopped), a generation that
// grows with every change, and who changed it and when. Every generation is
// its own object, queries/<name>/<generation>.json, created with
// PutIfAbsent: of two writers that read the same generation only one can
// create the next one, and the other gets ErrConflict. The latest record is
// the highest generation; older ones beyond a small window are deleted, so
// the retained ones are the query's recent history.
//
// The audit trail outlives that window: every generation written also
// gets audit/<name>/<generation>.json, the record without its spec (who —
// the authenticated principal and role —, when, the reason, the spec's
// secret-free fingerprints before and after), created with PutIfAbsent
// and never deleted; a generation is pruned only once its entry exists.
// History merges the two.
//
// The lease (lease.go) lets at most one driver act on a registry: the
// active driver renews it by creating term-numbered objects, a standby
// takes over when no new object appears for a TTL.
//
// The package does not run queries, talk gRPC or HTTP, or decide what a
// changed spec means for a checkpoint: that is package driver's job.
package registry
