package pf

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/foldline/foldline/functions/pf/internal/instancepb"
	"github.com/foldline/foldline/internal/confnum"
)

// ErrBadConfig is wrapped by every error about a malformed instance config or
// user config; the message names the key.
var ErrBadConfig = errors.New("bad instance config")

// guarantee is the function's processing guarantee.
type guarantee int

const (
	atLeastOnce guarantee = guarantee(instancepb.ProcessingGuarantees_ATLEAST_ONCE)
	atMostOnce  guarantee = guarantee(instancepb.ProcessingGuarantees_ATMOST_ONCE)
	manual      guarantee = guarantee(instancepb.ProcessingGuarantees_MANUAL)
)

// Defaults of the Foldline user config keys.
const (
	defaultMaxRetries = 3
	// minMaxMessageBytes leaves room for a dead letter without its payload.
	minMaxMessageBytes  = 16 << 10
	defaultRetryBackoff = 500 * time.Millisecond
	maxRetryBackoff     = 30 * time.Second
)

// The Go runtime's defaults, the user config keys gcPercent,
// memoryLimitMB and maxProcs: see tuneRuntime.
const (
	DefaultGCPercent     = 400
	DefaultMemoryLimitMB = 160
	DefaultMaxProcs      = 0
)

// inputSpec is one input topic or topic pattern.
type inputSpec struct {
	Topic   string
	IsRegex bool
	// ReceiverQueueSize is the input spec's own, else ClientSettings'.
	ReceiverQueueSize int
}

// instanceConf is everything the runtime takes from the worker's instance
// config and the function's user config, decoded and defaulted.
type instanceConf struct {
	ServiceURL  string
	InstanceID  int
	FuncID      string
	FuncVersion string
	Port        int
	MetricsPort int
	ClusterName string

	Tenant    string
	Namespace string
	Name      string
	LogTopic  string

	Guarantee guarantee
	AutoAck   bool

	Inputs               []inputSpec
	SubscriptionName     string
	SubscriptionType     pulsar.SubscriptionType
	SubscriptionPosition pulsar.SubscriptionInitialPosition
	NackRedeliveryDelay  time.Duration

	OutputTopic      string
	KeyBasedBatching bool
	// Client holds the consumers' and producers' settings (clientconf.go).
	Client ClientSettings

	UserConfig map[string]any
	// Secrets are the function's secrets (the worker's secretsMap) whose
	// values are strings: with the process runtime's clear-text secrets
	// provider, the values given at create time. The runtime reads "token";
	// a handler reads the others with FunctionContext.GetSecret.
	Secrets map[string]string

	// Token is the authentication token: the function's own secret "token"
	// when given, else the worker's token parameters; "" means no auth.
	Token                   string
	TLSTrustCertsFilePath   string
	TLSAllowInsecure        bool
	TLSHostnameVerification bool

	DeadLetterTopic string
	// MaxMessageBytes is the largest message the runtime sends; a larger
	// output dead-letters its input. It should be the broker's
	// maxMessageSize.
	MaxMessageBytes int
	MaxRetries      int
	RetryBackoff    time.Duration
	// Until bounds the ledger events processed (a replay as of a point).
	Until cutoff
	// LedgerEpochs gives ledger events without an epoch of their own the
	// epoch of their topic (UserConfigLedgerEpochs), when AdminURL is "".
	LedgerEpochs ledgerEpochs
	// AdminURL is the Pulsar admin API, through which such events take the
	// epoch of their topic from the topic itself (topicEpochs): the
	// worker's pulsarWebServiceUrl, else UserConfigAdminURL.
	AdminURL string
	// OriginForm is how outputs carry their origin
	// (UserConfigOriginProperty).
	OriginForm originForm
	// Routing chooses each output's partition (UserConfigOutputRouting).
	Routing routing
	// Runtime tunes the Go garbage collector and GOMAXPROCS (gc.go).
	Runtime RuntimeSettings
	// CPUProfile is where the instance writes a pprof CPU profile of its
	// run (UserConfigCPUProfile), "" for none.
	CPUProfile string
}

// FQFN is the fully qualified function name, tenant/namespace/name.
func (c *instanceConf) FQFN() string { return c.Tenant + "/" + c.Namespace + "/" + c.Name }

