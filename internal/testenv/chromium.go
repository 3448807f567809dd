package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Chromium runs Debian's headless chromium with args ("--dump-dom", url;
// "--screenshot="+path, url) and returns what it printed; a missing
// chromium fails the test, naming the package. The flags keep it off the
// network (no background requests, updates or sync), give it a fresh
// profile and HOME, let it run as root (--no-sandbox: chromium refuses
// root without it) and fix the window at 1200×900, scale 1, so that a
// screenshot's pixels are where a test measures them. It is given 2 min.
func Chromium(t testing.TB, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (apt-get install chromium, as in the README's apt-get line): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--no-first-run", "--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir(),
		"--force-device-scale-factor=1", "--hide-scrollbars", "--window-size=1200,900"}, args...)
	cmd := exec.CommandContext(ctx, path, all...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// ChromiumDOM is the DOM headless chromium built of the page at url (its
// scripts run), failing the test when chromium dumped no page.
func ChromiumDOM(t testing.TB, url string) string {
	t.Helper()
	dom := Chromium(t, "--dump-dom", url)
	if !strings.Contains(dom, "</html>") {
		t.Fatalf("chromium dumped no page of %s:\n%s", url, dom)
	}
	return dom
}
