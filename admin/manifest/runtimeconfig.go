package manifest

import (
	"errors"

	"github.com/foldline/foldline/functions/pf"
)

// checkRuntimeClientConfig checks the runtime's consumer and producer
// settings in a user config (receiverQueueSize, maxPendingMessages,
// compression, batching…; see pf.ClientSettings) with the runtime's own
// parser, so that lint refuses exactly what an instance would refuse to
// start with. Each bad key is a problem at its own line.
func checkRuntimeClientConfig(src Source, field string, uc map[string]any) Problems {
	_, err := pf.ParseClientSettings(uc)
	if err == nil {
		return nil
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var ps Problems
	for _, e := range errs {
		var bad *pf.UserConfigError
		if errors.As(e, &bad) {
			ps = append(ps, src.Problem(field+"."+bad.Key, "%s", bad.Reason))
		} else {
			ps = append(ps, src.Problem(field, "%v", e))
		}
	}
	return ps
}