// flatConf mirrors the worker's GoInstanceConfig JSON keys that the runtime
// reads. Unknown keys are ignored.
type flatConf struct {
	PulsarServiceURL               string            `json:"pulsarServiceURL"`
	PulsarWebServiceURL            string            `json:"pulsarWebServiceUrl"`
	InstanceID                     int               `json:"instanceID"`
	FuncID                         string            `json:"funcID"`
	FuncVersion                    string            `json:"funcVersion"`
	Port                           int               `json:"port"`
	MetricsPort                    int               `json:"metricsPort"`
	ClusterName                    string            `json:"clusterName"`
	Tenant                         string            `json:"tenant"`
	NameSpace                      string            `json:"nameSpace"`
	Name                           string            `json:"name"`
	LogTopic                       string            `json:"logTopic"`
	ProcessingGuarantees           int32             `json:"processingGuarantees"`
	SecretsMap                     string            `json:"secretsMap"`
	UserConfig                     string            `json:"userConfig"`
	ClientAuthenticationPlugin     string            `json:"clientAuthenticationPlugin"`
	ClientAuthenticationParameters string            `json:"clientAuthenticationParameters"`
	TLSTrustCertsFilePath          string            `json:"tlsTrustCertsFilePath"`
	TLSHostnameVerificationEnable  bool              `json:"tlsHostnameVerificationEnable"`
	TLSAllowInsecureConnection     bool              `json:"tlsAllowInsecureConnection"`
	AutoAck                        bool              `json:"autoAck"`
	SubscriptionType               int32             `json:"subscriptionType"`
	SubscriptionName               string            `json:"subscriptionName"`
	SubscriptionPosition           int32             `json:"subscriptionPosition"`
	SourceInputSpecs               map[string]string `json:"sourceInputSpecs"`
	SourceSpecsTopic               string            `json:"sourceSpecsTopic"`
	ReceiverQueueSize              int32             `json:"receiverQueueSize"`
	RegexPatternSubscription       bool              `json:"regexPatternSubscription"`
	SinkSpecsTopic                 string            `json:"sinkSpecsTopic"`
	FunctionDetails                string            `json:"functionDetails"`
}

// parseArgs reads the instance config from the command line: -instance-conf
// takes the JSON text, -instance-conf-path a JSON or YAML file.
func parseArgs(args []string, stderr io.Writer) (*instanceConf, error) {
	raw, err := confArg(args, stderr)
	if err != nil {
		return nil, err
	}
	return parseConf(raw)
}

// confArg returns the instance config of the command line as JSON: the
// text of -instance-conf, or the JSON or YAML file -instance-conf-path
// names.
func confArg(args []string, stderr io.Writer) ([]byte, error) {
	fs := flag.NewFlagSet("pf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	text := fs.String("instance-conf", "", "instance config as JSON (passed by the functions worker)")
	path := fs.String("instance-conf-path", "", "file holding the instance config as JSON or YAML")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("parsing command line: %w", err)
	}
	switch {
	case *text != "":
		return []byte(*text), nil
	case *path != "":
		raw, err := os.ReadFile(*path)
		if err != nil {
			return nil, fmt.Errorf("reading instance config: %w", err)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: parsing %s: %w", ErrBadConfig, *path, err)
		}
		return js, nil
	}
	return nil, fmt.Errorf("%w: neither -instance-conf nor -instance-conf-path given", ErrBadConfig)
}

// parseConf decodes the worker's instance config JSON. It prefers the
// functionDetails key (Pulsar 3.3+) and falls back to the flat keys.
func parseConf(raw []byte) (*instanceConf, error) {
	var flat flatConf
	if err := json.Unmarshal(raw, &flat); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Errorf("%w: key %q: want %s, got JSON %s", ErrBadConfig, typeErr.Field, typeErr.Type, typeErr.Value)
		}
		return nil, fmt.Errorf("%w: parsing JSON: %w", ErrBadConfig, err)
	}
	details, err := detailsOf(&flat)
	if err != nil {
		return nil, err
	}
	c := &instanceConf{
		ServiceURL:              flat.PulsarServiceURL,
		AdminURL:                flat.PulsarWebServiceURL,
		InstanceID:              flat.InstanceID,
		FuncID:                  flat.FuncID,
		FuncVersion:             flat.FuncVersion,
		Port:                    flat.Port,
		MetricsPort:             flat.MetricsPort,
		ClusterName:             flat.ClusterName,
		Tenant:                  details.GetTenant(),
		Namespace:               details.GetNamespace(),
		Name:                    details.GetName(),
		LogTopic:                details.GetLogTopic(),
		Guarantee:               guarantee(details.GetProcessingGuarantees()),
		AutoAck:                 details.GetAutoAck(),
		TLSTrustCertsFilePath:   flat.TLSTrustCertsFilePath,
		TLSAllowInsecure:        flat.TLSAllowInsecureConnection,
		TLSHostnameVerification: flat.TLSHostnameVerificationEnable,
	}
	if err := c.applyDetails(details); err != nil {
		return nil, err
	}
	if err := c.applyAuth(&flat, details.GetSecretsMap()); err != nil {
		return nil, err
	}
	if err := c.applyUserConfig(details.GetUserConfig()); err != nil {
		return nil, err
	}
	if err := c.applyClientSettings(details.GetSink().GetProducerSpec()); err != nil {
		return nil, err
	}
	return c, c.validate()
}

