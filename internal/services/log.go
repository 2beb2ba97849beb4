package services

import (
	"os"

	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

// QuietPulsarLogger keeps the Pulsar client's connection chatter out of a
// command's output: warnings and errors only, on standard error.
func QuietPulsarLogger() log.Logger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	l.SetOutput(os.Stderr)
	return log.NewLoggerWithLogrus(l)
}
