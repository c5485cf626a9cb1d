// Package file is the file source: JSON-lines files in a directory (an
// objstore.Store whose root is that directory), taken in name order.
//
// An offset is {"lastFile":NAME,"files":[...]}: the greatest name taken so
// far and the files of the batch that ends there, so a re-run batch reads
// exactly the files it read the first time. Files are taken once, in name
// order; a file that appears later with a name at or before lastFile is
// never read (it is reported by IgnoredFiles and logged on every Next).
// Names whose path has a segment starting with '.' or '_' are not data.
//
// It owns planning and reading; it does not write to the directory, does
// not delete or move consumed files, and keeps no history beyond what the
// offsets carry and what one process has seen.
package file
