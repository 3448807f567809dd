package config

import (
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// durationKeys are the YAML keys that hold a time.Duration wherever they
// appear in Config (a key that is something else anywhere is left out).
var durationKeys = func() map[string]bool {
	dur, other := map[string]bool{}, map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
				ft = ft.Elem()
			}
			switch {
			case !f.IsExported() || name == "-":
				continue
			case ft == reflect.TypeOf(time.Duration(0)):
				dur[name] = true
			case name != "" || !strings.Contains(opts, "inline"):
				other[name] = true
			}
			if ft.Kind() == reflect.Struct {
				walk(ft)
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	for k := range other {
		delete(dur, k)
	}
	return dur
}()

// zeroDurations rewrites a bare 0 under a duration key (max_age: 0) as 0s.
// yaml.v3 takes no number without a unit as a duration, yet "0 = off" is how
// the README and every reader put it, and 0 is the one number whose unit does
// not matter. Other numbers stay errors (is 10 seconds or minutes?). Lines and
// columns before each 0 do not move, so messages keep their positions.
func zeroDurations(data []byte) []byte {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return data // the decoder reports it
	}
	edits := map[int][]int{} // line → columns (1-based, in runes) of the zeros
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if durationKeys[k.Value] && v.Kind == yaml.ScalarNode && v.Tag == "!!int" &&
					v.Value == "0" && v.Style == 0 && v.Anchor == "" {
					edits[v.Line] = append(edits[v.Line], v.Column)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	if len(edits) == 0 {
		return data
	}
	lines := strings.SplitAfter(string(data), "\n")
	for line, cols := range edits {
		if line < 1 || line > len(lines) {
			continue
		}
		r := []rune(lines[line-1])
		sort.Sort(sort.Reverse(sort.IntSlice(cols))) // right to left: earlier columns stay put
		for _, c := range cols {
			if c < 1 || c > len(r) || r[c-1] != '0' {
				continue // not where yaml.v3 said: leave it to the decoder's message
			}
			r = append(r[:c], append([]rune{'s'}, r[c:]...)...)
		}
		lines[line-1] = string(r)
	}
	return []byte(strings.Join(lines, ""))
}
