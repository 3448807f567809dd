package examples

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// The official haproxy image runs as haproxy, uid and gid 99; the weighter image as 65532.
const (
	haproxyImageID  = 99
	weighterImageID = 65532
)

// TestContainerReachesSharedSocket stands in for the sidecar (no container engine runs here):
// HAProxy runs as the official image's user and creates its admin socket as the compose and
// Kubernetes examples configure it, in a directory owned as each example's volume is; the
// weighter binary runs alone in an empty root as the image's user, with that directory
// where the examples mount the volume, and `once` with the compose example's config must
// read the backend through it. The volume is a directory of the root itself rather than a
// bind mount: a mount namespace needs privileges a CI container or chroot may not give, and
// the socket's access is decided by its owner, group and mode alone. Without HAProxy's group, as the documentation
// says, the same run must fail on the socket's permission.
func TestContainerReachesSharedSocket(t *testing.T) {
	for _, tool := range []string{"chroot", "setpriv"} {
		requireTool(t, tool, "apt-get install coreutils util-linux")
	}
	hap := requireTool(t, "haproxy", "apt-get install haproxy")
	if os.Geteuid() != 0 {
		t.Fatal("running HAProxy and the weighter as the images' users needs root (CI runs as root)")
	}
	hapCfg, err := os.ReadFile("compose/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	weighterCfg, err := os.ReadFile("compose/weighter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The weighter's socket path inside its container, and HAProxy's stats socket line.
	inside := checkSocketPath(t, string(hapCfg), string(weighterCfg))
	socketLine := statsSocketRe.FindString(string(hapCfg))

	for _, volume := range []struct {
		name string
		uid  int
		gid  int
		mode os.FileMode
	}{
		// A new named volume takes the image's /var/lib/haproxy: haproxy:haproxy, 0755.
		{"compose", haproxyImageID, haproxyImageID, 0o755},
		// An emptyDir with fsGroup 99: world-writable, group 99, setgid.
		{"kubernetes", 0, haproxyImageID, 0o777 | os.ModeSetgid},
	} {
		t.Run(volume.name, func(t *testing.T) { // short: a unix socket's path has at most 107 bytes
			t.Parallel()
			base := t.TempDir()
			// HAProxy runs unprivileged on the host's paths: let it through the test's directories.
			must(t, os.Chmod(filepath.Dir(base), 0o755))
			must(t, os.Chmod(base, 0o755))
			root := imageRoot(t, weighterCfg, inside)
			shared := filepath.Join(root, filepath.Dir(inside))
			must(t, os.Chown(shared, volume.uid, volume.gid))
			must(t, os.Chmod(shared, volume.mode))

			sink := testenv.StartDiscardServer(t)
			cfg := filepath.Join(base, "haproxy.cfg")
			writeFile(t, cfg, "global\n    "+strings.Replace(strings.TrimSpace(socketLine), inside, filepath.Join(shared, filepath.Base(inside)), 1)+
				"\n"+testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe_ingest
    bind 127.0.0.1:%d
    default_backend be_ingest
backend be_ingest
    balance leastconn
    server ingest-1 %s weight 100
    server ingest-2 %s weight 100
    server ingest-3 %s weight 100
`, testenv.FreePort(t), sink, sink, sink))
			startHAProxyAs(t, hap, cfg, haproxyImageID, filepath.Join(shared, filepath.Base(inside)))

			out, err := onceInImage(root, fmt.Sprint(haproxyImageID))
			if err != nil {
				t.Fatalf("as %d with group %d: once failed: %v\n%s", weighterImageID, haproxyImageID, err, out)
			}
			for _, s := range []string{"be_ingest", "ingest-1", "ingest-2", "ingest-3"} {
				if !strings.Contains(out, s) {
					t.Errorf("as %d with group %d: once's plan lacks %s:\n%s", weighterImageID, haproxyImageID, s, out)
				}
			}
			out, err = onceInImage(root, "")
			if err == nil || !strings.Contains(out, "permission denied") {
				t.Errorf("as %d without group %d: once should fail on the socket's permission, got %v:\n%s", weighterImageID, haproxyImageID, err, out)
			}
		})
	}
}

// checkSocketPath returns the weighter's socket, after checking that HAProxy's stats socket is
// the same path, created mode 660 (checkConfigs checks the rest of the pair).
func checkSocketPath(t *testing.T, haproxyCfg, weighterCfg string) string {
	t.Helper()
	hs, ws := statsSocketRe.FindStringSubmatch(haproxyCfg), cfgSocketRe.FindStringSubmatch(weighterCfg)
	if hs == nil || ws == nil || hs[1] != ws[1] {
		t.Fatalf("HAProxy admin socket (mode 660) %v and weighter socket %v differ", hs, ws)
	}
	return ws[1]
}

// startHAProxyAs runs haproxy -db as uid:gid id, no other group, as the official image does,
// and waits for its socket.
func startHAProxyAs(t *testing.T, hap, cfg string, id int, socket string) {
	t.Helper()
	must(t, os.Chmod(cfg, 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	var logs testenv.SyncBuffer
	cmd := exec.CommandContext(ctx, "setpriv", fmt.Sprintf("--reuid=%d", id), fmt.Sprintf("--regid=%d", id), "--clear-groups",
		hap, "-db", "-f", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Dir = "/" // HAProxy returns to its start directory, which the test's (under /root) may deny it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if fi, err := os.Stat(socket); err == nil {
			if fi.Mode().Perm() != 0o660 {
				t.Fatalf("HAProxy made %s mode %v, want 0660", socket, fi.Mode().Perm())
			}
			return
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("haproxy as %d exited: %v\n%s", id, err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy as %d made no socket %s\n%s", id, socket, logs.String())
		}
	}
}

// imageRoot lays out what the image holds (the binary alone) plus the example config at the
// image's config path and the volume's mount point (made by the caller).
func imageRoot(t *testing.T, weighterCfg []byte, socket string) string {
	t.Helper()
	root := t.TempDir()
	b, err := os.ReadFile(weighterBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(root, "haproxy-weighter"), b, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "etc/haproxy-weighter"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/haproxy-weighter/config.yaml"), weighterCfg, 0o644))
	must(t, os.MkdirAll(filepath.Join(root, filepath.Dir(filepath.Dir(socket))), 0o755))
	must(t, os.Mkdir(filepath.Join(root, filepath.Dir(socket)), 0o755))
	must(t, os.Chmod(root, 0o755))
	return root
}

// onceInImage runs `once` (a dry run, 2 s between its two reads) with the image's command's
// config, as uid:gid 65532 with the supplementary groups given, in root.
func onceInImage(root, groups string) (string, error) {
	args := []string{fmt.Sprintf("--userspec=%d:%d", weighterImageID, weighterImageID)}
	if groups != "" {
		args = append(args, "--groups="+groups)
	}
	args = append(args, root, "/haproxy-weighter", "once", "--config", "/etc/haproxy-weighter/config.yaml", "--interval", "2s")
	return runErr(time.Minute, "chroot", args...)
}
