package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/verify"
	"github.com/foldline/foldline/internal/cqlname"
)

// TestVerifyFindsRowsChangedByHand: verify folds the ledger through the
// view's path locally and finds the table consistent; rows corrupted,
// deleted and added by hand are found, each as what it is, with the key.
func TestVerifyFindsRowsChangedByHand(t *testing.T) {
	s := deployShop(t, "verify")
	s.ingest(t, generate(t, 2000, 61))
	s.waitForFold(t, 3*time.Minute)
	opts := verify.Options{Command: s.opts.Command, View: "user_activity", CacheDir: s.opts.CacheDir}

	res, err := verify.Run(t.Context(), opts)
	if err != nil {
		t.Fatalf("verify of a table equal to the fold: %v (%+v)", err, res)
	}
	want := s.expected()
	if res.ConsistencyPercent != 100 || res.Consistent != len(want.UserActivity) || res.Events != int64(len(s.ledger)) || res.DeadLetters["validate"] != int64(len(want.Rejected)) {
		t.Fatalf("verify: %+v; want %d consistent rows of %d events, %d dead letters", res, len(want.UserActivity), len(s.ledger), len(want.Rejected))
	}

	var users []string
	for u := range want.UserActivity {
		users = append(users, u)
	}
	table := cqlname.Table(s.keyspace, "user_activity_v1")
	for _, q := range []string{
		fmt.Sprintf(`UPDATE %s SET page_views = 999999 WHERE "user" = '%s'`, table, users[0]),
		fmt.Sprintf(`DELETE FROM %s WHERE "user" = '%s'`, table, users[1]),
		fmt.Sprintf(`INSERT INTO %s ("user", page_views) VALUES ('intruder', 1)`, table),
	} {
		if err := s.session.Query(q).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	res, err = verify.Run(t.Context(), opts)
	if !errors.Is(err, verify.ErrInconsistent) {
		t.Fatalf("verify after changes by hand: %v", err)
	}
	if res.Different != 1 || res.Missing != 1 || res.Extra != 1 || res.Consistent != len(want.UserActivity)-2 {
		t.Errorf("verify: %d different, %d missing, %d extra, %d consistent; want 1, 1, 1, %d", res.Different, res.Missing, res.Extra, res.Consistent, len(want.UserActivity)-2)
	}
	keys := map[string]string{}
	for _, e := range res.Examples {
		keys[e.Kind] = e.Key
	}
	if keys["different"] != users[0] || keys["missing"] != users[1] || keys["extra"] != "intruder" {
		t.Errorf("examples %+v; want %s different, %s missing, intruder extra", res.Examples, users[0], users[1])
	}
	t.Logf("verify: %.2f%% consistent, examples %+v", res.ConsistencyPercent, res.Examples)

	// --sample reads rows one by one: the corrupted and deleted ones are
	// among all of them.
	sample := opts
	sample.Sample = len(want.UserActivity)
	res, err = verify.Run(t.Context(), sample)
	if !errors.Is(err, verify.ErrInconsistent) || res.Different != 1 || res.Missing != 1 || res.Extra != 0 {
		t.Errorf("verify --sample all: %v, %+v", err, res)
	}

	// --every: the result as metrics.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	ran := make(chan struct{}, 10)
	go func() {
		done <- verify.Schedule(ctx, opts, time.Hour, addr, func(*verify.Result, error) { ran <- struct{}{} })
	}()
	<-ran
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	<-done
	for _, want := range []string{`foldline_verify_consistency_percent{view="user_activity"}`, `foldline_verify_rows{outcome="different",view="user_activity"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}
