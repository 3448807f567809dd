// Package carbonconf writes the carbon.conf of carbon-cache instances on
// loopback, and graphite-web's settings module reading them, for the tests'
// Graphite (internal/testenv) and the carbon bench (examples/carbonbench):
// one text, so that what the tests check is what the bench measures.
package carbonconf

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Cache is one carbon-cache instance: its name (carbon's agent name is
// <host>-<name>) and its loopback ports.
type Cache struct {
	Name                     string
	Line, Pickle, CacheQuery int
}

// Caches returns carbon.conf for caches, storing under dir/storage and
// keeping conf, log and pid files under dir: the first instance in [cache],
// the others in [cache:NAME] with their own ports. metricInterval is
// CARBON_METRIC_INTERVAL in seconds (how often each cache writes its own
// metricsReceived count).
func Caches(dir string, caches []Cache, metricInterval int) string {
	first := caches[0]
	conf := fmt.Sprintf(`[cache]
STORAGE_DIR = %[1]s/storage/
LOCAL_DATA_DIR = %[1]s/storage/whisper/
WHITELISTS_DIR = %[1]s/storage/lists/
CONF_DIR = %[1]s/conf/
LOG_DIR = %[1]s/log/
PID_DIR = %[1]s/run/
USER =
MAX_CACHE_SIZE = inf
MAX_UPDATES_PER_SECOND = inf
MAX_CREATES_PER_MINUTE = inf
LINE_RECEIVER_INTERFACE = 127.0.0.1
LINE_RECEIVER_PORT = %[2]d
ENABLE_UDP_LISTENER = False
PICKLE_RECEIVER_INTERFACE = 127.0.0.1
PICKLE_RECEIVER_PORT = %[3]d
CACHE_QUERY_INTERFACE = 127.0.0.1
CACHE_QUERY_PORT = %[4]d
CARBON_METRIC_INTERVAL = %[5]d
LOG_LISTENER_CONNECTIONS = False
LOG_UPDATES = False
LOG_CREATES = False
ENABLE_MANHOLE = False
`, dir, first.Line, first.Pickle, first.CacheQuery, metricInterval)
	// The other instances take the [cache] settings but their ports.
	for _, c := range caches[1:] {
		conf += fmt.Sprintf("\n[cache:%s]\nLINE_RECEIVER_PORT = %d\nPICKLE_RECEIVER_PORT = %d\nCACHE_QUERY_PORT = %d\n",
			c.Name, c.Line, c.Pickle, c.CacheQuery)
	}
	return conf
}

// GraphiteSettings returns graphite-web's settings module for caches'
// storage under dir (conf, log and the sqlite database there too), each
// cache asked over its CacheQuery port on 127.0.0.1; extra is appended
// (Python lines).
func GraphiteSettings(dir, secret string, caches []Cache, extra string) string {
	var hosts []string
	for _, c := range caches {
		hosts = append(hosts, fmt.Sprintf("'127.0.0.1:%d:%s'", c.CacheQuery, c.Name))
	}
	return fmt.Sprintf(`import os
SECRET_KEY = %[5]q
STORAGE_DIR = %[1]q
WHISPER_DIR = os.path.join(STORAGE_DIR, 'whisper')
STANDARD_DIRS = [WHISPER_DIR]
INDEX_FILE = os.path.join(STORAGE_DIR, 'index')
LOG_DIR = %[2]q
DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3', 'NAME': %[3]q}}
CARBONLINK_HOSTS = [%[4]s]
ALLOWED_HOSTS = ['*']
`, filepath.Join(dir, "storage"), filepath.Join(dir, "log"), filepath.Join(dir, "graphite.db"), strings.Join(hosts, ", "), secret) + extra
}
