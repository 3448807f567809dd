package haproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// HAProxy's master CLI (`haproxy -W -S <socket>`) passes a command prefixed
// with `@1` to the current worker, the one the newest reload started: each
// exchange goes to whichever worker is current then, so a reload (USR2 to
// the master, or its `reload` command) needs no restart of the daemon. The
// first exchanges after a reload read the new worker's weights, which the
// controller sees reset and writes again.
//
// HAProxy 2.6's master CLI opens a new worker session for each command, so
// `set severity-output number` does not carry over and error replies come
// back without their "[N]: " severity. masterReply restores it for the
// commands the client sends.

// currentWorker is the master CLI's prefix for the current worker.
const currentWorker = "@1 "

// A worker a reload replaced stays up while it still carries connections
// ("# old workers" in `show proc`), and the master CLI reaches it by its
// pid, `@!<pid> <command>` (2.6 to 3.4), until it exits; then the master
// answers "Can't find the target PID matching the prefix '@!<pid>'". A
// stream id is the address of a struct in one process: it names nothing
// in another, so a stream read from a worker is closed through that
// worker's prefix (Session.Worker), never through @1, which a reload moves.

// inWorker returns a Client whose commands go, through the master CLI, to
// the worker pid (current or old); c itself for pid 0 or a worker's own
// socket. It shares c's configuration, trace and record of drains, not its
// Health: what one worker answers says nothing of the socket's current one.
func (c *Client) inWorker(pid int) *Client {
	if pid == 0 || !c.cfg.Master || pid == c.pid {
		return c
	}
	return &Client{cfg: c.cfg, trace: c.trace, zeroes: c.zeroes, pid: pid}
}

// workerPrefix is the master CLI's prefix for the worker c talks to.
func (c *Client) workerPrefix() string {
	if c.pid != 0 {
		return "@!" + strconv.Itoa(c.pid) + " "
	}
	return currentWorker
}

// workerGone reports whether err is the master's answer that the worker a
// `@!<pid>` prefix names is not there (it exited).
func workerGone(err error) bool {
	return err != nil && (errors.Is(err, ErrNoWorker) || noWorkerText(err.Error()))
}

// noWorkerText reports whether the master's text says the worker it was to
// pass a command to is not there: "Can't find the target PID matching the
// prefix '@!<pid>'" (no such worker listed), or, for a worker that exited a
// moment ago (3.0, 3.4), "Can't connect to the target CLI!".
func noWorkerText(s string) bool {
	return strings.Contains(s, "Can't find the target PID") || strings.Contains(s, "Can't connect to the target CLI")
}

// ErrNoWorker: the master CLI has no current worker to pass the command to
// (HAProxy starting, or every worker failed).
var ErrNoWorker = errors.New("the master CLI has no current worker")

// masterPrompt is the master CLI's prompt in prompt mode: "master> ", or with
// the reload status and mode flags, "master[ReloadFailed]> ", "master(e)> ".
var masterPrompt = regexp.MustCompile(`master(?:\[[^\]\n]*\])?(?:\([a-z]*\))?> `)

// replyEnd ends a worker's reply passed on by the master: the reply's last
// newline, then the prompt. A prompt not at the start of a line is text of
// the reply, such as a server agent's description in `show stat`.
var replyEnd = regexp.MustCompile(`\n` + masterPrompt.String())

// exchangeMaster is exchange through the master CLI: every command goes to
// the current worker, one per line in one write, the replies split on the
// master's prompt. The master closes the connection after "quit".
func (c *Client) exchangeMaster(ctx context.Context, cmds []string, sent *batchIO) ([]string, error) {
	var req bytes.Buffer
	req.WriteString("prompt\n")
	for _, cmd := range cmds {
		req.WriteString(c.workerPrefix() + cmd + "\n")
	}
	req.WriteString("quit\n")
	var out string
	// Every reply came, or the master said why not and closed (which may
	// have cut the write): the replies tell more than the write's error.
	_, err := c.converseOn(ctx, sent, req.Bytes(), func(r io.Reader, extend func()) (err error) {
		out, err = readAll(sent.timed(r), extend)
		return err
	})
	if err != nil {
		return nil, err
	}
	replies, err := splitMasterReplies(out, len(cmds))
	if err != nil {
		return nil, fmt.Errorf("haproxy: master CLI %s: %w", c.cfg.Socket, err)
	}
	for i, cmd := range cmds {
		replies[i] = masterReply(cmd, replies[i])
	}
	return replies, nil
}

