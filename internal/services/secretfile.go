package services

import (
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/foldline/foldline/internal/plainfile"
)

// warned holds the paths WarnShared warned about: one warning per file
// and process, however often the file is read.
var warned sync.Map

// WarnShared warns, on standard error (slog's default logger), when a file
// that holds a secret may be read by its group or others: a token, a
// password or a key should be its owner's only. It is a warning, not an
// error: a Kubernetes Secret mount is 0644 unless its defaultMode says
// otherwise, and the pod may be the only user.
func WarnShared(path string, info fs.FileInfo) {
	if info == nil || !plainfile.SharedMode(info.Mode()) {
		return
	}
	if _, dup := warned.LoadOrStore(path, true); dup {
		return
	}
	slog.Warn("a file that holds a secret is readable by other users than its owner: chmod 600 it (a Kubernetes secret: defaultMode 0400)",
		"file", path, "mode", info.Mode().Perm().String())
}

// warnSharedSecretFiles applies WarnShared to every file-valued secret
// setting that is set (SecretFile): the token, the signing key, the
// passwords and private keys.
func (s *Services) warnSharedSecretFiles() {
	for i := range Settings {
		st := &Settings[i]
		if !st.SecretFile {
			continue
		}
		path := *st.field(s)
		if path == "" {
			continue
		}
		if info, err := os.Stat(path); err == nil { // following links, as the readers do
			WarnShared(path, info)
		}
	}
}
