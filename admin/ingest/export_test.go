package ingest

// StopAfter makes a run stop after n lines were sent, as a crash between two
// batches would.
func StopAfter(o Options, n int64) Options {
	o.stopAfter = n
	return o
}
