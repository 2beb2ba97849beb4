package manifest

import (
	"errors"
	"maps"
	"math"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

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
	return userConfigProblems(src, field, err)
}

// userConfigProblems turns the runtime's error about a user config (one
// *pf.UserConfigError or several joined) into problems, each at the line of
// its key.
func userConfigProblems(src Source, field string, err error) Problems {
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

// ramPerLimit is how much more memory than the runtime's soft memory limit
// a function's resources.ram must give: the soft limit bounds the heap,
// not the stacks, the client's buffers and what the collector has yet to
// return, and a pod over its limit is killed (docs/operations.md, Pulsar's
// Kubernetes runtime: keep memoryLimitMB at least 30 % under the pod's
// limit).
const ramPerLimit = 1.3

// checkMemory checks a function's resources.ram, when given, against the
// runtime's soft memory limit (userConfig memoryLimitMB, or the runtime's
// default): on Pulsar's Kubernetes runtime ram becomes the pod's memory
// limit, and a limit under the heap the collector aims for gets the
// instance killed under load.
func checkMemory(src Source, res *utils.Resources, uc map[string]any) Problems {
	if res == nil || res.RAM <= 0 {
		return nil
	}
	gc, err := pf.ParseRuntimeSettings(uc)
	if err != nil {
		return nil // reported with the user config
	}
	if gc.MemoryLimitMB == 0 {
		return Problems{src.Problem("resources.ram", "%d bytes, but userConfig.%s is 0 (no soft limit): the heap may grow past ram and the instance be killed; set a limit at most ram/%.1f", res.RAM, pf.UserConfigMemoryLimitMB, ramPerLimit)}
	}
	need := int64(math.Ceil(float64(int64(gc.MemoryLimitMB)<<20) * ramPerLimit))
	if res.RAM < need {
		return Problems{src.Problem("resources.ram", "%d bytes is under %.1f × the runtime's soft memory limit (%s %d MiB%s): want at least %d, or a lower userConfig.%s", res.RAM, ramPerLimit, pf.UserConfigMemoryLimitMB, gc.MemoryLimitMB, defaultNote(uc), need, pf.UserConfigMemoryLimitMB)}
	}
	return nil
}

// HoldsMemoryLimit reports whether the function's resources.ram, when
// given, holds the runtime's soft memory limit at mb MiB (see checkMemory):
// what foldline deploy asks before it raises a function's limit.
func (f *Function) HoldsMemoryLimit(mb int) bool {
	uc := maps.Clone(f.Config.UserConfig)
	if uc == nil {
		uc = map[string]any{}
	}
	uc[pf.UserConfigMemoryLimitMB] = mb
	return len(checkMemory(f.Source, f.Config.Resources, uc)) == 0
}

// defaultNote says when the memory limit is the runtime's default.
func defaultNote(uc map[string]any) string {
	if _, ok := uc[pf.UserConfigMemoryLimitMB]; ok {
		return ""
	}
	return ", the default"
}
