package services

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/foldline/foldline/internal/plainfile"
)

// ConfigFile is the file of named contexts, like kubectl's kubeconfig or
// pulsarctl's contexts: each context is a cluster to connect to, with the
// same settings as the flags (see Settings), in two sections:
//
//	current-context: prod
//	contexts:
//	  - name: prod
//	    pulsar:
//	      url: pulsar+ssl://broker.example.com:6651
//	      admin-url: https://broker.example.com:8443
//	      token-file: /etc/foldline/prod.token
//	      tls-trust-certs-file: /etc/foldline/ca.pem
//	    cassandra:
//	      hosts: [cassandra-1.example.com:9042, cassandra-2.example.com:9042]
//	      user: foldline
//	      password-file: /etc/foldline/cassandra.password
//	      tls-ca-file: /etc/foldline/ca.pem
//
// A key is the setting's flag without its section prefix (pulsar-url is
// pulsar.url). Unknown keys are errors, with their line.
type ConfigFile struct {
	// Path is where the file was read from.
	Path string
	// CurrentContext is the context used when none is named.
	CurrentContext string
	// Contexts in file order.
	Contexts []Context
}

// Context is one named set of settings.
type Context struct {
	Name string
	// Line is where the context starts in the file.
	Line int
	// Values maps a setting's Key to its value.
	Values map[string]ContextValue
}

// ContextValue is one setting of a context, with the line that holds it.
type ContextValue struct {
	Value string
	Line  int
}

// Find returns the context named name, or nil.
func (f *ConfigFile) Find(name string) *Context {
	for i := range f.Contexts {
		if f.Contexts[i].Name == name {
			return &f.Contexts[i]
		}
	}
	return nil
}

// maxConfigBytes bounds the config file: it is small, and reading is
// refused rather than running out of memory on a wrong path.
const maxConfigBytes = 1 << 20

// configPath is the config file's path: FOLDLINE_CONFIG, else
// config.yaml in foldline's config folder (configDir).
func configPath(getenv func(string) string) string {
	if p := getenv(ConfigSetting.Env); p != "" {
		return p
	}
	dir := configDir(getenv)
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "config.yaml")
}

// configDir is foldline's folder in the user's config folder:
// $XDG_CONFIG_HOME/foldline, else ~/.config/foldline ("" without a home).
func configDir(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "foldline")
}

// ConfigDir is foldline's folder in the user's config folder, from the
// environment: where the default config file and the key that signs
// prebuilt binaries live.
func ConfigDir() string { return configDir(os.Getenv) }

// ConfigPath is the config file's path from the environment.
func ConfigPath() string { return configPath(os.Getenv) }

// readConfigFile reads the config file; it returns nil and no error when
// the default file does not exist (a file named by FOLDLINE_CONFIG must).
func readConfigFile(getenv func(string) string) (*ConfigFile, error) {
	path := configPath(getenv)
	if path == "" {
		return nil, nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && getenv(ConfigSetting.Env) == "" {
		return nil, nil
	}
	return ReadConfigFile(path)
}

// ReadConfigFile reads the config file at path. It warns (WarnShared) when
// the file holds a secret setting and others than its owner may read it.
func ReadConfigFile(path string) (*ConfigFile, error) {
	data, info, err := readSmallFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the config file: %w", ErrConfig, err)
	}
	f, err := ParseConfigFile(path, data)
	if err != nil {
		return nil, err
	}
	if f.holdsSecret() {
		WarnShared(path, info)
	}
	return f, nil
}

// holdsSecret says whether a context of the file sets a Secret setting.
func (f *ConfigFile) holdsSecret() bool {
	for i := range Settings {
		if !Settings[i].Secret {
			continue
		}
		for _, c := range f.Contexts {
			if _, ok := c.Values[Settings[i].Key]; ok {
				return true
			}
		}
	}
	return false
}

// readSmallFile reads a regular file of at most maxConfigBytes, following
// symbolic links: a Kubernetes Secret or ConfigMap mount is a link to
// ..data/NAME, which links to a folder of the current version. What the
// links lead to must be a regular file.
func readSmallFile(path string) ([]byte, fs.FileInfo, error) {
	return plainfile.ReadLinked(path, maxConfigBytes)
}

