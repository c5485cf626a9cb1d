// Package objstore is the one storage interface every durable part of
// Sluice writes through (checkpoint, state files, sinks, bad records), with
// a local-filesystem backend for labs and an S3 backend for production.
//
// It knows nothing about checkpoints or queries.
package objstore
