// Package declared is the one transformation behind every view declared in
// YAML: a view manifest with a from section says which events count (its
// input topic and a filter on field values), which field keys the row, and
// how each column folds the events (count, sum, min, max, last or avg of
// a field or a small integer expression), and this package turns each
// matching event into one operation on its row at the event's time. An
// avg column is stored as its sum and its count (AverageColumns), which
// readers divide.
//
// The manifest loader (admin/manifest) builds the Spec from the view and
// deploys the binary in cmd as an ordinary stage of the DAG, the Spec in
// its user config (UserConfigSpec); lint compiles the same Spec and reads
// a sample of the events with it, so that a field the view names and no
// event has is reported before deploy.
//
// Events are JSON objects, decoded generically. An event the filter keeps
// but whose key or values are missing, of the wrong type or out of the
// column's range goes to the dead-letter topic with a reason that names
// the column and the field (FieldErrors, which match
// transform.ErrMalformed); an event the filter leaves out gives nothing.
package declared
