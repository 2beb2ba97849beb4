package pf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

// UserConfigAdminURL is the Pulsar admin (web service) URL through which
// the runtime reads the epoch of a ledger topic from the topic itself
// (its properties), for ledger events that carry none of their own:
// foldline deploy sets it for the stages that read the ledger. The
// worker's own pulsarWebServiceUrl, when it passes one, comes first.
const UserConfigAdminURL = "adminServiceURL"

// epochFinder gives a ledger event without an epoch of its own the epoch
// of the incarnation of the topic it came from.
type epochFinder interface {
	// epochOf returns the epoch of topic (a partition's topic: its
	// partitioned topic's) for an event stored in ledger ledgerID; "" when
	// none is known.
	epochOf(ctx context.Context, topic string, ledgerID int64) (string, error)
}

// epochOf is the epoch configured for topic by the last deploy
// (UserConfigLedgerEpochs): what a runtime without the admin URL uses.
func (e ledgerEpochs) epochOf(_ context.Context, topic string, _ int64) (string, error) {
	return e.of(topic), nil
}

// errEpochLookup marks a failure to read a ledger topic's epoch: the event
// waits and is tried again, never processed without its epoch.
var errEpochLookup = errors.New("reading the ledger topic's epoch")

// topicEpochs reads the epoch of a ledger topic from the topic's
// properties (envelope.PropLedgerEpoch), as foldline deploy and ingest
// write it, so that an event from any producer takes the epoch of the
// incarnation of the topic it is stored in — not the one the last deploy
// saw, which a topic deleted and created again (a consumer re-creates it
// at once) no longer has. A topic never outlives its ledgers (a ledger id
// belongs to one incarnation of one topic), so the epoch read is kept for
// the events of the same ledger, and read again at the next ledger: one
// request per ledger the stage reads, not per event.
//
// A topic without an epoch (created by a producer or a consumer, not by
// foldline) gets a fresh one here, as foldline ingest would give it; the
// runtime then reads the property again after settleEpoch, so that
// instances that found the topic without one at the same moment and wrote
// one each all take the one written last.
type topicEpochs struct {
	adminURL string
	token    string
	client   *http.Client
	// settle is how long to wait between writing an epoch and reading it
	// back (settleEpoch).
	settle time.Duration

	mu    sync.Mutex
	known map[string]string // topic + "@" + ledger id → epoch
}

// settleEpoch is how long an instance that gave a topic its epoch waits
// before reading it back: long enough for the writes of instances that
// found the topic without one at the same moment to land.
const settleEpoch = time.Second

// newTopicEpochs returns the finder for c: topicEpochs when an admin URL
// is known, else the deploy's configured epochs.
func newTopicEpochs(c *instanceConf) (epochFinder, error) {
	if c.AdminURL == "" {
		return c.LedgerEpochs, nil
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if strings.HasPrefix(c.AdminURL, "https://") {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.TLSAllowInsecure} //nolint:gosec // only when the worker says so
		if c.TLSTrustCertsFilePath != "" {
			pem, err := os.ReadFile(c.TLSTrustCertsFilePath)
			if err != nil {
				return nil, fmt.Errorf("reading the TLS trust certificates for the admin API: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("reading the TLS trust certificates %s: no PEM certificate in it", c.TLSTrustCertsFilePath)
			}
			tc.RootCAs = pool
		}
		client.Transport = &http.Transport{TLSClientConfig: tc}
	}
	return &topicEpochs{adminURL: strings.TrimRight(c.AdminURL, "/"), token: c.Token, client: client, settle: settleEpoch, known: map[string]string{}}, nil
}

func (t *topicEpochs) epochOf(ctx context.Context, topic string, ledgerID int64) (string, error) {
	if i := strings.LastIndex(topic, partitionSuffix); i > 0 {
		topic = topic[:i] // the partitioned topic holds the properties
	}
	key := fmt.Sprintf("%s@%d", topic, ledgerID)
	t.mu.Lock()
	epoch, ok := t.known[key]
	t.mu.Unlock()
	if ok {
		return epoch, nil
	}
	epoch, err := t.read(ctx, topic)
	if err == nil && epoch == "" {
		if err = t.write(ctx, topic, envelope.NewEpoch(time.Now())); err == nil {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(t.settle):
			}
			epoch, err = t.read(ctx, topic)
			if err == nil && epoch == "" {
				err = fmt.Errorf("the epoch written to %s is not there", topic)
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("%w %s: %w", errEpochLookup, topic, err)
	}
	t.mu.Lock()
	t.known[key] = epoch
	t.mu.Unlock()
	return epoch, nil
}

// propertiesURL is the admin endpoint of topic's properties.
func (t *topicEpochs) propertiesURL(topic string) (string, error) {
	domain, rest, ok := strings.Cut(topic, "://")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 {
		return "", fmt.Errorf("topic %q: want domain://tenant/namespace/topic", topic)
	}
	return fmt.Sprintf("%s/admin/v2/%s/%s/%s/%s/properties", t.adminURL, domain, url.PathEscape(parts[0]), url.PathEscape(parts[1]), url.PathEscape(parts[2])), nil
}

// read returns topic's epoch property, "" when it has none.
func (t *topicEpochs) read(ctx context.Context, topic string) (string, error) {
	var props map[string]string
	if err := t.do(ctx, http.MethodGet, topic, nil, &props); err != nil {
		return "", err
	}
	epoch := props[envelope.PropLedgerEpoch]
	if epoch == "" {
		return "", nil
	}
	if err := envelope.CheckEpoch(epoch); err != nil {
		return "", fmt.Errorf("the property %s of %s: %w", envelope.PropLedgerEpoch, topic, err)
	}
	return epoch, nil
}

// write gives topic the epoch property epoch.
func (t *topicEpochs) write(ctx context.Context, topic, epoch string) error {
	return t.do(ctx, http.MethodPut, topic, map[string]string{envelope.PropLedgerEpoch: epoch}, nil)
}

func (t *topicEpochs) do(ctx context.Context, method, topic string, body, out any) error {
	endpoint, err := t.propertiesURL(topic)
	if err != nil {
		return err
	}
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, reader)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, endpoint, resp.Status, strings.TrimSpace(string(data)))
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, endpoint, err)
	}
	return nil
}
