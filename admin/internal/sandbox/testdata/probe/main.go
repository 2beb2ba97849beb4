// Command probe is the confined process of the sandbox tests: it tries
// what a hostile function would, and prints, as JSON, the error of each
// attempt ("" when it worked).
//
//	probe SECRET-FILE DIR TCP-ADDRESS OTHER-PID UNIX-SOCKET
package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Probe is what the process found it could do.
type Probe struct {
	Env          []string
	ReadFile     string
	ListDir      string
	WriteFile    string
	Connect      string
	ConnectMPTCP string
	ConnectUnix  string
	Exec         string
	TimeZone     string
	Signal       string
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func dial(addr string, mptcp bool) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	d.SetMultipathTCP(mptcp)
	c, err := d.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err
}

func main() {
	secret, dir, addr := os.Args[1], os.Args[2], os.Args[3]
	other, err := strconv.Atoi(os.Args[4])
	if err != nil {
		panic(err)
	}
	var p Probe
	p.Env = os.Environ()
	_, err = os.ReadFile(secret)
	p.ReadFile = errText(err)
	_, err = os.ReadDir(dir)
	p.ListDir = errText(err)
	p.WriteFile = errText(os.WriteFile(filepath.Join(dir, "written"), []byte("x"), 0o600))
	p.Connect = errText(dial(addr, false))
	// Multipath TCP, which Landlock does not refuse on Linux 6.18.
	p.ConnectMPTCP = errText(dial(addr, true))
	sh := exec.Command("/bin/sh", "-c", "true")
	sh.Stdin, sh.Stdout, sh.Stderr = os.Stdin, os.Stderr, os.Stderr // no /dev/null to open
	p.Exec = errText(sh.Run())
	// A named Unix socket of the caller's (the Docker daemon's, the
	// user's D-Bus: Landlock has no right over connecting to one).
	if c, err := net.Dial("unix", os.Args[5]); err != nil {
		p.ConnectUnix = errText(err)
	} else {
		c.Close()
	}
	_, err = time.LoadLocation("Europe/Paris")
	p.TimeZone = errText(err)
	// SIGURG, whose default action is to ignore it, to a process of the
	// caller's (Landlock lets a process signal its parent).
	p.Signal = errText(syscall.Kill(other, syscall.SIGURG))
	if err := json.NewEncoder(os.Stdout).Encode(p); err != nil {
		panic(err)
	}
}
