package daemon

import (
	"log/slog"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Notifier tells the service manager about the daemon's state (sd_notify).
type Notifier interface {
	Notify(state string)
}

// SystemdNotifier sends to $NOTIFY_SOCKET; without it every call is a no-op.
type SystemdNotifier struct{ Log *slog.Logger }

// Notify sends state ("READY=1", "WATCHDOG=1", "STOPPING=1") and logs a failure.
func (n SystemdNotifier) Notify(state string) {
	if _, err := sd.SdNotify(false, state); err != nil && n.Log != nil {
		n.Log.Warn("sd_notify failed", "state", state, "err", err)
	}
}
