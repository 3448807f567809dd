package sources

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	promconfig "github.com/prometheus/common/config"
)

// dialTargets lists the addresses (host:port) a source's client may dial:
// its url's, its proxy's, and oauth2's token_url's and proxy's. nil allows
// any: a proxy from the environment, whose address is not known here (the
// dial then reaches only that proxy), or a host name that is not ASCII
// (net/http dials its IDNA form).
//
// Why: prometheus/common's OAuth2 token client follows every redirect, a
// 307 to another host with the client secret in the body it sends again.
// The source's own client refuses a redirect elsewhere (redirectPolicy);
// the token client's reaches the dial, which refuses it here.
func dialTargets(h promconfig.HTTPClientConfig, u *url.URL) map[string]bool {
	if h.ProxyFromEnvironment || (h.OAuth2 != nil && h.OAuth2.ProxyFromEnvironment) {
		return nil
	}
	out := map[string]bool{}
	urls := []*url.URL{u, h.ProxyURL.URL}
	if o := h.OAuth2; o != nil {
		t, err := url.Parse(o.TokenURL)
		if err != nil {
			return nil // the token request fails on its own, and says why
		}
		urls = append(urls, t, o.ProxyURL.URL)
	}
	for _, v := range urls {
		if v == nil || v.Host == "" {
			continue
		}
		for _, c := range v.Hostname() {
			if c >= 0x80 {
				return nil
			}
		}
		out[hostPort(v)] = true
	}
	return out
}

// hostPort is u's host and port (the scheme's default when absent), in lower case.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// checkDialTarget refuses addr when targets (non-nil) do not list it.
func checkDialTarget(targets map[string]bool, addr string) error {
	if targets == nil {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err == nil && targets[net.JoinHostPort(strings.ToLower(host), port)] {
		return nil
	}
	return fmt.Errorf("dial %s refused: not the address of url, proxy_url or oauth2's token_url (a redirect elsewhere, which would take the credentials along)", addr)
}
