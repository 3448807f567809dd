package config

import (
	"cmp"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A bare 0 is a zero duration wherever the configuration takes a duration
// (the README says so) because every duration in it is a duration.Duration:
// a time.Duration under a YAML key would refuse it. The walk covers the file's
// whole shape, each source kind's configuration included.
func TestEveryDurationKeyTakesABareZero(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ == reflect.TypeFor[time.Duration]() {
			t.Errorf("%s is a time.Duration: make it a duration.Duration, which takes a bare 0", path)
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if f.IsExported() && name != "-" {
				walk(f.Type, path+"."+cmp.Or(name, f.Name))
			}
		}
	}
	walk(reflect.TypeFor[Config](), "config")
	if !seen[reflect.TypeFor[Backend]()] || len(seen) < 10 {
		t.Errorf("the walk missed the configuration's shape: %d types", len(seen))
	}
}
