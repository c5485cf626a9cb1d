// Package wire is the contract between the driver and executor processes,
// beyond the generated protobuf messages: how a value crosses the process
// boundary, once, through one codec.
//
//   - Domain errors (errs.go): a task failing on a condition callers act on
//     (source.ErrDataLoss, statestore.ErrCorrupt, statestore.ErrMemoryLimit,
//     checkpoint.ErrFenced, checkpoint.ErrIncompatibleCheckpoint,
//     ErrLeaseExpired, malformed records, join errors) becomes a status with
//     a DomainError detail naming its kind (StatusOf, TaskStatus), and the
//     driver gets back a *RemoteError that matches the same sentinel
//     (DecodeDomain). A map task that could not push to another executor
//     says which one (ShuffleFailureStatus, ShuffleFailureOf).
//   - Framing (codec.go): partial aggregates and rows in chunks, as pushed
//     between executors and streamed back to the driver.
//
// It performs no I/O, holds no connections and knows neither side's
// loop; credentials are package wire/rpcauth.
package wire
