package examples

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/config"
)

// exampleConfigs are the weighter configs an operator copies: examples/config/, the packaged
// one, and the sidecars' (compose's file, the Kubernetes ConfigMap's weighter.yaml), by name.
func exampleConfigs(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/config: %v %v", files, err)
	}
	files = append(files, "../packaging/config.yaml", "compose/weighter.yaml")
	configs := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs[f] = b
	}
	b, err := os.ReadFile("kubernetes/haproxy-weighter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range k8sDocs(t, b) {
		if d.Kind == "ConfigMap" {
			configs["kubernetes/haproxy-weighter.yaml (weighter.yaml)"] = []byte(d.Data["weighter.yaml"])
		}
	}
	return configs
}

// TestExampleConfigsWeighByTheFastSignal: the fast signal is the default pipeline and what the
// examples' comments describe; a key such as drain_above or connection_life turns it off as a
// side effect, which an example must not do silently: a backend weighs by it unless its
// config says fast_signal: off.
func TestExampleConfigsWeighByTheFastSignal(t *testing.T) {
	t.Setenv("HG_API_KEY", "test-key")
	for name, text := range exampleConfigs(t) {
		cfg, err := config.Parse(name, text, os.LookupEnv)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, b := range cfg.Backends {
			on, why := b.FastSignalState()
			if !on && b.FastSignal != config.FastOff {
				t.Errorf("%s: backend %s does not weigh by the fast signal (%s) although it does not say fast_signal: off", name, b.Name, why)
			}
		}
	}
}

// k8sDocs decodes every document of a multi-document manifest.
func k8sDocs(t *testing.T, manifest []byte) []k8sDoc {
	t.Helper()
	var docs []k8sDoc
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var d k8sDoc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("kubernetes manifest: %v", err)
		}
		docs = append(docs, d)
	}
}
