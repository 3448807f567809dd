package config

import (
	"slices"

	"github.com/haproxy-weighter/haproxy-weighter/haproxycfg"
)

// HAProxyFileWarnings reads the HAProxy configuration file haproxy.config_file
// names and returns what in it keeps the HAProxy backends from being weighted
// (haproxycfg.File.Check). Without the key it returns nothing; a file that
// cannot be read or is not an HAProxy configuration is an error naming it.
func (c *Config) HAProxyFileWarnings() ([]haproxycfg.Warning, error) {
	if c.HAProxy.ConfigFile == "" {
		return nil, nil
	}
	f, err := haproxycfg.Read(c.HAProxy.ConfigFile)
	if err != nil {
		return nil, err
	}
	var backends []haproxycfg.Backend
	for _, b := range c.Backends {
		if b.IPVS != nil {
			continue
		}
		var servers []string
		statBytes := false
		if k := b.Source.kind; k != nil {
			for _, s := range k.ServerMap(b.Source.Config()) {
				if s != "" && !slices.Contains(servers, s) {
					servers = append(servers, s)
				}
			}
			_, bytes := k.FastBytes(b.Source.Config())
			statBytes = k.ReadsHAProxy && bytes
		}
		slices.Sort(servers)
		backends = append(backends, haproxycfg.Backend{Name: b.Name, Socket: c.HAProxy.Socket, Servers: servers,
			StatBytes: statBytes})
	}
	return f.Check(backends), nil
}