// detailsOf returns the FunctionDetails of the config: the functionDetails key
// when present, else one rebuilt from the flat keys (workers before 3.3).
func detailsOf(flat *flatConf) (*instancepb.FunctionDetails, error) {
	if flat.FunctionDetails != "" {
		d := &instancepb.FunctionDetails{}
		opts := protojson.UnmarshalOptions{DiscardUnknown: true}
		if err := opts.Unmarshal([]byte(flat.FunctionDetails), d); err != nil {
			return nil, fmt.Errorf("%w: key \"functionDetails\": %w", ErrBadConfig, err)
		}
		return d, nil
	}
	src := &instancepb.SourceSpec{
		SubscriptionType:     instancepb.SubscriptionType(flat.SubscriptionType),
		SubscriptionName:     flat.SubscriptionName,
		SubscriptionPosition: instancepb.SubscriptionPosition(flat.SubscriptionPosition),
		InputSpecs:           map[string]*instancepb.ConsumerSpec{},
	}
	for topic, specJSON := range flat.SourceInputSpecs {
		spec := &instancepb.ConsumerSpec{}
		if specJSON != "" {
			opts := protojson.UnmarshalOptions{DiscardUnknown: true}
			if err := opts.Unmarshal([]byte(specJSON), spec); err != nil {
				return nil, fmt.Errorf("%w: key \"sourceInputSpecs\" topic %s: %w", ErrBadConfig, topic, err)
			}
		}
		if flat.RegexPatternSubscription {
			spec.IsRegexPattern = true
		}
		if flat.ReceiverQueueSize > 0 && spec.ReceiverQueueSize == nil {
			spec.ReceiverQueueSize = &instancepb.ConsumerSpec_ReceiverQueueSize{Value: flat.ReceiverQueueSize}
		}
		src.InputSpecs[topic] = spec
	}
	if len(src.InputSpecs) == 0 && flat.SourceSpecsTopic != "" {
		src.InputSpecs[flat.SourceSpecsTopic] = &instancepb.ConsumerSpec{IsRegexPattern: flat.RegexPatternSubscription}
	}
	return &instancepb.FunctionDetails{
		Tenant:               flat.Tenant,
		Namespace:            flat.NameSpace,
		Name:                 flat.Name,
		LogTopic:             flat.LogTopic,
		ProcessingGuarantees: instancepb.ProcessingGuarantees(flat.ProcessingGuarantees),
		UserConfig:           flat.UserConfig,
		SecretsMap:           flat.SecretsMap,
		AutoAck:              flat.AutoAck,
		Source:               src,
		Sink:                 &instancepb.SinkSpec{Topic: flat.SinkSpecsTopic},
	}, nil
}

// applyDetails takes the inputs, subscription and output from details.
func (c *instanceConf) applyDetails(d *instancepb.FunctionDetails) error {
	src := d.GetSource()
	topics := make([]string, 0, len(src.GetInputSpecs()))
	for topic := range src.GetInputSpecs() {
		topics = append(topics, topic)
	}
	sort.Strings(topics) // maps have no order; logs and tests want one
	for _, topic := range topics {
		spec := src.GetInputSpecs()[topic]
		c.Inputs = append(c.Inputs, inputSpec{
			Topic:             topic,
			IsRegex:           spec.GetIsRegexPattern(),
			ReceiverQueueSize: int(spec.GetReceiverQueueSize().GetValue()),
		})
	}
	if p := src.GetTopicsPattern(); p != "" {
		c.Inputs = append(c.Inputs, inputSpec{Topic: p, IsRegex: true})
	}
	c.SubscriptionName = src.GetSubscriptionName()
	if c.SubscriptionName == "" {
		// The worker cleans up this name on delete (InstanceUtils).
		c.SubscriptionName = c.FQFN()
	}
	switch src.GetSubscriptionType() {
	case instancepb.SubscriptionType_FAILOVER:
		c.SubscriptionType = pulsar.Failover
	case instancepb.SubscriptionType_KEY_SHARED:
		c.SubscriptionType = pulsar.KeyShared
	default:
		c.SubscriptionType = pulsar.Shared
	}
	if src.GetSubscriptionPosition() == instancepb.SubscriptionPosition_EARLIEST {
		c.SubscriptionPosition = pulsar.SubscriptionPositionEarliest
	}
	c.NackRedeliveryDelay = time.Duration(src.GetNegativeAckRedeliveryDelayMs()) * time.Millisecond

	sink := d.GetSink()
	c.OutputTopic = sink.GetTopic()
	// The producer spec's compression and pending messages are read with
	// the user config's client settings (applyClientSettings).
	c.KeyBasedBatching = sink.GetProducerSpec().GetBatchBuilder() == "KEY_BASED"
	return nil
}

