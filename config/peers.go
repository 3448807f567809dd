package config

import (
	"errors"
	"fmt"
	"net/url"
)

// peerProblem is one invalid entry of peers, by its index.
type peerProblem struct {
	index int
	err   error
}

// checkPeers checks each peer URL: http or https, with a host, no query or
// fragment (the daemon appends its own path), and none listed twice. A peer
// reads this daemon's readings from listen, so peers without listen is an
// error too.
func (c *Config) checkPeers() []peerProblem {
	var out []peerProblem
	seen := map[string]bool{}
	for i, raw := range c.Peers {
		if err := checkPeerURL(raw); err != nil {
			out = append(out, peerProblem{i, fmt.Errorf("peers: %w", err)})
			continue
		}
		if seen[raw] {
			out = append(out, peerProblem{i, fmt.Errorf("peers: %q is listed twice", raw)})
		}
		seen[raw] = true
	}
	if len(c.Peers) > 0 && c.Listen == "" {
		out = append(out, peerProblem{0, errors.New(`peers: need listen (the peers read this daemon's readings from it); listen is ""`)})
	}
	return out
}

// checkPeerURL never shows a password written in raw: its message reaches
// validate's output and a refused reload's log line.
func checkPeerURL(raw string) error {
	u, err := url.Parse(raw)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return fmt.Errorf("not a URL: %w", ue.Err) // ue's text quotes raw
	} else if err != nil {
		return errors.New("not a URL")
	}
	if u.User != nil {
		raw = u.Redacted()
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want http://host:port or https://host:port (another daemon's listen address)", raw)
	case u.Host == "":
		return fmt.Errorf("%q: no host", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q: no user, query or fragment (the daemon adds its own path)", raw)
	}
	return nil
}
