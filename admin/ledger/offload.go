package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/progress"
	"github.com/foldline/foldline/internal/services"
)

// ErrOffloadFailed marks an offload the broker reported as failed.
var ErrOffloadFailed = errors.New("offload failed")

// ErrNotConfigured marks a topic whose effective offload policy has no
// driver or endpoint that could work.
var ErrNotConfigured = errors.New("offload not configured")

// OffloadError is a failed offload of one topic with the broker's reason.
type OffloadError struct {
	Topic string
	// Reason is the broker's last error.
	Reason string
	// Setting names the configuration the reason points at ("" when it is
	// not recognisable).
	Setting string
}

func (e *OffloadError) Error() string {
	msg := fmt.Sprintf("offloading %s: the broker reports: %s", e.Topic, e.Reason)
	if e.Setting != "" {
		msg += "; check " + e.Setting
	}
	return msg
}

func (e *OffloadError) Unwrap() error { return ErrOffloadFailed }

// The settings an offload error can point at, named as the operator sets
// them (broker config keys, or the broker's environment for credentials).
const (
	SettingBucket      = "the bucket (managedLedgerOffloadBucket): it must exist on the S3 server"
	SettingCredentials = "the S3 credentials (the broker's ACCESS_KEY_ID and ACCESS_KEY_SECRET)"
	SettingEndpoint    = "the S3 endpoint (managedLedgerOffloadServiceEndpoint): is the S3 server up? (scripts/stack up s3)"
	SettingDriver      = "the offload driver (managedLedgerOffloadDriver) and offloadersDirectory: the offloader NARs must be in $PULSAR_HOME/offloaders when Pulsar starts (scripts/fetch puts them there; restart Pulsar if it started before)"
)

