package daemon

import (
	"log/slog"
	"sync"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Notifier tells the service manager about the daemon's state (sd_notify).
type Notifier interface {
	Notify(state string)
}

// SystemdNotifier sends to $NOTIFY_SOCKET; without it every call is a no-op.
type SystemdNotifier struct {
	Log *slog.Logger

	mu      sync.Mutex
	failing bool // the last notification failed
}

// Notify sends state ("READY=1", "WATCHDOG=1", "STOPPING=1"). A failure is
// logged when it starts, each one after it at debug, and the recovery at
// info: a socket that stays out of reach fails every watchdog ping.
func (n *SystemdNotifier) Notify(state string) {
	_, err := sd.SdNotify(false, state)
	n.mu.Lock()
	was := n.failing
	n.failing = err != nil
	n.mu.Unlock()
	if n.Log == nil {
		return
	}
	switch {
	case err != nil && !was:
		n.Log.Warn("sd_notify failed", "state", state, "err", err, "next", "further failures at debug until it works again")
	case err != nil:
		n.Log.Debug("sd_notify failed", "state", state, "err", err)
	case was:
		n.Log.Info("sd_notify works again", "state", state)
	}
}
