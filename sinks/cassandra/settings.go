package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/internal/services"
)

// Settings tune how the sink talks to Cassandra. The zero value of a field
// means its default; Defaults and Validate are the one place that knows them.
type Settings struct {
	// Hosts are Cassandra contact points, host or host:port.
	// Default ["127.0.0.1:9042"].
	Hosts []string
	// Consistency is the CQL consistency of every read and write. Reads and
	// writes use the same level, so any level whose reads see its own writes
	// (QUORUM, LOCAL_QUORUM, ALL, or ONE with replication factor 1) is
	// correct. Default LOCAL_QUORUM.
	Consistency string
	// Replication is the keyspace's replication when the sink creates it.
	// Default {"class":"SimpleStrategy","replication_factor":"1"}.
	Replication Replication
	// BatchSize is the most operations applied together; operations on one
	// row within a batch become one write. Default 1000.
	BatchSize int
	// Linger is how long a batch waits to fill once it holds an operation,
	// while more input is at hand (a backlog); with nothing more at hand a
	// batch is written at once. Default 50ms.
	Linger time.Duration
	// LiveLinger is how long a live batch waits for more operations, from
	// its first, when nothing more is at hand; at most Linger. Default 0:
	// such a batch is written at once. A steady stream arrives a producer
	// batch at a time, and a wait joins several into fewer, larger writes,
	// at the price of latency: in the freshness benchmark at 6000 events/s,
	// 20ms spares Cassandra a few percent of a core but adds two fifths to
	// the p99, so the default stays eager; a wait suits a Cassandra short of
	// CPU.
	LiveLinger time.Duration
	// Concurrency is the number of rows read and written at the same time.
	// Default 32.
	Concurrency int
	// RowsPerWrite is the most rows one CQL request writes: a worker takes
	// up to this many rows that are ready and writes them with one unlogged
	// batch of their single-row UPDATEs (each still one partition's atomic
	// mutation). 1 gives every row a request of its own. Default 10, the
	// most partitions Cassandra takes in an unlogged batch without a warning
	// (unlogged_batch_across_partitions_warn_threshold).
	RowsPerWrite int
	// Pipeline is the number of batches in flight at once; it bounds memory
	// to about (Pipeline+1)×BatchSize operations. Default 4.
	Pipeline int
	// RetryBackoffMin and RetryBackoffMax bound the wait between attempts
	// while Cassandra fails; the wait doubles from min up to max and the sink
	// never gives up. Defaults 100ms and 10s.
	RetryBackoffMin time.Duration
	RetryBackoffMax time.Duration
	// Timeout bounds one CQL request. Default 10s.
	Timeout time.Duration
	// RowCache is how many rows the sink keeps in memory to avoid reading
	// them before writing. It is only correct while this instance is the
	// only writer of its rows for its whole lifetime; see the package
	// documentation. Default 100000; -1 here, or 0 in user config, switches
	// it off.
	RowCache int
	// Trace logs the fate of every operation (trace in user config): its
	// row, origin position, the row's position before it, and whether it
	// was applied or skipped as applied before. For finding where an
	// operation went; it writes a log line per operation.
	Trace bool
	// MaxValueBytes bounds a text value; a larger one is dead-lettered
	// rather than sent (Cassandra refuses very large mutations). Default 1 MiB.
	MaxValueBytes int
	// Registry names a table in the view's keyspace that lists the view's
	// table versions with their state (the admin tool's view registry,
	// foldline_views: columns view_name, table_name, state). While it lists
	// the sink's table as "building" — a backfill filling a table nobody
	// reads yet — the sink writes BuildingBatchSize operations at a time,
	// waiting up to BuildingLinger even with nothing more at hand: far fewer
	// writes of the same rows. Once the table is active it writes as any
	// live sink. "" (default): always live.
	Registry string
	// BuildingBatchSize and BuildingLinger are BatchSize and Linger while
	// the table is building. Defaults 20000 and 1s: against 5000, they cut
	// Cassandra's CPU per event in the one-process floor of a backfill of
	// the shop to under a third, and the backfill's time by a sixth (fused)
	// or an eighth (deployed) (scripts/bench); 50000 halves Cassandra's CPU
	// again but hardly shortens the floor, and a batch that size holds most
	// of the broker's 50000 unacknowledged messages per consumer.
	BuildingBatchSize int
	BuildingLinger    time.Duration
	// TLS, when set, connects to Cassandra over TLS: the CA file ("" the
	// system's CAs), a client certificate, and whether the certificate
	// must name its host. The files are paths on the functions worker's
	// machine (or pod), not the machine that deploys. Default: no TLS.
	TLS *TLSSettings
	// Username and Password log in to Cassandra ("" Username: no login).
	// The sink takes them from its function's secrets (SecretUsername,
	// SecretPassword), never from the user config, which anyone who may
	// read the function's config sees.
	Username, Password string
}

