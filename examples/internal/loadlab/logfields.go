package loadlab

import (
	"strconv"
	"strings"
)

// LogFields are a logfmt line's key=value pairs ("…" values unquoted): what the
// benches read from the weighter's log.
func LogFields(line string) map[string]string {
	kv := map[string]string{}
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		k, v, ok := strings.Cut(rest, "=")
		if !ok || strings.Contains(k, " ") {
			break
		}
		if strings.HasPrefix(v, `"`) {
			if q, err := strconv.QuotedPrefix(v); err == nil {
				rest = v[len(q):]
				kv[k], _ = strconv.Unquote(q)
				continue
			}
		}
		v, rest, _ = strings.Cut(v, " ")
		kv[k] = v
	}
	return kv
}
