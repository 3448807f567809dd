package haproxy

import (
	"errors"
	"fmt"
	"strings"
)

// replyError classifies the reply to a command that prints nothing on success
// (set server ... weight). With "set severity-output number" HAProxy prefixes
// messages with "[N]: "; N <= 3 (emerg, alert, crit, err) is a failure, higher
// levels are notices. Anything else is not a runtime API reply.
func replyError(reply string) error {
	if reply == "" {
		return nil
	}
	msg, sev, ok := severity(reply)
	if !ok {
		return fmt.Errorf("%w: unexpected %.80q", ErrBadReply, reply)
	}
	if sev <= 3 {
		return errors.New(msg)
	}
	return nil
}

// commandError returns the failure carried by the reply of a command that prints
// output on success (show servers state, show stat), or nil.
func commandError(reply string) error {
	msg, sev, ok := severity(reply)
	if ok && sev <= 3 {
		return errors.New(msg)
	}
	return nil
}

func severity(reply string) (msg string, sev int, ok bool) {
	if len(reply) < 5 || reply[0] != '[' || reply[2] != ']' || reply[3] != ':' ||
		reply[1] < '0' || reply[1] > '7' {
		return "", 0, false
	}
	msg = strings.TrimSpace(reply[4:])
	return strings.TrimSuffix(msg, "."), int(reply[1] - '0'), true
}
