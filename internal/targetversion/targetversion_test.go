package targetversion

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestConstantsMatchTheStackScripts checks that the constants name the
// releases scripts/lib.sh fetches for the local stack.
func TestConstantsMatchTheStackScripts(t *testing.T) {
	lib := filepath.Join("..", "..", "scripts", "lib.sh")
	script, err := os.ReadFile(lib)
	if err != nil {
		t.Fatalf("reading the stack's settings: %v", err)
	}
	tests := []struct {
		name     string
		variable string
		constant string
	}{
		{name: "pulsar", variable: "PULSAR_VERSION", constant: Pulsar},
		{name: "cassandra", variable: "CASSANDRA_VERSION", constant: Cassandra},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// PULSAR_VERSION="${PULSAR_VERSION:-4.0.8}"
			re := regexp.MustCompile(`(?m)^` + tt.variable + `="\$\{` + tt.variable + `:-([^}"]+)\}"$`)
			m := re.FindAllSubmatch(script, -1)
			if len(m) != 1 {
				t.Fatalf("%s: want one default of %s like %s=\"${%s:-X.Y.Z}\", found %d", lib, tt.variable, tt.variable, tt.variable, len(m))
			}
			if got := string(m[0][1]); got != tt.constant {
				t.Errorf("%s fetches %s %s, but the Go constant says %s: change both together", lib, tt.name, got, tt.constant)
			}
		})
	}
}