// ParseConfigFile parses a config file's content; errors name path, line
// and key.
func ParseConfigFile(path string, data []byte) (*ConfigFile, error) {
	f := &ConfigFile{Path: path}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	if len(doc.Content) == 0 {
		return f, nil
	}
	bad := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrConfig, path, n.Line, fmt.Sprintf(format, args...))
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, bad(root, "want a mapping with current-context and contexts")
	}
	known := map[string]bool{}
	for i := range Settings {
		known[Settings[i].Key] = true
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "current-context":
			if v.Kind != yaml.ScalarNode {
				return nil, bad(v, "current-context: want a context's name")
			}
			f.CurrentContext = v.Value
		case "contexts":
			if v.Kind != yaml.SequenceNode {
				return nil, bad(v, "contexts: want a list of contexts")
			}
			for j, c := range v.Content {
				ctx, err := parseContext(c, fmt.Sprintf("contexts[%d]", j), known, bad)
				if err != nil {
					return nil, err
				}
				if f.Find(ctx.Name) != nil {
					return nil, bad(c, "contexts[%d].name: context %q is defined twice", j, ctx.Name)
				}
				f.Contexts = append(f.Contexts, ctx)
			}
		default:
			return nil, bad(k, "%s: unknown key (want current-context or contexts)", k.Value)
		}
	}
	if f.CurrentContext != "" && f.Find(f.CurrentContext) == nil {
		return nil, fmt.Errorf("%w: %s: current-context %q is not one of the contexts", ErrConfig, path, f.CurrentContext)
	}
	return f, nil
}

func parseContext(n *yaml.Node, where string, known map[string]bool, bad func(*yaml.Node, string, ...any) error) (Context, error) {
	ctx := Context{Line: n.Line, Values: map[string]ContextValue{}}
	if n.Kind != yaml.MappingNode {
		return ctx, bad(n, "%s: want a mapping with name, pulsar and cassandra", where)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				return ctx, bad(v, "%s.name: want a name", where)
			}
			ctx.Name = v.Value
		case "pulsar", "cassandra":
			if v.Kind != yaml.MappingNode {
				return ctx, bad(v, "%s.%s: want a mapping of settings", where, k.Value)
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				sk, sv := v.Content[j], v.Content[j+1]
				key := k.Value + "." + sk.Value
				if !known[key] {
					return ctx, bad(sk, "%s.%s: unknown setting (foldline config --help lists them)", where, key)
				}
				value, err := settingValue(sv)
				if err != nil {
					return ctx, bad(sv, "%s.%s: %v", where, key, err)
				}
				ctx.Values[key] = ContextValue{Value: value, Line: sv.Line}
			}
		default:
			return ctx, bad(k, "%s.%s: unknown key (want name, pulsar or cassandra)", where, k.Value)
		}
	}
	if ctx.Name == "" {
		return ctx, bad(n, "%s: a context needs a name", where)
	}
	return ctx, nil
}

// settingValue reads a scalar, or a list of scalars (contact points) joined
// with commas.
func settingValue(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode || strings.Contains(c.Value, ",") {
				return "", errors.New("want a list of host:port")
			}
			parts = append(parts, c.Value)
		}
		return strings.Join(parts, ","), nil
	}
	return "", errors.New("want a value or a list of values")
}

// UseContext makes name the current context of the config file at path,
// keeping the rest of the file (and its comments) as it is.
func UseContext(path, name string) error {
	data, _, err := readSmallFile(path)
	if err != nil {
		return fmt.Errorf("reading the config file: %w", err)
	}
	f, err := ParseConfigFile(path, data)
	if err != nil {
		return err
	}
	if f.Find(name) == nil {
		return fmt.Errorf("%w: context %q is not in %s (foldline config get-contexts lists them)", ErrConfig, name, path)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	root := doc.Content[0]
	set := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "current-context" {
			root.Content[i+1].SetString(name)
			set = true
		}
	}
	if !set {
		k, v := &yaml.Node{}, &yaml.Node{}
		k.SetString("current-context")
		v.SetString(name)
		root.Content = append([]*yaml.Node{k, v}, root.Content...)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encoding the config file: %w", err)
	}
	return writeFileAtomic(path, out.Bytes())
}

// writeFileAtomic replaces path's content by data, readable by its owner
// only (the file may hold tokens and passwords).
func writeFileAtomic(path string, data []byte) error {
	if err := plainfile.WriteAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	return nil
}
