// Package sluicepb holds the Go code generated from proto/*.proto: the
// gRPC services of a Sluice cluster, split by caller (DriverService:
// executors call the driver; ExecutorService: the driver calls executors;
// ShuffleService: executors call each other; ControlService: the CLI calls
// the driver) and their messages.
//
// Do not edit the generated files: change the .proto files and run
// scripts/genproto.sh. Generated types stay at the boundary; the engine's
// packages take domain types.
package sluicepb
