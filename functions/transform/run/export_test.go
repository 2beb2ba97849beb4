package run

// ProcessLocal is processLocal, for the package's external tests.
var ProcessLocal = processLocal

// EventTime is eventTime, for the package's external tests.
var EventTime = eventTime
