// Package console is the console sink for labs: like Spark's, it prints
// each batch's output rows as a table under a "Batch: N" header, at most 20
// rows, with strings longer than 20 characters cut to 17 and "...".
//
// It writes only to the io.Writer it is given and keeps nothing between
// batches; it is at-least-once (a re-run batch is printed again).
package console
