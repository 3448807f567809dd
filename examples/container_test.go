package examples

import (
	"bufio"
	"debug/elf"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestStaticBinaryRunsInEmptyRoot stands in for the Docker build (no engine runs here):
// the binary built as the Dockerfile builds it must be static and run alone in an empty
// root, as root and as the image's non-root user.
func TestStaticBinaryRunsInEmptyRoot(t *testing.T) {
	chroot := requireTool(t, "chroot", "apt-get install coreutils")
	if os.Geteuid() != 0 {
		t.Fatal("chroot needs root (CI runs as root): run the tests as root")
	}
	bin := weighterBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}
	f.Close()

	root := t.TempDir()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "haproxy-weighter"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil { // let uid 65532 in
		t.Fatal(err)
	}
	for _, user := range []string{"0:0", "65532:65532"} {
		out := run(t, time.Minute, chroot, "--userspec="+user, root, "/haproxy-weighter", "version")
		if !strings.HasPrefix(out, "haproxy-weighter "+testVersion+" (go") {
			t.Errorf("as %s: version printed %q", user, out)
		}
		out = run(t, time.Minute, chroot, "--userspec="+user, root, "/haproxy-weighter",
			"calc", "--function", "limited-proportions", "--limiting-factor", "4", "--aggressiveness", "1", "--", "10", "20", "40", "0")
		if first, _, _ := strings.Cut(out, "\n"); first != "112 56 28 256" {
			t.Errorf("as %s: calc printed %q, want first line %q", user, out, "112 56 28 256")
		}
	}
	// The image's command reads /etc/haproxy-weighter/config.yaml: the sidecar example's config,
	// mounted there, is valid to the binary alone (no /etc/passwd, no zoneinfo, no shell).
	sidecar, err := os.ReadFile("compose/weighter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(filepath.Join(root, "etc/haproxy-weighter"), 0o755))
	writeFile(t, filepath.Join(root, "etc/haproxy-weighter/config.yaml"), string(sidecar))
	must(t, os.Chmod(filepath.Join(root, "etc/haproxy-weighter/config.yaml"), 0o644))
	run(t, time.Minute, chroot, "--userspec=65532:65532", root, "/haproxy-weighter", "validate", "/etc/haproxy-weighter/config.yaml")
}

// TestDockerfile checks the Dockerfile against what the test above verifies: a static
// build with the same flags, an empty non-root final stage, and the Go version of go.mod.
func TestDockerfile(t *testing.T) {
	text, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	var finalUser, entry string
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "FROM":
			froms = append(froms, strings.Join(fields[1:], " "))
			finalUser = ""
		case "USER":
			finalUser = fields[1]
		case "ENTRYPOINT":
			entry = strings.Join(fields[1:], " ")
		}
	}
	if len(froms) < 2 || froms[len(froms)-1] != "scratch" {
		t.Errorf("want a multi-stage build ending FROM scratch, got %q", froms)
	}
	if finalUser == "" || strings.HasPrefix(finalUser, "0") || strings.HasPrefix(finalUser, "root") {
		t.Errorf("final stage runs as %q, want a non-root USER", finalUser)
	}
	if entry != `["/haproxy-weighter"]` {
		t.Errorf("ENTRYPOINT %s", entry)
	}
	for _, s := range []string{"CGO_ENABLED=0", "-trimpath", "cmd.Version=${VERSION}", "COPY --from=build /out/haproxy-weighter /haproxy-weighter"} {
		if !strings.Contains(string(text), s) {
			t.Errorf("Dockerfile lacks %q", s)
		}
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	if m == nil || !strings.HasPrefix(froms[0], "golang:"+m[1]+"-") {
		t.Errorf("build stage %q does not use go.mod's Go %v", froms[0], m)
	}
}

// dockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerInstruction struct {
	cmd  string // upper case: FROM, ARG, LABEL, ...
	args string
}