// ErrWorkerCredentials is returned, wrapped with ErrBadConfig, for a
// function that has no token of its own on a Pulsar with authentication.
// The worker hands every instance it starts its own client credentials
// (clientAuthenticationPlugin and -Parameters: a superuser's, on Pulsar 4.0
// with the process runtime); an instance that ran with them could read and
// write every tenant's topics, so the runtime refuses to start instead.
var ErrWorkerCredentials = errors.New("the function has no token of its own; refusing to run with the worker's credentials, a superuser's")

// applyAuth takes the function's token from its secret "token": a tenant's
// function runs as the tenant. Without one it runs with no credentials on
// an open Pulsar (the worker passes no authentication plugin) and refuses
// to start otherwise (ErrWorkerCredentials).
func (c *instanceConf) applyAuth(flat *flatConf, secretsJSON string) error {
	if secretsJSON != "" {
		var secrets map[string]any
		if err := json.Unmarshal([]byte(secretsJSON), &secrets); err != nil {
			return fmt.Errorf("%w: key \"secretsMap\": %w", ErrBadConfig, err)
		}
		c.Secrets = make(map[string]string, len(secrets))
		for k, v := range secrets {
			s, err := secretValue(k, v)
			if err != nil {
				return err
			}
			if s != "" {
				c.Secrets[k] = s
			}
		}
		if _, ok := secrets["token"]; ok {
			s := c.Secrets["token"]
			if s == "" {
				return fmt.Errorf("%w: key \"secretsMap\": secret \"token\" must be a non-empty string", ErrBadConfig)
			}
			c.Token = strings.TrimPrefix(s, "token:")
			return nil
		}
	}
	if flat.ClientAuthenticationPlugin == "" {
		return nil
	}
	return fmt.Errorf("%w: function %s: key \"clientAuthenticationPlugin\" is %s but key \"secretsMap\" has no \"token\": %w; "+
		"give the function its tenant's token as the secret \"token\" (foldline deploy does; by hand: functions create or update --secrets '{\"token\": \"…\"}', the FOLDLINE_PULSAR_TOKEN of the tenant's credentials file)",
		ErrBadConfig, c.FQFN(), flat.ClientAuthenticationPlugin, ErrWorkerCredentials)
}

// secretValue returns a secret's value: the string itself (the process
// runtime's clear-text secrets), or, for a Kubernetes secret reference
// ({"path": secret name, "key": key} — the Kubernetes runtime's secrets
// configurator binds it to an environment variable named after the
// secret), that variable. Other values are left to the handler ("").
func secretValue(name string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case map[string]any:
		path, hasPath := x["path"].(string)
		key, hasKey := x["key"].(string)
		if !hasPath || !hasKey {
			return "", nil
		}
		value, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("%w: key \"secretsMap\": secret %q refers to Kubernetes secret %s, key %s, but the environment has no %s (the worker binds it on the Kubernetes runtime)",
				ErrBadConfig, name, path, key, name)
		}
		return value, nil
	}
	return "", nil
}

