package pf

import (
	"bytes"
	"context"
	"io"
	"log/slog"

	"github.com/apache/pulsar-client-go/pulsar"
)

// logForwarder copies every log line to stderr and, fire-and-forget, to the
// function's log topic with property function=<fqfn> (as upstream does).
type logForwarder struct {
	stderr io.Writer
	log    *producer
	fqfn   string
}

func (f *logForwarder) Write(p []byte) (int, error) {
	n, err := f.stderr.Write(p)
	line := bytes.TrimRight(p, "\n")
	f.log.SendAsync(context.Background(), &pulsar.ProducerMessage{
		Payload:    append([]byte(nil), line...),
		Properties: map[string]string{"function": f.fqfn},
	}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
	return n, err
}

// forwardLogs makes the runtime's logger, and slog's and log's defaults so
// that handlers' log lines go along, write to the log topic too.
func (inst *instance) forwardLogs(prods *producers) error {
	prod, err := prods.get(inst.conf.LogTopic)
	if err != nil {
		return err
	}
	w := &logForwarder{stderr: inst.stderr, log: prod, fqfn: inst.conf.FQFN()}
	logger := slog.New(slog.NewTextHandler(w, nil))
	slog.SetDefault(logger)
	inst.log = logger.With("function", inst.conf.FQFN(), "instance", inst.conf.InstanceID)
	return nil
}
