// Package join owns the stream-static join: a snapshot of a static
// dimension (the lesson manifest), its identity (manifest_id), its
// immutable copy in the checkpoint, and joining one event row with it.
//
// Vocabulary:
//   - dimension: the Parquet or JSON-lines files under join.path, as they
//     are now; they may change at any time.
//   - snapshot: the dimension's rows (join keys, the columns the query
//     adds, the manifest id column) as read once, with its content hash;
//     stored in the checkpoint as manifests/<hash>.json, never rewritten.
//   - Ref: a snapshot's identity (manifest id) and hash, recorded in
//     offsets/N so a re-run of batch N joins against the same snapshot.
//   - Table: a snapshot indexed by join key, ready to join event rows.
//
// The core (Table.Apply, Snapshot encoding and hashing) is pure: no I/O, no
// clock. Taker reads the dimension and stores the snapshot (the driver's
// side); Cache loads snapshots by hash from the checkpoint (the
// executors' side). It must not read the user's path for a logged batch:
// tasks only ever load the snapshot their batch names.
package join