// applyUserConfig decodes the user config and takes Foldline's keys from it.
func (c *instanceConf) applyUserConfig(userJSON string) error {
	c.UserConfig = map[string]any{}
	if userJSON != "" {
		if err := json.Unmarshal([]byte(userJSON), &c.UserConfig); err != nil {
			return fmt.Errorf("%w: key \"userConfig\": %w", ErrBadConfig, err)
		}
	}
	c.DeadLetterTopic = "persistent://" + c.Tenant + "/" + c.Namespace + "/" + c.Name + "-DLQ"
	if err := userString(c.UserConfig, "deadLetterTopic", &c.DeadLetterTopic); err != nil {
		return err
	}
	c.MaxMessageBytes = defaultMaxMessageBytes
	if err := userCount(c.UserConfig, "maxMessageBytes", &c.MaxMessageBytes); err != nil {
		return err
	}
	if c.MaxMessageBytes < minMaxMessageBytes {
		return &UserConfigError{Key: "maxMessageBytes", Reason: fmt.Sprintf("%d is below %d", c.MaxMessageBytes, minMaxMessageBytes)}
	}
	c.MaxRetries = defaultMaxRetries
	if err := userCount(c.UserConfig, "maxRetries", &c.MaxRetries); err != nil {
		return err
	}
	backoffMs := int(defaultRetryBackoff / time.Millisecond)
	if err := userCount(c.UserConfig, "retryBackoffMs", &backoffMs); err != nil {
		return err
	}
	c.RetryBackoff = time.Duration(backoffMs) * time.Millisecond
	var err error
	if c.Runtime, err = ParseRuntimeSettings(c.UserConfig); err != nil {
		return err
	}
	if err := userString(c.UserConfig, UserConfigCPUProfile, &c.CPUProfile); err != nil {
		return err
	}
	if c.Until, err = parseCutoff(c.UserConfig); err != nil {
		return err
	}
	if c.LedgerEpochs, err = parseLedgerEpochs(c.UserConfig); err != nil {
		return err
	}
	if c.AdminURL == "" {
		if err := userString(c.UserConfig, UserConfigAdminURL, &c.AdminURL); err != nil {
			return err
		}
	}
	if c.OriginForm, err = parseOriginForm(c.UserConfig); err != nil {
		return err
	}
	if c.Routing, err = parseRouting(c.UserConfig); err != nil {
		return err
	}
	var subType string
	if err := userString(c.UserConfig, "subscriptionType", &subType); err != nil {
		return err
	}
	switch strings.ToLower(subType) {
	case "":
	case "key_shared":
		c.SubscriptionType = pulsar.KeyShared
	case "failover":
		c.SubscriptionType = pulsar.Failover
	case "shared":
		c.SubscriptionType = pulsar.Shared
	default:
		return &UserConfigError{Key: "subscriptionType", Reason: fmt.Sprintf("%q is not key_shared, failover or shared", subType)}
	}
	return nil
}

func userString(m map[string]any, key string, dst *string) error {
	v, ok := m[key]
	if !ok {
		return nil
	}
	s, isString := v.(string)
	if !isString || s == "" {
		return &UserConfigError{Key: key, Reason: fmt.Sprintf("want a non-empty string, got %v", v)}
	}
	*dst = s
	return nil
}

// userChoice reads one of names (in any case) from a user config and
// returns its index; an absent key is the first.
func userChoice(m map[string]any, key string, names ...string) (int, error) {
	var v string
	if err := userString(m, key, &v); err != nil || v == "" {
		return 0, err
	}
	for i, name := range names {
		if strings.EqualFold(v, name) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: user config key %q: %q is not %s", ErrBadConfig, key, v, strings.Join(names, " or "))
}

// userCount reads a non-negative whole number. The worker turns JSON numbers
// into doubles (3 arrives as 3.0); Go integers (a decoded YAML manifest) and
// strings of digits are accepted too.
func userCount(m map[string]any, key string, dst *int) error {
	v, ok := m[key]
	if !ok {
		return nil
	}
	f, err := confnum.Number(v)
	if err != nil {
		return &UserConfigError{Key: key, Reason: err.Error()}
	}
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return &UserConfigError{Key: key, Reason: fmt.Sprintf("want a whole number from 0 to %d, got %v", math.MaxInt32, v)}
	}
	*dst = int(f)
	return nil
}

// validate reports the problems that make the config unusable.
func (c *instanceConf) validate() error {
	var problems []error
	if c.ServiceURL == "" {
		problems = append(problems, fmt.Errorf("key \"pulsarServiceURL\" is empty"))
	}
	if c.Tenant == "" || c.Namespace == "" || c.Name == "" {
		problems = append(problems, fmt.Errorf("keys \"tenant\", \"nameSpace\", \"name\" (or functionDetails) must all be set"))
	}
	if len(c.Inputs) == 0 {
		problems = append(problems, fmt.Errorf("key \"sourceInputSpecs\" (or functionDetails.source.inputSpecs) names no input topic"))
	}
	if c.Port < 0 || c.Port > 65535 {
		problems = append(problems, fmt.Errorf("key \"port\": %d is not a port", c.Port))
	}
	if c.MetricsPort < 0 || c.MetricsPort > 65535 {
		problems = append(problems, fmt.Errorf("key \"metricsPort\": %d is not a port", c.MetricsPort))
	}
	if c.Guarantee == guarantee(instancepb.ProcessingGuarantees_EFFECTIVELY_ONCE) {
		problems = append(problems, fmt.Errorf("key \"processingGuarantees\": EFFECTIVELY_ONCE is not supported"))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrBadConfig, errors.Join(problems...))
}
