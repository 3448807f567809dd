package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// chain lists err and every error it wraps, so that a test can look past
// Error() into what a caller could unwrap and print.
func chain(err error) []error {
	if err == nil {
		return nil
	}
	out := []error{err}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		out = append(out, chain(u.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, chain(e)...)
		}
	}
	return out
}

// A value that does not decode was quoted in the error (whole, or its first 7
// characters): a password or token written with a wrong tag or in the wrong
// key ended up in validate's output and the daemon's log. The error names the
// key and the line, never the value.
func TestDecodeErrorsNeverQuoteTheValue(t *testing.T) {
	const secret = "s3cr3tvalue"
	prom := "backends:\n  - name: b\n    source:\n      prometheus:\n        url: http://127.0.0.1:9090\n        query: up\n"
	auth := prom + "        basic_auth:\n          username: u\n"
	for _, tc := range []struct{ yaml, want string }{
		{auth + "          password: !!int " + secret + "\n", "c.yml:9: password: not a valid !!int (the tag asks for one)"},
		{auth + "          password: !!float " + secret + "\n", "c.yml:9: password: not a valid !!float (the tag asks for one)"},
		{auth + "          password: !!bool " + secret + "\n", "c.yml:9: password: not a valid !!bool (the tag asks for one)"},
		{auth + "          password: !!timestamp " + secret + "\n", "c.yml:9: password: not a valid !!timestamp (the tag asks for one)"},
		{auth + "          password: !!binary " + secret + "\n", "c.yml:9: password: !!binary value contains invalid base64 data"},
		{auth + "          password: *" + secret + "\n", "c.yml:9: an alias (*name) refers to an anchor (&name) that is not defined: quote a value that starts with *"},
		{auth + "          password: [" + secret + "]\n", "c.yml:9: password: want a string, got a list"},
		{prom + "        basic_auth: {username: u, password: !!int " + secret + "}\n", "c.yml:7: password: not a valid !!int (the tag asks for one)"},
		{prom + "        timeout: " + secret + "\n", "c.yml:7: timeout: invalid duration (want e.g. 10s, 1m30s)"},
		{prom + "        bearer_token: {" + secret + ": x}\n", "c.yml:7: bearer_token: want a string, got a mapping"},
		{prom + "    max_weight: " + secret + "\n", "c.yml:7: max_weight: want an integer, got a string"},
		{prom + "    deadband: hunter2\n", "c.yml:7: deadband: want an integer, got a string"}, // short values were quoted whole
		// prometheus/common's URL quotes the whole value, a proxy's password too.
		{prom + "        proxy_url: http://u:" + secret + "@proxy:bad\n", `c.yml:7: proxy_url: not a valid URL: invalid port ":bad" after host`},
		{prom + "        oauth2:\n          client_id: a\n          token_url: http://t\n          proxy_url: http://u:" + secret + "@proxy:3128/%zz\n",
			`c.yml:10: proxy_url: not a valid URL: invalid URL escape "%zz"`},
		{"interval: " + secret + "\n" + prom[len("backends:\n"):], "c.yml:1: interval: invalid duration (want e.g. 10s, 1m30s)"},
	} {
		data := tc.yaml
		if !strings.HasPrefix(data, "backends:") && !strings.Contains(data, "\nbackends:") {
			data = strings.Replace(data, "\n", "\nbackends:\n", 1)
		}
		_, err := Parse("c.yml", []byte(data), noEnv)
		if err == nil {
			t.Errorf("accepted:\n%s", data)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("got  %q\nwant %q\nfor\n%s", err, tc.want, data)
		}
		for _, e := range chain(err) {
			for _, leak := range []string{"s3cr3t", "hunter"} {
				if msg := fmt.Sprintf("%+v", e); strings.Contains(msg, leak) {
					t.Errorf("the value shows in an error of the chain: %q", msg)
				}
			}
		}
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%T is not a *config.Error", err)
		}
	}
}
