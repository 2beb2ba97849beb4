package pf

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestClientSettingsFromInstanceConf(t *testing.T) {
	withDefaults := func(edit func(*ClientSettings)) ClientSettings {
		s := DefaultClientSettings()
		edit(&s)
		return s
	}
	tests := []struct {
		name string
		// userConfig and producerSpec are JSON text, put into functionDetails.
		userConfig, producerSpec string
		want                     ClientSettings
		// queues are the inputs' receiver queues; nil: each the setting's.
		queues []int
	}{
		{
			name: "defaults",
			want: ClientSettings{
				ReceiverQueueSize: 5000, MaxPendingMessages: 10_000, Compression: pulsar.NoCompression,
				BatchingMaxMessages: 1000, BatchingMaxSize: 1 << 20, BatchingMaxPublishDelay: 10 * time.Millisecond,
			},
		},
		{
			name: "every key, as the worker passes numbers",
			userConfig: `{"receiverQueueSize":2000.0,"maxPendingMessages":3000.0,"compression":"ZSTD",` +
				`"batchingMaxMessages":500.0,"batchingMaxSize":"65536","batchingMaxPublishDelayMs":2.0}`,
			want: ClientSettings{
				ReceiverQueueSize: 2000, MaxPendingMessages: 3000, Compression: pulsar.ZSTD,
				BatchingMaxMessages: 500, BatchingMaxSize: 65536, BatchingMaxPublishDelay: 2 * time.Millisecond,
			},
		},
		{
			name:         "an empty producer spec (foldline deploy's) leaves the defaults",
			producerSpec: `{}`,
			want:         DefaultClientSettings(),
		},
		{
			name:         "producer spec LZ4 is the worker's filler: no compression",
			producerSpec: `{"compressionType":"LZ4"}`,
			want:         DefaultClientSettings(),
		},
		{
			name:         "producer spec compression and pending messages are taken",
			producerSpec: `{"compressionType":"SNAPPY","maxPendingMessages":77}`,
			want:         withDefaults(func(s *ClientSettings) { s.Compression, s.MaxPendingMessages = pulsar.SNAPPY, 77 }),
		},
		{
			name:         "user config wins over the producer spec",
			userConfig:   `{"compression":"lz4","maxPendingMessages":5.0}`,
			producerSpec: `{"compressionType":"ZLIB","maxPendingMessages":77}`,
			want:         withDefaults(func(s *ClientSettings) { s.Compression, s.MaxPendingMessages = pulsar.LZ4, 5 }),
		},
		{
			name:         "producer spec none",
			userConfig:   `{"receiverQueueSize":10.0}`,
			producerSpec: `{"compressionType":"NONE"}`,
			want:         withDefaults(func(s *ClientSettings) { s.ReceiverQueueSize = 10 }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			details := `{"tenant":"t","namespace":"n","name":"f","source":{"inputSpecs":{"persistent://t/n/a":{},` +
				`"persistent://t/n/b":{"receiverQueueSize":{"value":9000}}}}`
			if tt.userConfig != "" {
				details += `,"userConfig":` + quoteJSON(tt.userConfig)
			}
			if tt.producerSpec != "" {
				details += `,"sink":{"topic":"persistent://t/n/out","producerSpec":` + tt.producerSpec + `}`
			}
			c, err := parseConf([]byte(detailsJSON(details + `}`)))
			if err != nil {
				t.Fatal(err)
			}
			if c.Client != tt.want {
				t.Errorf("settings\n got %+v\nwant %+v", c.Client, tt.want)
			}
			// An input spec's own queue wins for its input; the channel
			// holds the largest, capped.
			if c.Inputs[0].ReceiverQueueSize != tt.want.ReceiverQueueSize || c.Inputs[1].ReceiverQueueSize != 9000 {
				t.Errorf("inputs %+v", c.Inputs)
			}
			if got := c.messageQueue(); got != maxHandoff {
				t.Errorf("message queue %d", got)
			}
			var opts pulsar.ProducerOptions
			c.Client.applyProducer(&opts)
			if opts.CompressionType != tt.want.Compression || opts.MaxPendingMessages != tt.want.MaxPendingMessages ||
				opts.BatchingMaxMessages != uint(tt.want.BatchingMaxMessages) || opts.BatchingMaxSize != uint(tt.want.BatchingMaxSize) ||
				opts.BatchingMaxPublishDelay != tt.want.BatchingMaxPublishDelay {
				t.Errorf("producer options %+v", opts)
			}
		})
	}
}

func TestParseClientSettingsNamesEveryBadKey(t *testing.T) {
	tests := []struct {
		name       string
		userConfig map[string]any
		keys       []string
	}{
		{name: "zero queue", userConfig: map[string]any{"receiverQueueSize": 0.0}, keys: []string{"receiverQueueSize"}},
		{name: "negative pending", userConfig: map[string]any{"maxPendingMessages": -1}, keys: []string{"maxPendingMessages"}},
		{name: "fractional batch", userConfig: map[string]any{"batchingMaxMessages": 1.5}, keys: []string{"batchingMaxMessages"}},
		{name: "size not a number", userConfig: map[string]any{"batchingMaxSize": "big"}, keys: []string{"batchingMaxSize"}},
		{name: "size too large", userConfig: map[string]any{"batchingMaxSize": 1e12}, keys: []string{"batchingMaxSize"}},
		{name: "zero delay", userConfig: map[string]any{"batchingMaxPublishDelayMs": 0}, keys: []string{"batchingMaxPublishDelayMs"}},
		{name: "unknown compression", userConfig: map[string]any{"compression": "brotli"}, keys: []string{"compression"}},
		{name: "compression not a string", userConfig: map[string]any{"compression": true}, keys: []string{"compression"}},
		{
			name:       "all problems at once",
			userConfig: map[string]any{"receiverQueueSize": -5, "compression": "gzip", "batchingMaxPublishDelayMs": "soon"},
			keys:       []string{"receiverQueueSize", "batchingMaxPublishDelayMs", "compression"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseClientSettings(tt.userConfig)
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("error = %v, want ErrBadConfig", err)
			}
			var keys []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var uce *UserConfigError
				if !errors.As(e, &uce) {
					t.Fatalf("%v is no UserConfigError", e)
				}
				keys = append(keys, uce.Key)
				if !strings.Contains(e.Error(), `"`+uce.Key+`"`) {
					t.Errorf("error %q does not name key %s", e, uce.Key)
				}
			}
			if strings.Join(keys, ",") != strings.Join(tt.keys, ",") {
				t.Errorf("keys %v, want %v", keys, tt.keys)
			}
		})
	}
}

// A bad client setting stops the instance from starting, naming the key.
func TestParseConfRefusesBadClientSettings(t *testing.T) {
	_, err := parseConf([]byte(detailsJSON(baseDetails + `,"userConfig":"{\"compression\":\"lzma\"}"}`)))
	var uce *UserConfigError
	if !errors.As(err, &uce) || uce.Key != UserConfigCompression || !errors.Is(err, ErrBadConfig) {
		t.Fatalf("error = %v, want a UserConfigError for compression", err)
	}
}

// YAML manifests decode numbers as Go integers.
func TestParseClientSettingsTakesIntegers(t *testing.T) {
	s, err := ParseClientSettings(map[string]any{"receiverQueueSize": 100, "batchingMaxSize": int64(4096), "maxPendingMessages": uint64(7)})
	if err != nil {
		t.Fatal(err)
	}
	if s.ReceiverQueueSize != 100 || s.BatchingMaxSize != 4096 || s.MaxPendingMessages != 7 {
		t.Errorf("%+v", s)
	}
}
