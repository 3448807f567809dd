package haproxy

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Columns of `show servers state` (format version 1, HAProxy 2.x).
const (
	colBackend   = 1
	colName      = 3
	colAddr      = 4
	colOpState   = 5
	colAdmin     = 6
	colUWeight   = 7
	colIWeight   = 8
	colFQDN      = 17
	colPort      = 18
	minStateCols = 19
)

// srv_admin_state bits (HAProxy include/haproxy/server-t.h). The field is printed
// in decimal; client-native's misc.GetServerAdminState parses it as hex, which
// reads 16 (IDRAIN) as maint, so we decode it here.
//
// CMAINT and HMAINT are not maintenance, despite their names: CMAINT remembers
// that the configuration said "disabled" (it comes with FMAINT, and stays alone
// after "enable server", while the server serves), HMAINT that the FQDN was set
// over the CLI. HAProxy's own mask, SRV_ADMF_MAINT, is FMAINT|IMAINT|RMAINT.
const (
	admFMaint = 0x01 // forced by the operator, or "disabled" in the configuration
	admIMaint = 0x02 // inherited from a tracked server
	admFDrain = 0x08 // forced by the operator
	admIDrain = 0x10 // inherited from a tracked server
	admRMaint = 0x20 // address resolution failed
)

// adminState decodes srv_admin_state. HAProxy's `show stat` says DRAIN for any
// server of weight 0; only these bits say whether the operator drained it.
func adminState(bits uint64) weighter.AdminState {
	switch {
	case bits&(admFMaint|admIMaint|admRMaint) != 0:
		return weighter.AdminMaint
	case bits&(admFDrain|admIDrain) != 0:
		return weighter.AdminDrain
	}
	return weighter.AdminReady
}

// opState decodes srv_op_state (SRV_ST_STOPPED, STARTING, RUNNING, STOPPING).
func opState(s string) (string, error) {
	switch s {
	case "0":
		return "down", nil
	case "1", "2":
		return "up", nil
	case "3":
		return "stopping", nil
	}
	return "", fmt.Errorf("unknown srv_op_state %q", s)
}

// parseServersState parses the reply to `show servers state <backend>`.
func parseServersState(backend, out string) ([]weighter.ServerState, error) {
	lines := strings.Split(out, "\n")
	if strings.TrimSpace(lines[0]) != "1" {
		return nil, fmt.Errorf("%w: servers state of %s: want format version 1, got %.80q",
			ErrBadReply, backend, lines[0])
	}
	servers := []weighter.ServerState{}
	seen := make(map[string]bool)
	for i, line := range lines[1:] {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseStateLine(backend, line)
		if err == nil && seen[s.Name] {
			// HAProxy refuses two servers of one name; weights by name would be ambiguous.
			err = fmt.Errorf("server %s listed twice", s.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: servers state of %s, line %d: %w", ErrBadReply, backend, i+2, err)
		}
		seen[s.Name] = true
		servers = append(servers, s)
	}
	return servers, nil
}

func parseStateLine(backend, line string) (weighter.ServerState, error) {
	f := strings.Fields(line)
	if len(f) < minStateCols {
		return weighter.ServerState{}, fmt.Errorf("%d fields, want at least %d", len(f), minStateCols)
	}
	if f[colBackend] != backend {
		return weighter.ServerState{}, fmt.Errorf("backend %q, want %q", f[colBackend], backend)
	}
	op, err := opState(f[colOpState])
	if err != nil {
		return weighter.ServerState{}, err
	}
	adm, err := strconv.ParseUint(f[colAdmin], 10, 16)
	if err != nil {
		return weighter.ServerState{}, fmt.Errorf("srv_admin_state: %w", err)
	}
	uw, err := parseWeight(f[colUWeight])
	if err != nil {
		return weighter.ServerState{}, fmt.Errorf("srv_uweight: %w", err)
	}
	iw, err := parseWeight(f[colIWeight])
	if err != nil {
		return weighter.ServerState{}, fmt.Errorf("srv_iweight: %w", err)
	}
	return weighter.ServerState{
		Name:          f[colName],
		Address:       net.JoinHostPort(f[colAddr], f[colPort]),
		Host:          fqdn(f[colFQDN]),
		Weight:        uw,
		InitialWeight: iw,
		Admin:         adminState(adm),
		Operational:   op,
	}, nil
}

func parseWeight(s string) (int, error) {
	w, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if !weighter.ValidWeight(w) {
		return 0, fmt.Errorf("weight %d out of 0..%d", w, weighter.MaxWeight)
	}
	return w, nil
}

// fqdn is srv_fqdn without its trailing dot, "" for HAProxy's "-" (none).
func fqdn(s string) string {
	if s == "-" {
		return ""
	}
	return strings.TrimSuffix(s, ".")
}
