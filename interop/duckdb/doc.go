// Package duckdb holds interoperability tests that read Sluice's output
// with DuckDB (github.com/duckdb/duckdb-go/v2, cgo). It is a module of its
// own so that the product's module needs neither cgo nor DuckDB's ~575 MB
// of module cache:
//
//	cd interop/duckdb && go test ./...
//
// It owns only tests; it must not be imported.
package duckdb
