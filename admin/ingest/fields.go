package ingest

import "time"

// The fields of an event that ingest takes its message key and event time
// from unless told otherwise (Options.KeyField, Options.TimeField).
const (
	DefaultKeyField  = "user"
	DefaultTimeField = "time"
)

// KeyAndTime reads an event's message key and event time as ingest does
// (a line that is not a JSON object has neither).
func KeyAndTime(line []byte, keyField, timeField string) (string, time.Time) {
	return keyAndTime(line, keyField, timeField)
}
