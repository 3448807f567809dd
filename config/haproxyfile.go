package config

import (
	"errors"
	"slices"

	"github.com/haproxy-weighter/haproxy-weighter/haproxycfg"
)

// HAProxyFileWarnings reads the HAProxy configuration files that
// haproxy.config_file names (the top-level one for the backends on the
// top-level socket, a backend's own `haproxy:` block's for that backend: a
// socket of its own is another HAProxy, with its own file) and returns what
// in them keeps the HAProxy backends from being weighted
// (haproxycfg.File.Check). A backend without a file is not checked; a file
// that cannot be read or is not an HAProxy configuration is an error naming
// it, and the other files are still checked.
func (c *Config) HAProxyFileWarnings() ([]haproxycfg.Warning, error) {
	var warnings []haproxycfg.Warning
	var problems []error
	for _, f := range c.HAProxyFileChecks() {
		warnings = append(warnings, f.Warnings...)
		if f.Err != nil {
			problems = append(problems, f.Err)
		}
	}
	return warnings, errors.Join(problems...)
}

// HAProxyFileCheck is one HAProxy configuration file's check: its warnings,
// or why it could not be read.
type HAProxyFileCheck struct {
	Path     string
	Warnings []haproxycfg.Warning
	Err      error
}

// HAProxyFileChecks is HAProxyFileWarnings file by file, in the order of
// the backends that name them.
func (c *Config) HAProxyFileChecks() []HAProxyFileCheck {
	var files []string
	byFile := map[string][]haproxycfg.Expected{}
	for i := range c.Backends {
		b := &c.Backends[i]
		s := c.SocketOf(b)
		if b.IPVS != nil || s.ConfigFile == "" {
			continue
		}
		if _, seen := byFile[s.ConfigFile]; !seen {
			files = append(files, s.ConfigFile)
		}
		socket := s.Socket
		if s.Master {
			socket = "" // the master CLI is haproxy -S's, not the file's
		}
		byFile[s.ConfigFile] = append(byFile[s.ConfigFile], b.haproxyExpectations(socket))
	}
	checks := make([]HAProxyFileCheck, 0, len(files))
	for _, path := range files {
		check := HAProxyFileCheck{Path: path}
		if f, err := haproxycfg.Read(path); err != nil {
			check.Err = err
		} else {
			check.Warnings = f.Check(byFile[path])
		}
		checks = append(checks, check)
	}
	return checks
}

// haproxyExpectations is what the daemon will do with HAProxy backend b on
// socket ("": a socket the file does not declare), as haproxycfg checks it:
// the servers expected are server_map's targets, when they are names.
func (b *Backend) haproxyExpectations(socket string) haproxycfg.Expected {
	var servers []string
	statBytes := false
	if b.Source.Kind() != "" {
		// With match: address, server_map's targets are addresses, not names.
		for _, s := range b.Source.serverMap() {
			if b.MatchesAddress() {
				break
			}
			if s != "" && !slices.Contains(servers, s) {
				servers = append(servers, s)
			}
		}
		_, bytes := b.Source.fastBytes()
		statBytes = b.Source.NeedsHAProxy() && bytes
	}
	slices.Sort(servers)
	pin, policy, _ := b.PinSettings()
	return haproxycfg.Expected{Name: b.Name, Socket: socket, Servers: servers, StatBytes: statBytes, FastSignal: b.UsesFastSignal(),
		Pin: pin == PinOn, PinIfTable: pin == PinAuto, PinShared: policy.Shared}
}