// TLSSettings are the sink's TLS settings (user config tls, tls_ca_file,
// tls_cert_file, tls_key_file, tls_validate_hostname).
type TLSSettings struct {
	CAFile, CertFile, KeyFile string
	// ValidateHostname checks that Cassandra's certificate names the host
	// connected to. Default true.
	ValidateHostname bool
}

// The function secrets the sink logs in to Cassandra with.
const (
	SecretUsername = "cassandraUser"
	SecretPassword = "cassandraPassword"
)

// Defaults returns s with every zero field set to its default.
func (s Settings) Defaults() Settings {
	if len(s.Hosts) == 0 {
		s.Hosts = []string{"127.0.0.1:9042"}
	}
	if s.Consistency == "" {
		s.Consistency = "LOCAL_QUORUM"
	}
	if s.Replication == nil {
		s.Replication = DefaultReplication()
	}
	if s.BatchSize == 0 {
		s.BatchSize = 1000
	}
	if s.Linger == 0 {
		s.Linger = 50 * time.Millisecond
	}
	if s.Concurrency == 0 {
		s.Concurrency = 32
	}
	if s.RowsPerWrite == 0 {
		s.RowsPerWrite = 10
	}
	if s.Pipeline == 0 {
		s.Pipeline = 4
	}
	if s.RetryBackoffMin == 0 {
		s.RetryBackoffMin = 100 * time.Millisecond
	}
	if s.RetryBackoffMax == 0 {
		s.RetryBackoffMax = 10 * time.Second
	}
	if s.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	if s.RowCache == 0 {
		s.RowCache = 100000
	}
	if s.MaxValueBytes == 0 {
		s.MaxValueBytes = 1 << 20
	}
	if s.BuildingBatchSize == 0 {
		s.BuildingBatchSize = 20000
	}
	if s.BuildingLinger == 0 {
		s.BuildingLinger = time.Second
	}
	return s
}

// Validate returns every problem of settings that had Defaults applied.
func (s Settings) Validate() error {
	var errs []error
	problem := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for i, h := range s.Hosts {
		if strings.TrimSpace(h) == "" {
			problem("hosts[%d]: is empty", i)
		}
	}
	if _, err := gocql.ParseConsistencyWrapper(s.Consistency); err != nil {
		problem("consistency %q: not a CQL consistency level (ONE, QUORUM, LOCAL_QUORUM, ALL, …)", s.Consistency)
	}
	if err := s.Replication.Validate(); err != nil {
		errs = append(errs, err)
	}
	if s.BatchSize < 1 {
		problem("batch_size %d: must be at least 1", s.BatchSize)
	}
	if s.Linger < 0 {
		problem("linger %s: must not be negative", s.Linger)
	}
	if s.LiveLinger < 0 {
		problem("live_linger %s: must not be negative", s.LiveLinger)
	} else if s.LiveLinger > s.Linger {
		problem("live_linger %s: must not exceed linger %s", s.LiveLinger, s.Linger)
	}
	if s.Concurrency < 1 {
		problem("concurrency %d: must be at least 1", s.Concurrency)
	}
	if s.RowsPerWrite < 1 {
		problem("rows_per_write %d: must be at least 1", s.RowsPerWrite)
	}
	if s.Pipeline < 1 {
		problem("pipeline %d: must be at least 1", s.Pipeline)
	}
	if s.RetryBackoffMin <= 0 {
		problem("retry_backoff_min %s: must be positive", s.RetryBackoffMin)
	}
	if s.RetryBackoffMax < s.RetryBackoffMin {
		problem("retry_backoff_max %s: must be at least retry_backoff_min %s", s.RetryBackoffMax, s.RetryBackoffMin)
	}
	if s.Timeout <= 0 {
		problem("timeout %s: must be positive", s.Timeout)
	}
	if s.RowCache < -1 {
		problem("row_cache %d: must be at least 0", s.RowCache)
	}
	if s.MaxValueBytes < 1 {
		problem("max_value_bytes %d: must be at least 1", s.MaxValueBytes)
	}
	if s.BuildingBatchSize < 1 {
		problem("building_batch_size %d: must be at least 1", s.BuildingBatchSize)
	}
	if s.BuildingLinger < 0 {
		problem("building_linger %s: must not be negative", s.BuildingLinger)
	}
	if s.Registry != "" {
		if err := cqlname.Check("registry", s.Registry); err != nil {
			errs = append(errs, err)
		}
	}
	if t := s.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		problem("tls_cert_file and tls_key_file: give both or neither")
	}
	return errors.Join(errs...)
}

