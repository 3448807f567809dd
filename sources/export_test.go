package sources

import "time"

// SetClock makes h timestamp its reads with now (tests of the rate window
// against a real HAProxy, without waiting whole windows).
func SetClock(h *HAProxyStats, now func() time.Time) { h.now = now }

// HistoryLen is the number of reads h keeps for server.
func HistoryLen(h *HAProxyStats, server string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.history.servers[server])
}
