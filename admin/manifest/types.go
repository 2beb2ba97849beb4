package manifest

import (
	"fmt"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/functions/declared"
	"github.com/foldline/foldline/sinks/cassandra"
)

// The kinds of Foldline's own manifest documents. Function config files
// carry no kind: they are Pulsar's FunctionConfig as is, and a pipeline
// names them.
const (
	KindTenant   = "Tenant"
	KindPipeline = "Pipeline"
	KindView     = "View"
)

// Tenant is the tenant manifest: the Pulsar tenant with its namespaces and
// ledger topics, and the tenant's Cassandra keyspace. One directory holds
// exactly one.
type Tenant struct {
	Kind string `yaml:"kind"`
	// Name is the Pulsar tenant, e.g. "shop".
	Name string `yaml:"name"`
	// Keyspace is the Cassandra keyspace of the tenant's views. Default: the
	// tenant's name.
	Keyspace string `yaml:"keyspace"`
	// Replication is the keyspace's replication when deploy creates it.
	// Default {class: SimpleStrategy, replication_factor: "1"}.
	Replication cassandra.Replication `yaml:"replication"`
	// AllowedClusters are the Pulsar clusters the tenant may use. Default:
	// every cluster of the instance.
	AllowedClusters []string `yaml:"allowedClusters"`
	// AdminRoles are the tenant's admin roles. Default none.
	AdminRoles []string `yaml:"adminRoles"`
	// Namespaces are created with their policies; at least one.
	Namespaces []Namespace `yaml:"namespaces"`
	// Ledger lists the ledger topics: written by `foldline ingest`, read by
	// the pipelines, never by a function's output.
	Ledger []Topic `yaml:"ledger"`
	// EventID names the field that holds each event's id (e.g. id). When
	// set, ingestion is exactly once per event id: the only function that
	// reads a ledger topic is the event-id deduplication
	// (DedupBinary), which passes an event on the first time its id comes
	// under its key and never again, and which deploy gives this field.
	// Default: none (the ledger is read as it is).
	EventID string `yaml:"eventId"`

	Source `yaml:"-"`
}

// Namespace is one namespace of the tenant and its policies.
type Namespace struct {
	// Name is the namespace without the tenant, e.g. "ledger".
	Name string `yaml:"name"`
	// Retention keeps acknowledged messages; -1 means without limit (the
	// ledger's namespace must keep everything).
	Retention Retention `yaml:"retention"`
	// Deduplication makes the broker drop a message whose producer sequence
	// id it has seen (what makes a re-run of ingest publish nothing twice).
	Deduplication bool `yaml:"deduplication"`
	// Offload moves old ledger segments to tiered storage. Absent: the
	// namespace's offload settings are left alone.
	Offload *Offload `yaml:"offload"`
}

// Retention is a namespace's retention policy.
type Retention struct {
	// TimeMinutes is how long acknowledged messages are kept; -1 is forever.
	TimeMinutes int `yaml:"timeMinutes"`
	// SizeMB is how much acknowledged data is kept per topic; -1 is no limit.
	SizeMB int64 `yaml:"sizeMB"`
}

// Infinite reports whether the policy keeps everything.
func (r Retention) Infinite() bool { return r.TimeMinutes == -1 && r.SizeMB == -1 }

// Offload is a namespace's tiered-storage policy. The offloader itself
// (driver, bucket, endpoint) is the broker's configuration.
type Offload struct {
	// ThresholdBytes: once a topic holds more than this in BookKeeper, its
	// oldest closed segments are offloaded. 0 offloads as soon as possible,
	// -1 switches automatic offload off.
	ThresholdBytes int64 `yaml:"thresholdBytes"`
	// ThresholdSeconds: closed segments older than this are offloaded too,
	// whatever the size. -1 switches the time trigger off. Absent: left
	// alone (the broker's default, off).
	ThresholdSeconds *int64 `yaml:"thresholdSeconds"`
	// DeletionLagMs is how long BookKeeper keeps a segment after its
	// offload. Absent: the broker's default (4 hours).
	DeletionLagMs *int64 `yaml:"deletionLagMs"`
}

// Topic declares a topic the manifests do not otherwise create: a ledger
// topic, or a pipeline topic that needs partitions.
type Topic struct {
	// Name is the full topic name, persistent://tenant/namespace/topic.
	Name string `yaml:"name"`
	// Partitions: 0 (default) is a non-partitioned topic.
	Partitions int `yaml:"partitions"`
}