// LiveCut is how batches are cut while the table is live: BatchSize,
// Linger, and eagerly once nothing more is at hand and LiveLinger has
// passed.
func (s Settings) LiveCut() Cut {
	return Cut{Size: s.BatchSize, Linger: s.Linger, Eager: true, Quiet: s.LiveLinger}
}

// BuildingCut is how batches are cut while the table is building:
// BuildingBatchSize or BuildingLinger, whatever is at hand.
func (s Settings) BuildingCut() Cut {
	return Cut{Size: s.BuildingBatchSize, Linger: s.BuildingLinger}
}

// consistency parses the validated consistency level.
func (s Settings) consistency() gocql.Consistency {
	c, _ := gocql.ParseConsistencyWrapper(s.Consistency)
	return c
}

// cacheRows is the row cache's capacity, 0 when it is off.
func (s Settings) cacheRows() int { return max(s.RowCache, 0) }

// Config is the sink's whole user config: the view's table definition and
// the settings, side by side at the top level, e.g.
//
//	{"keyspace":"shop","table":"user_activity_v1","view":"user_activity",
//	 "key":[{"name":"user","type":"text"}],
//	 "columns":[{"name":"page_views","type":"bigint","merge":"add"}],
//	 "hosts":"127.0.0.1:9042","batch_size":1000,"linger":"5ms"}
//
// Keys it does not know belong to the runtime (retries, dead-letter topic, …)
// and are ignored.
type Config struct {
	View     ViewSchema
	Settings Settings
}

// userConfig is the JSON shape of Config; pointers tell "absent" (default)
// from an explicit zero.
type userConfig struct {
	ViewSchema
	Hosts           hostList    `json:"hosts"`
	Consistency     string      `json:"consistency"`
	Replication     Replication `json:"replication"`
	BatchSize       *int        `json:"batch_size"`
	Linger          string      `json:"linger"`
	LiveLinger      string      `json:"live_linger"`
	Concurrency     *int        `json:"concurrency"`
	RowsPerWrite    *int        `json:"rows_per_write"`
	Pipeline        *int        `json:"pipeline"`
	RetryBackoffMin string      `json:"retry_backoff_min"`
	RetryBackoffMax string      `json:"retry_backoff_max"`
	Timeout         string      `json:"timeout"`
	RowCache        *int        `json:"row_cache"`
	Trace           bool        `json:"trace"`
	MaxValueBytes   *int        `json:"max_value_bytes"`
	Registry        string      `json:"registry"`
	BuildingBatch   *int        `json:"building_batch_size"`
	BuildingLinger  string      `json:"building_linger"`
	TLS             *bool       `json:"tls"`
	TLSCAFile       string      `json:"tls_ca_file"`
	TLSCertFile     string      `json:"tls_cert_file"`
	TLSKeyFile      string      `json:"tls_key_file"`
	TLSValidateHost *bool       `json:"tls_validate_hostname"`
}

// hostList accepts a JSON list of hosts or one comma-separated string.
type hostList []string

func (h *hostList) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*h = list
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("hosts: want a list of strings or a comma-separated string")
	}
	for _, part := range strings.Split(s, ",") {
		*h = append(*h, strings.TrimSpace(part))
	}
	return nil
}

// ParseConfig reads the sink's user config (as the runtime hands it over),
// applies defaults and returns every problem at once.
func ParseConfig(userConf map[string]any) (Config, error) {
	u, err := decodeUserConfig(userConf)
	if err != nil {
		return Config{}, fmt.Errorf("reading sink config: %w", err)
	}
	s, errs := u.settings()
	if err := u.ViewSchema.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("reading sink config: %w", err)
	}
	return Config{View: u.ViewSchema, Settings: s}, nil
}

// ParseSettings reads only the settings of a sink's user config, as
// ParseConfig does: lint checks a view's sink.userConfig with it before
// deploy adds the table definition. Each problem (errors.Join) starts with
// its user-config key.
func ParseSettings(userConf map[string]any) (Settings, error) {
	u, err := decodeUserConfig(userConf)
	if err != nil {
		return Settings{}, err
	}
	s, errs := u.settings()
	return s, errors.Join(errs...)
}

func decodeUserConfig(userConf map[string]any) (userConfig, error) {
	raw, err := json.Marshal(userConf)
	if err != nil {
		return userConfig{}, fmt.Errorf("encoding user config: %w", err)
	}
	var u userConfig
	if err := json.Unmarshal(raw, &u); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			// Named by its key, as every other problem is.
			return userConfig{}, fmt.Errorf("%s %s: want a %s", typeErr.Field, typeErr.Value, jsonTypeName(typeErr.Type.String()))
		}
		return userConfig{}, fmt.Errorf("decoding user config: %w", err)
	}
	return u, nil
}

