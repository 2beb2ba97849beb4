package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/dedup"
	"github.com/foldline/foldline/functions/keyed/cqlstate"
	"github.com/foldline/foldline/functions/pf"
)

// Keys deploy adds to every function's user config. The fingerprint covers
// the binary and the rest of the config, so that comparing it with the
// deployed function's tells whether an update is needed, and the
// instances report it (pf.FingerprintMetric), so that the wait for them
// tells an updated instance from the one before; the binary's own digest
// lets plan say what changed.
const (
	UserConfigFingerprint = pf.UserConfigFingerprint
	UserConfigBinary      = "foldline.binary"
)

// desiredFunction is a stage as it should run on the cluster.
type desiredFunction struct {
	Stage  *manifest.Stage
	Binary gobuild.Binary
	Config utils.FunctionConfig
	// Code is the stage's binary and config digests (code.go).
	Code registry.StageCode
}

// renderFunctions builds every stage's binary and its function config, in
// DAG order.
//
// Every function gets id's credentials in its secrets, a stage that reads
// a ledger topic gets the topic's epoch from epochs (ledger topic → epoch)
// and the admin URL through which its runtime reads the topic's epoch
// itself (pf.UserConfigAdminURL, adminURL) in its user config, and one whose partitioned output a function reads
// routes by origin (manifest.Stage.RouteByOrigin). A stage in
// singleOrigin (by full name) writes its outputs' origin as one property,
// every other as two (see origin.go), unless its config chooses.
func renderFunctions(ctx context.Context, set *manifest.Set, order []*manifest.Stage, builder *gobuild.Builder, cassandraHosts, adminURL string, id identity, kubernetesSecret string, epochs map[string]string, singleOrigin map[string]bool) ([]desiredFunction, error) {
	out := make([]desiredFunction, 0, len(order))
	for _, st := range order {
		bin, err := builder.Build(ctx, st.Binary)
		if err != nil {
			// Named at the manifest's line: a binary refused (not under
			// functions/ or sinks/, untracked) is fixed there.
			return nil, fmt.Errorf("%s: %w", st.BinaryProblem("building function %s", st.Name), err)
		}
		conf, err := functionConfig(st, cassandraHosts, set.Tenant.Replication)
		if err != nil {
			return nil, err
		}
		if st.Stateful {
			setStateTable(&conf, st, set.Tenant, cassandraHosts)
		}
		conf.Secrets = id.secrets(st.View != nil || st.Stateful, kubernetesSecret)
		setLedgerEpochs(&conf, st, epochs, adminURL)
		if _, set := conf.UserConfig[pf.UserConfigOutputRouting]; st.RouteByOrigin && !set {
			conf.UserConfig[pf.UserConfigOutputRouting] = "origin"
		}
		if _, set := conf.UserConfig[pf.UserConfigOriginProperty]; !set {
			conf.UserConfig[pf.UserConfigOriginProperty] = "pair"
			if singleOrigin[st.FullName()] {
				conf.UserConfig[pf.UserConfigOriginProperty] = "single"
			}
		}
		if st.Function != nil {
			compressOutputs(&conf)
		}
		code, err := codeOf(st, bin)
		if err != nil {
			return nil, err
		}
		conf.UserConfig[UserConfigBinary] = bin.SHA256
		conf.UserConfig[UserConfigConfigDigest] = code.Config
		fp, err := fingerprint(conf)
		if err != nil {
			return nil, err
		}
		conf.UserConfig[UserConfigFingerprint] = fp
		out = append(out, desiredFunction{Stage: st, Binary: bin, Config: conf, Code: code})
	}
	return out, nil
}

// DeployedCompression is the compression (pf.UserConfigCompression) of the
// outputs of every function Foldline deploys whose config chooses none,
// in its user config or as its producer config's compressionType. The
// runtime's own default is none (issue 15's tuned loop); here, LZ4 halves
// the broker's CPU in a backfill of the shop and leaves the stages' own
// where it was: every topic between stages is stored and read again, JSON
// compresses, and a stage's batches are large when it has a backlog. Every
// Pulsar client reads LZ4.
const DeployedCompression = "lz4"

// compressOutputs sets DeployedCompression on conf unless it chooses a
// compression of its own.
func compressOutputs(conf *utils.FunctionConfig) {
	if _, set := conf.UserConfig[pf.UserConfigCompression]; set {
		return
	}
	if pc := conf.ProducerConfig; pc != nil && pc.CompressionType != "" {
		return
	}
	conf.UserConfig[pf.UserConfigCompression] = DeployedCompression
}

// sinkMemoryLimitMB is the runtime's soft memory limit for a sink (user
// config memoryLimitMB, which the view's sink.userConfig may override).
const sinkMemoryLimitMB = 512