// Pipeline is a pipeline manifest: the functions of a DAG. Topology comes
// from each function's inputs and output; views and their sinks are View
// manifests.
type Pipeline struct {
	Kind string `yaml:"kind"`
	// Name names the pipeline in plan and status output.
	Name string `yaml:"name"`
	// Functions are the stages, in any order (deploy orders them).
	Functions []FunctionRef `yaml:"functions"`
	// Topics declares partitions of pipeline topics; topics not listed
	// are created non-partitioned.
	Topics []Topic `yaml:"topics"`
	// Sample is a file of ledger events (JSON lines, relative to this
	// manifest) that lint runs each view's path over, to check what the
	// code emits against the view manifests. Optional.
	Sample string `yaml:"sample"`

	Source `yaml:"-"`
}

// FunctionRef ties a function config file to the Go package of its binary.
type FunctionRef struct {
	// Config is the function's config file, relative to the pipeline
	// manifest: Pulsar's FunctionConfig in YAML, which `pulsar-admin
	// functions create --function-config-file` accepts as it is.
	Config string `yaml:"config"`
	// Binary is the Go package (import path) of the function's main,
	// built by lint, plan and deploy.
	Binary string `yaml:"binary"`
	// Stateful declares a stateful transformation (transform.NewStateful):
	// deploy creates its state table (<function>_state in the tenant's
	// keyspace) and gives the function the tenant's Cassandra, as a
	// view's sink gets it; a backfill's copy gets a table of its own, built
	// from the ledger. Default false.
	Stateful bool `yaml:"stateful"`
}

// View is a view manifest: the table a view materializes and the sink that
// writes it.
type View struct {
	Kind string `yaml:"kind"`
	// Name is the view as operations name it (ViewOp.View).
	Name string `yaml:"name"`
	// Description says what the view holds and what it is for; lint
	// requires one, for the view catalog (foldline views describe,
	// foldline views --search).
	Description string `yaml:"description"`
	// Owner is who answers for the view (a team, an address).
	Owner string `yaml:"owner"`
	// Tags are words to find the view by.
	Tags []string `yaml:"tags"`
	// Keyspace is the tenant's keyspace. Default: the tenant's.
	Keyspace string `yaml:"keyspace"`
	// Version numbers the view's table: the table is <name>_v<version>.
	// A new definition of a live view needs a new version (see backfill).
	// Default 1.
	Version int `yaml:"version"`
	// Key lists the key columns in partition-key order.
	Key []cassandra.KeyColumn `yaml:"key"`
	// Columns lists the value columns, each with its CQL type and merge rule,
	// and for a windowed view its window.
	Columns []Column `yaml:"columns"`
	// Hop is a windowed view's tile size (e.g. 1h for 7d windows); see
	// cassandra.ViewSchema.Hop.
	Hop cassandra.Span `yaml:"hop"`
	// From declares the view straight from the events of a topic, with no
	// Go: the loader adds the function that folds them (see From). Absent:
	// a pipeline function writes the view's operations.
	From *From `yaml:"from"`
	// RollbackGrace is how long the previous table version keeps following
	// the ledger after a backfill (or views --activate) switches the view
	// away from it, so that activating it again (a rollback) gives an
	// up-to-date table at once; past it, its functions are retired at the
	// next deploy, backfill or foldline views gc, and the table stays as
	// it was. Default 24h (DefaultRollbackGrace); 0 retires them at the
	// switch.
	RollbackGrace Duration `yaml:"rollbackGrace"`
	// Sink is the function that applies the view's operations.
	Sink Sink `yaml:"sink"`

	Source `yaml:"-"`
}

// Column is one value column of a view: its table definition, and for a
// declared view (one with from) how events fold into it.
type Column struct {
	cassandra.ValueColumn `yaml:",inline"`
	// Aggregate is how a declared view's events fold into the column:
	// count, sum, min, max, last or avg (see declared.Aggregate). It implies
	// the merge rule (count, sum and avg add, min, max, last is latest),
	// which may then be left out. An avg column is stored as two, its sum
	// and its count (see View.Schema). Only a declared view has one.
	Aggregate declared.Aggregate `yaml:"aggregate"`
	// Value is what each event gives the column: an event field, or an
	// integer expression over fields such as qty * price_cents (see
	// declared.Expr). Every aggregate but count needs one.
	Value declared.Expr `yaml:"value"`
}

// Table is the view's table for its version.
func (v *View) Table() string { return fmt.Sprintf("%s_v%d", v.Name, v.Version) }

// Schema is the table definition the sink receives and deploy creates.
// A declared avg column is stored as two columns, its sum and its count
// (declared.AverageColumns), and is one of the definition's averages,
// which readers compute from them.
func (v *View) Schema() cassandra.ViewSchema {
	columns, _ := v.storedColumns()
	s := cassandra.ViewSchema{Keyspace: v.Keyspace, Table: v.Table(), View: v.Name, Key: v.Key, Columns: columns, Hop: v.Hop}
	for _, c := range v.Columns {
		if c.Aggregate == declared.Avg {
			sum, count := declared.AverageColumns(c.Name)
			s.Averages = append(s.Averages, cassandra.Average{Name: c.Name, Sum: sum, Count: count})
		}
	}
	return s
}

