package config

import (
	"fmt"
	"path/filepath"
	"slices"

	"gopkg.in/yaml.v3"

	promconfig "github.com/prometheus/common/config"
)

// deprecatedKeys is a source configuration that still takes keys of earlier
// releases (the HTTP sources' tls, headers, bearer_token), each reported as
// "key: deprecated, ...".
type deprecatedKeys interface{ Deprecated() []error }

// hinted is a source configuration that can tell a valid value that is
// likely wrong (a Graphite target taking perSecond of carbon's own counts
// per interval), each reported as "key: why".
type hinted interface{ Hints() []error }

// deprecations lists the deprecated keys of every backend's source, and
// its hints, as FieldErrors at their lines: warnings, which do not stop loading.
func deprecations(root *yaml.Node, cfg *Config) []*FieldError {
	var out []*FieldError
	for i := range cfg.Backends {
		b := &cfg.Backends[i]
		var warnings []error
		if d, ok := b.Source.Config().(deprecatedKeys); ok {
			warnings = append(warnings, d.Deprecated()...)
		}
		if h, ok := b.Source.Config().(hinted); ok {
			warnings = append(warnings, h.Hints()...)
		}
		for _, w := range warnings {
			for _, p := range b.inBackend(i, keyed(fmt.Errorf("source: %s: %w", b.Source.Kind(), w), "source", b.Source.Kind())) {
				p.Line = lineOf(root, p.keys)
				out = append(out, p)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *FieldError) int { return a.Line - b.Line })
	return out
}

// warningLines writes each warning as "file:line: warning: message".
func warningLines(name string, warnings []*FieldError) []string {
	var out []string
	for _, w := range warnings {
		if w.Line > 0 {
			out = append(out, fmt.Sprintf("%s:%d: warning: %v", name, w.Line, w))
		} else {
			out = append(out, fmt.Sprintf("%s: warning: %v", name, w))
		}
	}
	return out
}

// setDirectories makes the relative paths of the sources' HTTP settings
// and peer_client's (password_file, tls_config.ca_file, ...) relative to the directory of the
// configuration file, as Prometheus does with its own.
func setDirectories(cfg *Config, dir string) {
	for i := range cfg.Backends {
		if d, ok := cfg.Backends[i].Source.Config().(promconfig.DirectorySetter); ok {
			d.SetDirectory(dir)
		}
	}
	cfg.PeerClient.HTTP.SetDirectory(dir)
}

// finishLoad completes a configuration parsed from the file name into the
// tree root: relative paths (the sources' and web_config_file), and the
// warnings as lines.
func finishLoad(name string, root *yaml.Node, cfg *Config) {
	setDirectories(cfg, filepath.Dir(name))
	cfg.WebConfigFile = promconfig.JoinDir(filepath.Dir(name), cfg.WebConfigFile)
	cfg.Warnings = warningLines(name, deprecations(root, cfg))
}

// promPlain is the type yaml.v3 names in a type error inside the HTTP
// settings: prometheus/common decodes its Secret (a string) and its structs
// (basic_auth, tls_config, oauth2) each through a local type "plain".
const promPlain = "config.plain"

// promSecretKeys are the keys of prometheus/common's HTTP settings that hold
// a Secret.
var promSecretKeys = map[string]bool{"password": true, "credentials": true, "bearer_token": true,
	"client_secret": true, "client_certificate_key": true, "key": true, "secrets": true}

// promPlainKind says what the key, under which a "config.plain" failed to
// decode, takes.
func promPlainKind(key string) string {
	if promSecretKeys[key] {
		return "a string"
	}
	return "a mapping"
}