// readAll reads until the peer closes, at most maxReply bytes; extend is
// called before each read.
func readAll(r io.Reader, extend func()) (string, error) {
	var buf bytes.Buffer
	chunk := make([]byte, 32<<10)
	for {
		extend()
		k, err := r.Read(chunk)
		buf.Write(chunk[:k])
		if buf.Len() > maxReply {
			return "", fmt.Errorf("%w: reply larger than %d MB", ErrBadReply, maxReply>>20)
		}
		if errors.Is(err, io.EOF) {
			return buf.String(), nil
		}
		if err != nil {
			return "", fmt.Errorf("after %d bytes: %w", buf.Len(), err)
		}
	}
}

// splitMasterReplies cuts the master CLI's prompt-mode output into n
// replies. Each reply is the worker's output and an empty line (an empty
// reply is that line alone), then the prompt at the start of a line
// (replyEnd); the output starts with the prompt "prompt" turned on.
func splitMasterReplies(out string, n int) ([]string, error) {
	first := masterPrompt.FindStringIndex(out)
	if first == nil || first[0] != 0 {
		if strings.HasPrefix(out, "\n> ") || strings.HasPrefix(out, "> ") {
			return nil, fmt.Errorf("%w: this is a worker's stats socket, not the master CLI: set master: false (%.80q)", ErrBadReply, out)
		}
		return nil, fmt.Errorf("%w: no master CLI prompt (%.80q)", ErrBadReply, out)
	}
	rest := out[first[1]:]
	var replies []string
	for len(replies) < n {
		if loc := masterPrompt.FindStringIndex(rest); loc != nil && loc[0] == 0 {
			// The prompt again with not even the empty line that ends a
			// worker's reply: no worker took the command. 2.6 says so
			// this way in prompt mode for an @!<pid> that is not there
			// (a worker that exited).
			return nil, fmt.Errorf("%w: command %d of %d went to no worker (%.80q)", ErrNoWorker, len(replies)+1, n, out)
		}
		// An empty reply is a newline alone: replyEnd right at the start.
		loc := replyEnd.FindStringIndex(rest)
		if loc == nil {
			break
		}
		reply := rest[:loc[0]]
		if reply != "" && !strings.HasSuffix(reply, "\n") {
			// No empty line ends it: the worker died (or a reload ended it)
			// mid-reply, and the master put its prompt after what came.
			return nil, fmt.Errorf("%w: reply %d of %d cut short (%d bytes; then %.80q)",
				ErrBadReply, len(replies)+1, n, len(reply), rest[loc[1]:])
		}
		replies = append(replies, strings.TrimRight(reply, "\n"))
		rest = rest[loc[1]:]
	}
	if len(replies) < n {
		if noWorkerText(rest) {
			return nil, fmt.Errorf("%w (%s)", ErrNoWorker, strings.TrimSpace(rest))
		}
		return nil, fmt.Errorf("%w: truncated: %d of %d replies (%d bytes: %.80q)", ErrBadReply, len(replies), n, len(out), out)
	}
	return replies, nil
}

// masterReply gives a worker's reply passed on by the master the severity
// prefix HAProxy would have put there under `set severity-output number`,
// so that replyError and commandError read it as from a worker's socket.
// A command that prints nothing on success (a weight, a shutdown) failed
// when it printed something; one that dumps (show servers state, show stat)
// failed when it printed one line that is not a CSV header: their output is
// never one line otherwise.
func masterReply(cmd, reply string) string {
	if reply == "" {
		return reply
	}
	silent := strings.HasPrefix(cmd, "set server ") || strings.HasPrefix(cmd, "shutdown session ")
	oneLine := !strings.Contains(reply, "\n") && !strings.HasPrefix(reply, "#")
	if silent || oneLine {
		return "[3]: " + reply
	}
	return reply
}

// oneCommand is what dumpOnce writes for cmd: the command alone, which the
// worker answers and closes after; through the master CLI the command for
// c's worker (the current one unless inWorker), then "quit", as the master
// keeps the connection open.
func (c *Client) oneCommand(cmd string) string {
	if c.cfg.Master {
		return c.workerPrefix() + cmd + "\nquit\n"
	}
	return cmd + "\n"
}
