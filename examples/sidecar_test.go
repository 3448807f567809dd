package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type k8sDoc struct {
	Kind string            `yaml:"kind"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sPodSpec struct {
	SecurityContext struct {
		FSGroup            int   `yaml:"fsGroup"`
		SupplementalGroups []int `yaml:"supplementalGroups"`
	} `yaml:"securityContext"`
	Volumes []struct {
		Name      string         `yaml:"name"`
		EmptyDir  map[string]any `yaml:"emptyDir"`
		ConfigMap *struct {
			Items []struct{ Key, Path string } `yaml:"items"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
	Containers []struct {
		Name         string `yaml:"name"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
		SecurityContext struct {
			RunAsUser int `yaml:"runAsUser"`
		} `yaml:"securityContext"`
	} `yaml:"containers"`
}

var (
	statsSocketRe = regexp.MustCompile(`(?m)^\s*stats socket (\S+) mode 660 level admin`)
	cfgSocketRe   = regexp.MustCompile(`(?m)^\s*socket: (\S+)`)
)

// checkConfigs runs the real `haproxy -c` and `haproxy-weighter validate` on a pair of
// configs and checks that the weighter talks to the socket HAProxy creates.
func checkConfigs(t *testing.T, haproxyCfg, weighterCfg string) (socket string) {
	t.Helper()
	hap := requireTool(t, "haproxy", "apt-get install haproxy")
	dir := t.TempDir()
	hp, wp := filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "weighter.yaml")
	writeFile(t, hp, haproxyCfg)
	writeFile(t, wp, weighterCfg)
	run(t, time.Minute, hap, "-c", "-f", hp)
	run(t, time.Minute, weighterBinary(t), "validate", wp)
	if strings.Contains(weighterCfg, "counter: bytes_") && !strings.Contains(haproxyCfg, "option contstats") {
		t.Error("the weighter reads bytes counters but HAProxy lacks `option contstats`")
	}
	hs, ws := statsSocketRe.FindStringSubmatch(haproxyCfg), cfgSocketRe.FindStringSubmatch(weighterCfg)
	if hs == nil || ws == nil || hs[1] != ws[1] {
		t.Fatalf("HAProxy admin socket %v and weighter socket %v differ", hs, ws)
	}
	return hs[1]
}

func TestKubernetesSidecar(t *testing.T) {
	b, err := os.ReadFile("kubernetes/haproxy-weighter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var docs []k8sDoc
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	for {
		var d k8sDoc
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs = append(docs, d)
	}
	var cm, dep *k8sDoc
	for i := range docs {
		switch docs[i].Kind {
		case "ConfigMap":
			cm = &docs[i]
		case "Deployment":
			dep = &docs[i]
		}
	}
	if cm == nil || dep == nil {
		t.Fatalf("want a ConfigMap and a Deployment, got %d documents", len(docs))
	}
	socket := checkConfigs(t, cm.Data["haproxy.cfg"], cm.Data["weighter.yaml"])

	pod := dep.Spec.Template.Spec
	shared := ""
	for _, v := range pod.Volumes {
		if v.EmptyDir != nil {
			shared = v.Name
		}
	}
	if shared == "" {
		t.Fatal("no emptyDir volume for the admin socket")
	}
	mounts := map[string]string{}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == shared {
				mounts[c.Name] = m.MountPath
			}
		}
		if c.Name == "haproxy-weighter" && c.SecurityContext.RunAsUser == 0 {
			t.Error("the weighter container runs as root")
		}
	}
	if len(mounts) != 2 || mounts["haproxy"] != mounts["haproxy-weighter"] || filepath.Dir(socket) != mounts["haproxy"] {
		t.Errorf("socket %s must be in the emptyDir mounted at the same path in both containers: %v", socket, mounts)
	}
	checkWeighterConfigMount(t, pod)
	if pod.SecurityContext.FSGroup != 99 || len(pod.SecurityContext.SupplementalGroups) != 1 || pod.SecurityContext.SupplementalGroups[0] != 99 {
		t.Errorf("pod needs fsGroup 99 and supplementalGroups [99] (HAProxy's group) for the socket")
	}
}

// checkWeighterConfigMount: the weighter's config is the ConfigMap's weighter.yaml at the path
// the image's command reads, mounted as a directory: the kubelet never updates a subPath
// mount, so an edited ConfigMap would not reach the daemon at SIGHUP.
func checkWeighterConfigMount(t *testing.T, pod k8sPodSpec) {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name != "haproxy-weighter" {
			continue
		}
		for _, m := range c.VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name != m.Name || v.ConfigMap == nil {
					continue
				}
				if m.SubPath != "" {
					t.Errorf("the weighter mounts ConfigMap volume %s with subPath %s: edits never reach it", m.Name, m.SubPath)
				}
				for _, it := range v.ConfigMap.Items {
					if it.Key == "weighter.yaml" && filepath.Join(m.MountPath, it.Path) == "/etc/haproxy-weighter/config.yaml" {
						return
					}
				}
			}
		}
	}
	t.Error("the weighter does not get the ConfigMap's weighter.yaml at /etc/haproxy-weighter/config.yaml")
}

func TestComposeSidecar(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Volumes  []string `yaml:"volumes"`
			User     string   `yaml:"user"`
			GroupAdd []string `yaml:"group_add"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	b, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	hap, _ := os.ReadFile("compose/haproxy.cfg")
	w, _ := os.ReadFile("compose/weighter.yaml")
	socket := checkConfigs(t, string(hap), string(w))
	want := "haproxy-run:" + filepath.Dir(socket)
	for _, name := range []string{"haproxy", "haproxy-weighter"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		found := false
		for _, v := range s.Volumes {
			found = found || v == want
		}
		if !found {
			t.Errorf("service %s does not mount %s: %v", name, want, s.Volumes)
		}
	}
	if _, ok := c.Volumes["haproxy-run"]; !ok {
		t.Error("named volume haproxy-run not declared")
	}
	wc := c.Services["haproxy-weighter"]
	if strings.HasPrefix(wc.User, "0") || len(wc.GroupAdd) != 1 || wc.GroupAdd[0] != "99" {
		t.Errorf("weighter must run non-root with group_add [99], got user %q groups %v", wc.User, wc.GroupAdd)
	}
}