// storedColumns are the value columns of the view's table, and for each
// the index in v.Columns of the column it stores (an avg column's sum
// and count both give its own).
func (v *View) storedColumns() ([]cassandra.ValueColumn, []int) {
	columns := make([]cassandra.ValueColumn, 0, len(v.Columns))
	owners := make([]int, 0, len(v.Columns))
	for i, c := range v.Columns {
		if c.Aggregate != declared.Avg {
			columns, owners = append(columns, c.ValueColumn), append(owners, i)
			continue
		}
		sum, count := declared.AverageColumns(c.Name)
		columns = append(columns,
			cassandra.ValueColumn{Name: sum, Type: c.Type, Merge: c.Merge, Window: c.Window, Description: "The sum of the values of " + c.Name + "."},
			cassandra.ValueColumn{Name: count, Type: "bigint", Merge: c.Merge, Window: c.Window, Description: "The number of values of " + c.Name + "."})
		owners = append(owners, i, i)
	}
	return columns, owners
}

// schemaProblem is a problem of the view's Schema (its field and message)
// as a problem of the view: columns[j] of the table is the manifest's
// column that stores it, averages[k] its k-th avg column; a message about
// an avg column's stored sum or count names the avg column, so that the
// two parts' like problems read as one.
func (v *View) schemaProblem(field, message string) (string, string) {
	var index int
	owner := -1
	if n, _ := fmt.Sscanf(field, "columns[%d]", &index); n == 1 {
		if _, owners := v.storedColumns(); index >= 0 && index < len(owners) {
			owner = owners[index]
		}
	} else if n, _ := fmt.Sscanf(field, "averages[%d]", &index); n == 1 {
		for i, c := range v.Columns {
			if c.Aggregate == declared.Avg {
				if index == 0 {
					owner = i
					break
				}
				index--
			}
		}
	}
	if owner < 0 {
		return field, message
	}
	_, rest, _ := strings.Cut(field, "]")
	if c := v.Columns[owner]; c.Aggregate == declared.Avg {
		sum, count := declared.AverageColumns(c.Name)
		message = strings.NewReplacer(sum, c.Name, count, c.Name).Replace(message)
	}
	return fmt.Sprintf("columns[%d]%s", owner, rest), message
}

// Sink is how a view's sink function is deployed.
type Sink struct {
	// Input is the view-operation topic the sink consumes.
	Input string `yaml:"input"`
	// Binary is the Go package of the sink's main. Default
	// github.com/foldline/foldline/sinks/cassandra/cmd.
	Binary string `yaml:"binary"`
	// Name is the sink function's name. Default <table>-sink, so that a new
	// table version gets a new function and subscription.
	Name string `yaml:"name"`
	// Namespace is where the sink function runs. Default: its input topic's.
	Namespace string `yaml:"namespace"`
	// SubName is the sink's subscription. Default: the sink's name.
	SubName string `yaml:"subName"`
	// Parallelism is the number of sink instances. Default 1. More than one
	// needs a key-ordered subscription (userConfig subscriptionType
	// key_shared) and the sink's row cache off (userConfig row_cache 0).
	Parallelism int `yaml:"parallelism"`
	// UserConfig is added to the sink's user config: the sink's settings
	// (batch_size, consistency, …) and the runtime's (deadLetterTopic,
	// maxRetries, …). The table definition and Cassandra hosts are filled
	// in by deploy.
	UserConfig map[string]any `yaml:"userConfig"`
}

// DefaultSinkBinary is the package of Foldline's Cassandra sink.
const DefaultSinkBinary = "github.com/foldline/foldline/sinks/cassandra/cmd"

// DedupBinary is the package of the event-id deduplication stage
// (functions/dedup), the one reader of the ledger of a tenant with an
// EventID.
const DedupBinary = "github.com/foldline/foldline/functions/dedup/cmd"

// Function is a function of a pipeline with its config file read.
type Function struct {
	// Binary is the Go package of the function's main.
	Binary string
	// Stateful is FunctionRef.Stateful.
	Stateful bool
	// Config is the function config as the file gives it.
	Config utils.FunctionConfig
	// Pipeline is the name of the pipeline that lists it, "" for a
	// declared view's function.
	Pipeline string
	// Declared is the view whose from section the loader made this
	// function of; nil for a function a pipeline lists.
	Declared *View
	// Ref is where the pipeline lists it (field ref.Field).
	Ref      Source
	RefField string
	// Source is the function config file.
	Source Source
}

// Set is everything one manifest directory declares.
type Set struct {
	Dir       string
	Tenant    *Tenant
	Pipelines []*Pipeline
	Functions []*Function
	Views     []*View
}
