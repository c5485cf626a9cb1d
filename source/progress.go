package source

// ProgressOffsetter is an optional capability of a Source: the form of an
// offset that progress shows (StreamingQueryProgress
// sources[].startOffset, endOffset, latestOffset), for a source whose
// offsets can be too large to repeat in every progress object (the file
// source's taken names). Progress travels in gRPC messages and is kept in
// memory per query, so it must stay small whatever the offset's size.
// Without it, progress shows the offset itself.
type ProgressOffsetter interface {
	ProgressOffset(off Offset) Offset
}
