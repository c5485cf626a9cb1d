package task

// AddMap folds a map task's metrics into the batch's, as Local does; for
// runners outside this package (the cluster runner) that rebuild a
// MapResult's metrics from a remote task.
func (r *BatchResult) AddMap(m *MapResult) { r.add(m) }