// functionConfig is the config a stage is deployed with: the function's
// config file as is, or, for a sink, one derived from its view with the
// table definition and Cassandra hosts in the user config.
func functionConfig(st *manifest.Stage, cassandraHosts string, replication map[string]string) (utils.FunctionConfig, error) {
	if st.Function != nil {
		conf := st.Function.Config
		conf.UserConfig = maps.Clone(conf.UserConfig)
		if conf.UserConfig == nil {
			conf.UserConfig = map[string]any{}
		}
		conf.Runtime = utils.GoRuntime
		return conf, nil
	}
	v := st.View
	// The registry tells the sink when its table is still being built by a
	// backfill (nobody reads it: larger, fewer writes) and when it is live.
	// Its row cache (100 000 rows by default) is a live heap larger than the
	// runtime's default soft memory limit.
	// The sink checks the keyspace with the tenant's replication unless the
	// view sets its own (which lint holds to the tenant's).
	uc := map[string]any{"hosts": cassandraHosts, "registry": registry.Table, "memoryLimitMB": sinkMemoryLimitMB, "replication": map[string]string(replication)}
	maps.Copy(uc, v.Sink.UserConfig)
	schema, err := json.Marshal(v.Schema())
	if err != nil {
		return utils.FunctionConfig{}, fmt.Errorf("encoding the table definition of view %s: %w", v.Name, err)
	}
	var schemaFields map[string]any
	if err := json.Unmarshal(schema, &schemaFields); err != nil {
		return utils.FunctionConfig{}, fmt.Errorf("encoding the table definition of view %s: %w", v.Name, err)
	}
	maps.Copy(uc, schemaFields)
	conf := goFunction(st, uc)
	conf.ForwardSourceMessageProperty = true
	conf.Parallelism = st.Parallelism
	return conf, nil
}

// goFunction is the config of a Go function named as st, reading st's
// inputs from their first message on st's subscription (removed with the
// function), acknowledging each once done, at least once, with user
// config uc.
func goFunction(st *manifest.Stage, uc map[string]any) utils.FunctionConfig {
	return utils.FunctionConfig{
		Tenant:               st.Tenant,
		Namespace:            st.Namespace,
		Name:                 st.Name,
		Runtime:              utils.GoRuntime,
		Inputs:               st.Inputs,
		SubName:              st.SubName,
		SubscriptionPosition: "Earliest",
		CleanupSubscription:  true,
		AutoAck:              true,
		Parallelism:          1,
		ProcessingGuarantees: "ATLEAST_ONCE",
		UserConfig:           uc,
	}
}

// statefulMemoryLimitMB is the runtime's soft memory limit for a stateful
// function (user config memoryLimitMB, which its config may set), as for a
// sink (sinkMemoryLimitMB): its states cache (cqlstate.UserConfigCache,
// 100 000 keys by default) is a live heap the runtime's default of 160 MB
// does not hold. At that default the shop's dedup (19 200 states of about
// 50 ids each after 1 000 000 events) and sku-refunds spent whole cores
// collecting, idle and all, starving everything else on the machine.
const statefulMemoryLimitMB = 512

// setStateTable gives a stateful function its state table (cqlstate) in
// the tenant's keyspace and the Cassandra hosts to reach it at, the event-id
// deduplication the tenant's id field, and statefulMemoryLimitMB unless its
// config sets a limit or its resources.ram would not hold that one.
func setStateTable(conf *utils.FunctionConfig, st *manifest.Stage, tenant *manifest.Tenant, cassandraHosts string) {
	if _, set := conf.UserConfig[pf.UserConfigMemoryLimitMB]; !set && st.Function != nil && st.Function.HoldsMemoryLimit(statefulMemoryLimitMB) {
		conf.UserConfig[pf.UserConfigMemoryLimitMB] = statefulMemoryLimitMB
	}
	conf.UserConfig["hosts"] = cassandraHosts
	conf.UserConfig[cqlstate.UserConfigKeyspace] = tenant.Keyspace
	conf.UserConfig[cqlstate.UserConfigTable] = cqlstate.TableName(st.Name)
	if st.Binary == manifest.DedupBinary && tenant.EventID != "" {
		conf.UserConfig[dedup.UserConfigIDField] = tenant.EventID
	}
}

// fingerprint digests a config (whose user config holds the binary's
// digest) without its own fingerprint key.
func fingerprint(conf utils.FunctionConfig) (string, error) {
	conf.UserConfig = maps.Clone(conf.UserConfig)
	delete(conf.UserConfig, UserConfigFingerprint)
	data, err := json.Marshal(conf) // map keys marshal sorted: stable
	if err != nil {
		return "", fmt.Errorf("encoding the config of function %s: %w", conf.Name, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// setLedgerEpochs puts the epochs of the ledger topics st reads into its
// user config (pf.UserConfigLedgerEpochs), and the admin URL through which
// the runtime reads each topic's epoch from the topic when an event lacks
// one (pf.UserConfigAdminURL): the configured epochs are what the last
// deploy saw, which a topic deleted and created again since no longer has.
func setLedgerEpochs(conf *utils.FunctionConfig, st *manifest.Stage, epochs map[string]string, adminURL string) {
	read := map[string]any{}
	for _, in := range st.Inputs {
		if epoch, ok := epochs[in]; ok {
			read[in] = epoch
		}
	}
	if len(read) > 0 {
		conf.UserConfig[pf.UserConfigLedgerEpochs] = read
		if _, set := conf.UserConfig[pf.UserConfigAdminURL]; !set && adminURL != "" {
			conf.UserConfig[pf.UserConfigAdminURL] = adminURL
		}
	}
}
