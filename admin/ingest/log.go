package ingest

import (
	"os"

	"github.com/sirupsen/logrus"
)

// quietLogger keeps the Pulsar client's connection chatter out of the
// progress display: warnings and errors only, on standard error.
func quietLogger() *logrus.Logger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	l.SetOutput(os.Stderr)
	return l
}
