package loadlab

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// FindHAProxy resolves the haproxy binary, which Debian puts in /usr/sbin (often not in
// a non-root PATH).
func FindHAProxy(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy", nil
	}
	return "", errors.New("haproxy not found: install it with `apt-get install haproxy` (make demo does)")
}

// RuntimeCommand sends one command to HAProxy's runtime socket and returns the reply.
func RuntimeCommand(ctx context.Context, socket, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", fmt.Errorf("dial haproxy socket: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", fmt.Errorf("send %q: %w", cmd, err)
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		return "", fmt.Errorf("read reply to %q: %w", cmd, err)
	}
	return string(b), nil
}

// ServerStat is what `show stat` says of one server.
type ServerStat struct {
	Weight int
	Conns  int
}

// ShowStat reads the weight and current connections of every server of backend.
func ShowStat(ctx context.Context, socket, backend string) (map[string]ServerStat, error) {
	reply, err := RuntimeCommand(ctx, socket, "show stat")
	if err != nil {
		return nil, err
	}
	return ParseStat(reply, backend)
}

// ParseStat parses `show stat` CSV (header line starts with "# ") for backend's servers.
func ParseStat(reply, backend string) (map[string]ServerStat, error) {
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(reply, "# ")))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) < 1 {
		return nil, fmt.Errorf("parse show stat: %w (%d rows)", err, len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, k := range []string{"pxname", "svname", "weight", "scur"} {
		if _, ok := col[k]; !ok {
			return nil, fmt.Errorf("parse show stat: no column %q", k)
		}
	}
	out := map[string]ServerStat{}
	for _, row := range rows[1:] {
		if len(row) < len(rows[0]) || row[col["pxname"]] != backend {
			continue
		}
		name := row[col["svname"]]
		if name == "BACKEND" || name == "FRONTEND" {
			continue
		}
		w, _ := strconv.Atoi(row[col["weight"]])
		n, _ := strconv.Atoi(row[col["scur"]])
		out[name] = ServerStat{Weight: w, Conns: n}
	}
	return out, nil
}

// MaxOverMean is the imbalance of one set of loads: the busiest server's load over the
// mean (1 = perfectly even). NaN when there is no load.
func MaxOverMean(loads []float64) float64 {
	if len(loads) == 0 {
		return math.NaN()
	}
	sum, hi := 0.0, math.Inf(-1)
	for _, v := range loads {
		sum += v
		hi = max(hi, v)
	}
	if sum <= 0 {
		return math.NaN()
	}
	return hi / (sum / float64(len(loads)))
}