// dockerInstructions splits a Dockerfile into instructions: comments and blank lines dropped,
// lines ending in a backslash joined with the next (comment lines inside are skipped, as
// Docker does).
func dockerInstructions(text string) []dockerInstruction {
	var list []dockerInstruction
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		list = append(list, dockerInstruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return list
}

// dockerWords splits the arguments of ARG or LABEL into key=value words, removing the double
// quotes around (parts of) a word and their backslash escapes.
func dockerWords(args string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(args); i++ {
		c := args[i]
		switch {
		case quoted && c == '\\' && i+1 < len(args):
			i++
			w.WriteByte(args[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", args)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

var dockerVarRe = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// finalStageLabels evaluates the Dockerfile's last stage's LABELs as `docker build` would
// with these --build-arg values: an ARG declared in the stage takes the build argument, else
// its default in the stage, else the global (before the first FROM) default; a variable the
// stage does not declare expands to nothing, and is reported.
func finalStageLabels(t *testing.T, text string, buildArgs map[string]string) map[string]string {
	t.Helper()
	global := map[string]string{}
	var stageArgs, labels map[string]string
	stages := 0
	for _, in := range dockerInstructions(text) {
		switch in.cmd {
		case "FROM":
			stages++
			stageArgs, labels = map[string]string{}, map[string]string{}
		case "ARG":
			words, err := dockerWords(in.args)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range words {
				name, def, hasDef := strings.Cut(w, "=")
				if stages == 0 {
					global[name] = def
					continue
				}
				v, given := buildArgs[name]
				switch {
				case given:
				case hasDef:
					v = def
				default:
					v = global[name]
				}
				stageArgs[name] = v
			}
		case "LABEL":
			words, err := dockerWords(in.args)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					t.Fatalf("LABEL %q: want key=value", w)
				}
				labels[k] = dockerVarRe.ReplaceAllStringFunc(v, func(ref string) string {
					m := dockerVarRe.FindStringSubmatch(ref)
					name := m[1] + m[2]
					val, ok := stageArgs[name]
					if !ok {
						t.Errorf("LABEL %s uses $%s, which the final stage does not declare with ARG (it would be empty)", k, name)
					}
					return val
				})
			}
		}
	}
	if stages == 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	return labels
}

// TestContainerImageOCILabels: the image carries the OCI annotations registries and scanners read,
// the version and revision from the build arguments, the licence and source the package's.
func TestContainerImageOCILabels(t *testing.T) {
	text, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	nfpm, err := os.ReadFile("../nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		License  string `yaml:"license"`
		Homepage string `yaml:"homepage"`
	}
	if err := yaml.Unmarshal(nfpm, &pkg); err != nil || pkg.License == "" || pkg.Homepage == "" {
		t.Fatalf("nfpm.yaml: license %q homepage %q: %v", pkg.License, pkg.Homepage, err)
	}
	const p = "org.opencontainers.image."
	for _, tc := range []struct {
		args                      map[string]string
		version, revision, source string
	}{
		{nil, "dev", "unknown", pkg.Homepage},
		{map[string]string{"VERSION": "v1.2.3", "REVISION": "0123456789abcdef0123456789abcdef01234567"}, "v1.2.3", "0123456789abcdef0123456789abcdef01234567", pkg.Homepage},
		{map[string]string{"VERSION": "v1.2.4", "REVISION": "fedcba", "SOURCE": "https://git.example.org/fork"}, "v1.2.4", "fedcba", "https://git.example.org/fork"},
	} {
		labels := finalStageLabels(t, string(text), tc.args)
		want := map[string]string{
			p + "title": "haproxy-weighter", p + "version": tc.version, p + "revision": tc.revision,
			p + "source": tc.source, p + "licenses": pkg.License,
		}
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("build args %v: label %s = %q, want %q", tc.args, k, labels[k], v)
			}
		}
		if d := labels[p+"description"]; len(d) < 20 || strings.Contains(d, "$") {
			t.Errorf("label %sdescription = %q", p, d)
		}
	}
	// Where the docs show the build command, it passes the version and the revision.
	for _, f := range []string{"../Dockerfile", "kubernetes/README.md", "../README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := strings.ReplaceAll(string(b), "\\\n#", "")
		doc = strings.ReplaceAll(doc, "\\\n", "")
		for _, line := range strings.Split(doc, "\n") {
			if strings.Contains(line, "docker build") && (!strings.Contains(line, "--build-arg VERSION=") || !strings.Contains(line, "--build-arg REVISION=")) {
				t.Errorf("%s: %q does not pass --build-arg VERSION= and REVISION=", f, strings.TrimSpace(line))
			}
		}
	}
}

func TestContainerDockerWords(t *testing.T) {
	got, err := dockerWords(`a=1 b="x y" c="q\"uote" d=${V}`)
	if err != nil || strings.Join(got, "|") != `a=1|b=x y|c=q"uote|d=${V}` {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := dockerWords(`a="open`); err == nil {
		t.Error("no error for an unterminated quote")
	}
}

// listenPort checks that a sidecar config's listen address takes connections from outside the
// container (the daemon's default, 127.0.0.1:9842, does not: a kubelet probe or Prometheus
// comes in on the pod's address) and returns its port.
func listenPort(t *testing.T, where, weighterCfg string) string {
	t.Helper()
	var cfg struct {
		Listen *string `yaml:"listen"`
	}
	if err := yaml.Unmarshal([]byte(weighterCfg), &cfg); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if cfg.Listen == nil {
		t.Errorf("%s: no listen: the daemon would listen on 127.0.0.1:9842, out of the kubelet's and Prometheus's reach; set listen: 0.0.0.0:9842", where)
		return ""
	}
	host, port, err := net.SplitHostPort(*cfg.Listen)
	if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
		t.Errorf("%s: listen %q does not take connections on the pod's address (want 0.0.0.0:<port>): %v", where, *cfg.Listen, err)
	}
	return port
}

// TestSidecarListensForProbes: the example configs listen on all of the container's addresses,
// on the port that the liveness probe, the Prometheus annotation and the published port name.
func TestSidecarListensForProbes(t *testing.T) {
	b, err := os.ReadFile("kubernetes/haproxy-weighter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type port struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}
	var cfg, annotated string
	var ports []port
	var probe any
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	for {
		var d struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
			Spec struct {
				Template struct {
					Metadata struct {
						Annotations map[string]string `yaml:"annotations"`
					} `yaml:"metadata"`
					Spec struct {
						Containers []struct {
							Name          string `yaml:"name"`
							Ports         []port `yaml:"ports"`
							LivenessProbe struct {
								HTTPGet struct {
									Port any `yaml:"port"`
								} `yaml:"httpGet"`
							} `yaml:"livenessProbe"`
						} `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&d); err != nil {
			break
		}
		switch d.Kind {
		case "ConfigMap":
			cfg = d.Data["weighter.yaml"]
		case "Deployment":
			annotated = d.Spec.Template.Metadata.Annotations["prometheus.io/port"]
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == "haproxy-weighter" {
					ports, probe = c.Ports, c.LivenessProbe.HTTPGet.Port
				}
			}
		}
	}
	listen := listenPort(t, "kubernetes weighter.yaml", cfg)
	probePort := fmt.Sprint(probe)
	for _, p := range ports {
		if p.Name == probePort {
			probePort = strconv.Itoa(p.ContainerPort)
		}
	}
	if listen == "" || probePort != listen || annotated != listen {
		t.Errorf("kubernetes: the config listens on port %q, the liveness probe asks %v (port %s), prometheus.io/port is %q", listen, probe, probePort, annotated)
	}

	w, err := os.ReadFile("compose/weighter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	listen = listenPort(t, "compose weighter.yaml", string(w))
	var compose struct {
		Services map[string]struct {
			Ports []string `yaml:"ports"`
		} `yaml:"services"`
	}
	c, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(c, &compose); err != nil {
		t.Fatal(err)
	}
	published := compose.Services["haproxy-weighter"].Ports
	if len(published) != 1 || !strings.HasSuffix(published[0], ":"+listen) {
		t.Errorf("compose: the config listens on port %q, the service publishes %q", listen, published)
	}
}