// SettingOf names the setting a broker's offload error points at, or "".
// The broker passes on the S3 server's error codes and Java's exception
// names, which is what this recognises. A server that could not be reached
// is recognised first: such an error quotes the request's URL, whose
// bucket name and object ids (a random UUID, a ledger id) may hold any of
// the other words or numbers. For the same reason no status code is
// matched by its digits ("403" is in many a UUID): a refusal is named by
// its words.
func SettingOf(reason string) string {
	r := strings.ToLower(reason)
	switch {
	case containsAny(r, "connection refused", "connectexception", "unknownhost", "timed out", "no route to host", "unreachable"):
		return SettingEndpoint
	case containsAny(r, "nosuchbucket", "bucket does not exist", "container not found", "bucket"):
		return SettingBucket
	case containsAny(r, "accessdenied", "invalidaccesskeyid", "signaturedoesnotmatch", "authorization", "forbidden", "credential"):
		return SettingCredentials
	case containsAny(r, "nullledgeroffloader", "not enabled", "offloader"):
		return SettingDriver
	}
	return ""
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// OffloadResult is what one topic's offload moved.
type OffloadResult struct {
	Topic string `json:"topic"`
	// Offloaded is what this run moved to tiered storage.
	Offloaded Amount `json:"offloaded"`
	// Skipped says why nothing was asked of the broker ("" when it was).
	Skipped string `json:"skipped,omitempty"`
}

// Offload offloads every closed segment of every ledger topic of the
// manifests' tenant and waits for each to end. It checks first that the
// offload endpoint answers, so a stopped S3 server or a wrong endpoint gives
// an error naming the setting at once instead of a long broker retry. The
// first failure ends the run; the results are those of the topics done
// before it, which stay offloaded.
func Offload(ctx context.Context, opts Options) ([]OffloadResult, error) {
	c, err := connect(opts)
	if err != nil {
		return nil, err
	}
	var results []OffloadResult
	for _, topic := range c.topics {
		res, err := c.offload(ctx, topic)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

func (c *cluster) offload(ctx context.Context, topic *utils.TopicName) (OffloadResult, error) {
	res := OffloadResult{Topic: topic.String()}
	before, err := c.topicStatus(ctx, topic)
	if err != nil {
		return res, err
	}
	switch {
	case before.Offloadable.Segments == 0:
		res.Skipped = "no closed segment left in BookKeeper"
		return res, nil
	case before.offloadTo.LedgerID == 0:
		// Offloading up to a position in the last closed segment would
		// leave that segment behind: wait for the broker to open the next.
		res.Skipped = "the topic has no open segment right now (being reloaded?); run again"
		return res, nil
	}
	if err := c.preflight(ctx, topic); err != nil {
		return res, err
	}
	if err := c.trigger(ctx, topic, OffloadTarget(before)); err != nil {
		return res, err
	}
	var bar *progress.Bar
	if c.opts.ErrOut != nil {
		bar = progress.New(c.opts.ErrOut, "offload "+topic.String(), "B", before.Offloadable.Bytes)
		defer bar.Finish()
	}
	wait := c.opts.Wait
	if wait <= 0 {
		wait = 10 * time.Minute
	}
	poll := c.opts.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	var settle time.Time // when the broker first said SUCCESS
	for {
		now, err := c.topicStatus(ctx, topic)
		if err != nil {
			return res, err
		}
		res.Offloaded = movedSince(before, now)
		if bar != nil {
			bar.Set(res.Offloaded.Bytes)
		}
		switch utils.Status(now.OffloadStatus) {
		case utils.SUCCESS:
			// The broker reports SUCCESS a moment before the topic's stats
			// mark the last segment offloaded: give the stats a few seconds
			// to agree before reporting what moved.
			if settle.IsZero() {
				settle = time.Now()
			}
			if res.Offloaded.Segments >= before.Offloadable.Segments || time.Since(settle) > 10*time.Second {
				return res, nil
			}
		case utils.ERROR:
			return res, &OffloadError{Topic: topic.String(), Reason: now.LastError, Setting: now.Setting}
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("waiting for the offload of %s: still %s after %s (%d of %d bytes moved)",
				topic, now.OffloadStatus, wait, res.Offloaded.Bytes, before.Offloadable.Bytes)
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("waiting for the offload of %s: %w", topic, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// movedSince is what went from before's closed BookKeeper segments to
// tiered storage by now.
func movedSince(before, now TopicStatus) Amount {
	var moved Amount
	for id := range before.pending {
		if _, still := now.pending[id]; !still {
			moved.add(0, before.pending[id])
		}
	}
	// Entries come from the totals: segments are whole, so the offloaded
	// entries grew by exactly the moved segments' entries.
	moved.Entries = now.Offloaded.Entries - before.Offloaded.Entries
	return moved
}

// OffloadTarget is the message id to offload st's topic up to: the first
// position of its open segment, so that every closed segment goes.
func OffloadTarget(st TopicStatus) utils.MessageID { return st.offloadTo }

// trigger asks the broker to offload everything before upTo. An offload
// already running (409) is waited for like our own.
func (c *cluster) trigger(ctx context.Context, topic *utils.TopicName, upTo utils.MessageID) error {
	ctx, cancel := context.WithTimeout(ctx, pulsarx.Timeout)
	defer cancel()
	err := c.pulsar.Admin.Topics().OffloadWithContext(ctx, *topic, upTo)
	if err != nil && !pulsarx.IsConflict(err) {
		return fmt.Errorf("asking the broker to offload %s up to %d:%d: %w", topic, upTo.LedgerID, upTo.EntryID, err)
	}
	return nil
}

// effectivePolicy is the part of a topic's applied offload policy that says
// where segments go.
type effectivePolicy struct {
	Driver   string `json:"managedLedgerOffloadDriver"`
	Bucket   string `json:"managedLedgerOffloadBucket"`
	Endpoint string `json:"managedLedgerOffloadServiceEndpoint"`
}

// preflight reads the topic's applied offload policy (topic, namespace and
// broker settings merged) and checks that the S3 endpoint answers HTTP.
// Without it a stopped S3 server shows only after the broker's retries.
func (c *cluster) preflight(ctx context.Context, topic *utils.TopicName) error {
	policy, err := c.appliedPolicy(ctx, topic)
	if err != nil {
		return err
	}
	if policy.Driver == "" {
		return fmt.Errorf("offloading %s: the broker has no offload driver (managedLedgerOffloadDriver is empty; scripts/stack sets S3): %w", topic, ErrNotConfigured)
	}
	if policy.Endpoint == "" {
		return nil // a cloud driver with its default endpoint: nothing local to check
	}
	if err := CheckEndpoint(ctx, policy.Endpoint); err != nil {
		return fmt.Errorf("offloading %s: %w", topic, err)
	}
	return nil
}

func (c *cluster) appliedPolicy(ctx context.Context, topic *utils.TopicName) (effectivePolicy, error) {
	var policy effectivePolicy
	// The Go admin client has no "applied" read of a topic's offload
	// policy, so ask the REST endpoint directly.
	url := fmt.Sprintf("%s/admin/v2/%s/offloadPolicies?applied=true", strings.TrimRight(c.opts.Services.PulsarAdminURL, "/"), topic.GetRestPath())
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return policy, fmt.Errorf("reading offload policy of %s: %w", topic, err)
	}
	if err := c.opts.Services.AuthorizePulsar(req); err != nil {
		return policy, fmt.Errorf("reading offload policy of %s: %w", topic, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return policy, fmt.Errorf("reading offload policy of %s: %w", topic, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return policy, fmt.Errorf("reading offload policy of %s: broker answered %s", topic, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&policy); err != nil {
		return policy, fmt.Errorf("decoding offload policy of %s: %w", topic, err)
	}
	return policy, nil
}

// CheckEndpoint fails, naming the setting, when nothing answers HTTP at the
// offload endpoint within a few seconds. Any HTTP answer (an anonymous
// request gets 403) counts: the check is for a server, not for access.
func CheckEndpoint(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return fmt.Errorf("%w: managedLedgerOffloadServiceEndpoint %q is not a URL: %v", ErrNotConfigured, endpoint, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: the S3 endpoint %s (managedLedgerOffloadServiceEndpoint) does not answer: %v; start the S3 server with %s s3",
			services.ErrUnreachable, endpoint, err, services.StartHint)
	}
	resp.Body.Close()
	return nil
}
