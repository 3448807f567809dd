package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

var yamlBlockRe = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// documentedConfigs are the weighter configs shown in the README and the Markdown under docs/
// and examples/: every ```yaml block with a backends: key, by file and block number.
func documentedConfigs(t *testing.T) map[string][]byte {
	t.Helper()
	root := repoRoot(t)
	files := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"docs/*.md", "examples/*/README.md", "examples/*/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	configs := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, m := range yamlBlockRe.FindAllStringSubmatch(string(b), -1) {
			if regexp.MustCompile(`(?m)^backends:`).MatchString(m[1]) {
				configs[rel+" yaml block "+itoa(i+1)] = []byte(m[1])
			}
		}
	}
	return configs
}

// TestEveryExampleConfigValidates runs the built binary's `validate` on every weighter config
// an operator is shown: examples/config/, the packaged config, the sidecars' (compose and the
// Kubernetes ConfigMap) and the YAML blocks of the README and the docs.
func TestEveryExampleConfigValidates(t *testing.T) {
	bin := weighterBinary(t)
	configs := exampleConfigs(t)
	documented := documentedConfigs(t)
	if _, ok := documented["README.md yaml block 1"]; !ok {
		t.Errorf("the README's minimal config was not found among %d documented configs", len(documented))
	}
	for k, v := range documented {
		configs[k] = v
	}
	names := make([]string, 0, len(configs))
	for name := range configs {
		names = append(names, name)
	}
	sort.Strings(names)
	dir := t.TempDir()
	t.Setenv("HG_API_KEY", "test-key") // graphite.yaml's ${HG_API_KEY}
	for i, name := range names {
		path := filepath.Join(dir, "config-"+itoa(i)+".yaml")
		writeFile(t, path, string(configs[name]))
		out, err := runErr(time.Minute, bin, "validate", path)
		if err != nil || !strings.Contains(out, ": ok (") {
			t.Errorf("%s: validate: %v\n%s", name, err, out)
		}
	}
	t.Logf("validated %d configs: %s", len(names), strings.Join(names, ", "))
}
