package cqlsession

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// TestWithinGivesUpOnACreateThatNeverReturns: a create that blocks (as
// gocql's does when its failed set-up deadlocks closing itself) costs the
// caller the limit, not forever, and the error says so.
func TestWithinGivesUpOnACreateThatNeverReturns(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	s, err := within(func() (*gocql.Session, error) {
		<-release
		return nil, errors.New("released")
	}, 50*time.Millisecond)
	if !errors.Is(err, ErrStuck) || s != nil {
		t.Fatalf("within = %v, %v; want ErrStuck and no session", s, err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("returned after %s, want about the 50ms limit", waited)
	}
}

// TestWithinPassesOnWhatCreateReturns: a create that returns in time is
// the answer, error and all.
func TestWithinPassesOnWhatCreateReturns(t *testing.T) {
	refused := errors.New("refused")
	if _, err := within(func() (*gocql.Session, error) { return nil, refused }, time.Minute); !errors.Is(err, refused) {
		t.Fatalf("within = %v, want the create's own error", err)
	}
}

// TestCreateFailsOnAServerThatNeverAnswers: a port that accepts
// connections and never answers the start-up fails Create with gocql's own
// error, well within Limit.
func TestCreateFailsOnAServerThatNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	cluster := gocql.NewCluster(ln.Addr().String())
	cluster.ConnectTimeout, cluster.Timeout = 200*time.Millisecond, 200*time.Millisecond
	cluster.ProtoVersion = 4
	if _, err := Create(cluster); err == nil || errors.Is(err, ErrStuck) {
		t.Fatalf("Create = %v, want gocql's start-up error", err)
	}
}

// TestLimit: the bound grows with the cluster's timeouts and has a floor.
func TestLimit(t *testing.T) {
	c := gocql.NewCluster("127.0.0.1")
	c.ConnectTimeout, c.Timeout = 10*time.Second, 30*time.Second
	if got := Limit(c); got != 80*time.Second {
		t.Errorf("Limit = %s, want 80s", got)
	}
	c.ConnectTimeout, c.Timeout = time.Second, time.Second
	if got := Limit(c); got != 30*time.Second {
		t.Errorf("Limit = %s, want the 30s floor", got)
	}
}