// settings turns the decoded user config into Settings with defaults, and
// returns every problem.
func (u userConfig) settings() (Settings, []error) {
	var errs []error
	duration := func(field, text string) time.Duration {
		if text == "" {
			return 0
		}
		d, err := time.ParseDuration(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want a duration such as 5ms or 2s", field, text))
		}
		return d
	}
	s := Settings{
		Hosts:           u.Hosts,
		Consistency:     u.Consistency,
		Replication:     u.Replication,
		Linger:          duration("linger", u.Linger),
		RetryBackoffMin: duration("retry_backoff_min", u.RetryBackoffMin),
		RetryBackoffMax: duration("retry_backoff_max", u.RetryBackoffMax),
		Timeout:         duration("timeout", u.Timeout),
		Registry:        u.Registry,
		BuildingLinger:  duration("building_linger", u.BuildingLinger),
		LiveLinger:      duration("live_linger", u.LiveLinger),
	}
	// An explicit value that happens to be zero must reach Validate, not
	// turn into the default.
	explicit := func(p *int, zeroMeans int) int {
		switch {
		case p == nil:
			return 0
		case *p == 0:
			return zeroMeans
		}
		return *p
	}
	s.BatchSize = explicit(u.BatchSize, -1)
	s.Concurrency = explicit(u.Concurrency, -1)
	s.RowsPerWrite = explicit(u.RowsPerWrite, -1)
	s.Pipeline = explicit(u.Pipeline, -1)
	s.MaxValueBytes = explicit(u.MaxValueBytes, -1)
	s.BuildingBatchSize = explicit(u.BuildingBatch, -1)
	s.RowCache = explicit(u.RowCache, -1) // 0 in user config switches the cache off
	s.Trace = u.Trace
	s.TLS = u.tlsSettings()
	s = s.Defaults()
	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	return s, errs
}

// tlsSettings returns the TLS settings: on when tls is true, or when a TLS
// file is given and tls is not false.
func (u userConfig) tlsSettings() *TLSSettings {
	on := u.TLSCAFile != "" || u.TLSCertFile != "" || u.TLSKeyFile != ""
	if u.TLS != nil {
		on = *u.TLS
	}
	if !on {
		return nil
	}
	t := &TLSSettings{CAFile: u.TLSCAFile, CertFile: u.TLSCertFile, KeyFile: u.TLSKeyFile, ValidateHostname: true}
	if u.TLSValidateHost != nil {
		t.ValidateHostname = *u.TLSValidateHost
	}
	return t
}

// jsonTypeName says in words what a user-config key of Go type goType takes.
func jsonTypeName(goType string) string {
	switch goType {
	case "int", "*int":
		return "whole number"
	case "string":
		return "string"
	}
	return goType
}

// NewSession connects to Cassandra with token-aware routing, so that each
// write goes straight to a replica of its row.
func NewSession(s Settings) (*gocql.Session, error) {
	cluster := gocql.NewCluster(s.Hosts...)
	cluster.Consistency = s.consistency()
	cluster.Timeout = s.Timeout
	cluster.ConnectTimeout = s.Timeout
	// Protocol 4 is the first with unset values, which the sink binds for
	// columns a write leaves alone.
	cluster.ProtoVersion = 4
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	if s.Username != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: s.Username, Password: s.Password}
	}
	if t := s.TLS; t != nil {
		tc, err := services.TLSConfig(t.CAFile, t.CertFile, t.KeyFile, !t.ValidateHostname)
		if err != nil {
			return nil, fmt.Errorf("setting up TLS to Cassandra: %w", err)
		}
		cluster.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: t.ValidateHostname}
	}
	session, err := cqlsession.Create(cluster)
	if err != nil {
		return nil, fmt.Errorf("connecting to Cassandra at %s: %w", strings.Join(s.Hosts, ","), err)
	}
	return session, nil
}

// Open connects to Cassandra, creates the view's keyspace and table (or
// checks them, EnsureSchema) and returns an applier of cfg's view with the
// session it uses; the caller closes both.
func Open(ctx context.Context, cfg Config) (*Applier, *gocql.Session, error) {
	session, err := NewSession(cfg.Settings)
	if err != nil {
		return nil, nil, err
	}
	if err := EnsureSchema(ctx, session, cfg.View, cfg.Settings.Replication); err != nil {
		cqlsession.Close(session)
		return nil, nil, err
	}
	applier, err := NewApplier(session, cfg.View, cfg.Settings)
	if err != nil {
		cqlsession.Close(session)
		return nil, nil, err
	}
	return applier, session, nil
}
