package ui

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The page answers only requests meant for the address it listens on: a
// page that rebinds its own name to 127.0.0.1 sends that name as Host, and
// a cross-site request its site as Origin.
func TestGuardHostsRefusesOtherHostsAndOrigins(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8088}
	other := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8088}
	cases := []struct {
		name   string
		addr   net.Addr
		allow  []string
		host   string
		origin string
		want   int
	}{
		{name: "127.0.0.1 with the port", addr: loopback, host: "127.0.0.1:8088", want: http.StatusOK},
		{name: "localhost with the port", addr: loopback, host: "localhost:8088", want: http.StatusOK},
		{name: "LOCALHOST, any case", addr: loopback, host: "LocalHost:8088", want: http.StatusOK},
		{name: "[::1] with the port", addr: loopback, host: "[::1]:8088", want: http.StatusOK},
		{name: "same-origin fetch", addr: loopback, host: "localhost:8088", origin: "http://localhost:8088", want: http.StatusOK},
		{name: "rebound name", addr: loopback, host: "attacker.example:8088", want: http.StatusMisdirectedRequest},
		{name: "rebound name, same origin as itself", addr: loopback, host: "attacker.example:8088", origin: "http://attacker.example:8088", want: http.StatusMisdirectedRequest},
		{name: "another port", addr: loopback, host: "localhost:9999", want: http.StatusMisdirectedRequest},
		{name: "no port (80)", addr: loopback, host: "localhost", want: http.StatusMisdirectedRequest},
		{name: "no Host", addr: loopback, host: "", want: http.StatusMisdirectedRequest},
		{name: "cross-site Origin", addr: loopback, host: "localhost:8088", origin: "http://attacker.example", want: http.StatusForbidden},
		{name: "Origin on another port", addr: loopback, host: "localhost:8088", origin: "http://localhost:9999", want: http.StatusForbidden},
		{name: "Origin null", addr: loopback, host: "localhost:8088", origin: "null", want: http.StatusForbidden},
		{name: "loopback names do not reach another address", addr: other, host: "localhost:8088", want: http.StatusMisdirectedRequest},
		{name: "the address listened on", addr: other, host: "10.1.2.3:8088", want: http.StatusOK},
		{name: "an allowed proxy name", addr: loopback, allow: []string{"ui.example.com"}, host: "ui.example.com", origin: "https://ui.example.com", want: http.StatusOK},
		{name: "an allowed name, another origin", addr: loopback, allow: []string{"ui.example.com"}, host: "ui.example.com", origin: "https://attacker.example", want: http.StatusForbidden},
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := guardHosts(tc.addr, tc.allow, ok)
			for _, path := range []string{"/", "/api/status"} {
				r := httptest.NewRequest(http.MethodGet, path, nil)
				r.Host = tc.host
				if tc.origin != "" {
					r.Header.Set("Origin", tc.origin)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != tc.want {
					t.Errorf("GET %s, Host %q, Origin %q: %d, want %d", path, tc.host, tc.origin, w.Code, tc.want)
				}
			}
		})
	}
}

// The server cuts off a client that trickles its request, never reads the
// answer or keeps an idle connection: no endpoint streams.
func TestHTTPServerHasTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler())
	for name, d := range map[string]int64{
		"ReadHeaderTimeout": int64(srv.ReadHeaderTimeout),
		"ReadTimeout":       int64(srv.ReadTimeout),
		"WriteTimeout":      int64(srv.WriteTimeout),
		"IdleTimeout":       int64(srv.IdleTimeout),
	} {
		if d <= 0 {
			t.Errorf("%s = %d, want a timeout", name, d)
		}
	}
}
