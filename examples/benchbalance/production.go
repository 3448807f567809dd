package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

// The scenarios (-scenario).
const (
	scenarioLab     = "lab"              // 240 clients of 20 s, control / weighted / oracle (the first bench)
	scenarioBurst   = "long-lived-burst" // the production world's bench: hour-long clients, three heavy ones at 180 s
	scenarioDrift   = "drift"            // hour-long clients, 30 % of them ×10 or ÷10 once during the run
	scenarioMany    = "many"             // hour-long clients, as many as the open-file limit allows, on 16 servers
	scenarioRestart = "restart"          // hour-long clients; every HAProxy restarts at 180 s and its clients reconnect within 5 s
	scenarioShort   = "short-lived"      // the lab's 20 s clients with the production arms, each client from its own address
)

// scenario is what a -scenario sets besides the flags it defaults.
type scenario struct {
	arms           []armSpec
	haproxyTimeout string
}

// prodArms are the production scenarios' arms: leastconn, the quick start as shipped,
// the same with the README's recommended shedding for the production world, each of
// those two again with the pin table's two lines in its HAProxy backend and the
// weighter given that HAProxy's configuration file (pin, pin+shed), and the oracle
// (last: the clients' placed connection).
var prodArms = []armSpec{
	{Name: "leastconn", Kind: kindControl},
	{Name: "default", Kind: kindWeighted},
	{Name: "shed", Kind: kindWeighted, Shed: true},
	{Name: "pin", Kind: kindWeighted, Pin: true},
	{Name: "pin+shed", Kind: kindWeighted, Shed: true, Pin: true},
	{Name: "oracle", Kind: kindOracle},
}

var scenarios = map[string]scenario{
	scenarioLab:     {arms: labArms, haproxyTimeout: "5m"},
	scenarioBurst:   {arms: prodArms, haproxyTimeout: "1h"},
	scenarioDrift:   {arms: prodArms, haproxyTimeout: "1h"},
	scenarioMany:    {arms: prodArms, haproxyTimeout: "1h"},
	scenarioRestart: {arms: prodArms, haproxyTimeout: "1h"},
	scenarioShort:   {arms: prodArms, haproxyTimeout: "5m"},
}

// heavyReadAt is when the heavy clients' servers are read: the end of the first figures
// window that starts at or after the burst.
func (o options) heavyReadAt() time.Duration {
	k := max(0, int(math.Ceil(float64(o.BurstAt-o.Warmup)/float64(o.Window))))
	return o.Warmup + time.Duration(k+1)*o.Window
}

// finish ends a production run: where the heavy clients are, what each weighter says
// (sheds, fast signal reader), then the clients close and the sinks drain, and the lines
// the clients wrote are set against the lines the sinks received.
func (l *lab) finish(ctx context.Context, prod *prodTraffic, res *seedResult) error {
	if l.o.HeavyClients > 0 {
		res.HeavyEnd = l.heavyPerArm(ctx)
	}
	where := map[string]string{} // per pinning arm: its pins against where their clients are
	for _, a := range l.arms {
		if a.spec.Pin {
			where[a.spec.Name] = pinsWhere(ctx, a.socket, l.backend)
		}
	}
	res.Sheds = make([]float64, len(l.arms))
	res.Readers = make([]string, len(l.arms))
	for i, a := range l.arms {
		res.Sheds[i] = math.NaN()
		if a.weigher == nil {
			continue
		}
		m, err := scrapeWeighter(ctx, a.listen)
		if err != nil {
			return fmt.Errorf("%s weighter's /metrics: %w", a.spec.Name, err)
		}
		res.Sheds[i], res.Readers[i] = m.sheds, m.reader
	}
	l.traffic()
	l.wg.Wait()
	l.traffic = nil
	res.Sent = prod.sentLines()
	res.Received = l.drain(ctx)
	for _, a := range l.arms {
		if a.spec.Shed {
			if sheds := shedsLogged(a.logPath, prod.start); len(sheds) > 0 {
				res.ShedLog = append(res.ShedLog, a.spec.Name+": "+strings.Join(sheds, "; "))
			}
		}
		if a.spec.Pin {
			res.PinLog = append(res.PinLog, a.spec.Name+": "+pinsLogged(a.logPath, prod.start)+"; at the end "+where[a.spec.Name])
		}
	}
	return nil
}

// drain waits until no arm's sinks receive another line for 1 s (at most 20 s) once the
// clients have closed, and returns each arm's lines received.
func (l *lab) drain(ctx context.Context) []int64 {
	total := func() []int64 {
		out := make([]int64, len(l.arms))
		for i, a := range l.arms {
			for _, n := range loadlab.ReadLines(a.sinks) {
				out[i] += n
			}
		}
		return out
	}
	last, still := total(), 0
	for deadline := time.Now().Add(20 * time.Second); still < 5 && time.Now().Before(deadline); {
		if !loadlab.SleepCtx(ctx, 200*time.Millisecond) {
			break
		}
		now := total()
		if equalInts(now, last) {
			still++
		} else {
			still = 0
		}
		last = now
	}
	return last
}

func equalInts(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// heavyPerArm is, per arm, the most heavy clients on one server now, from HAProxy's
// `show sess` (the short form: one line per stream, with its client address and server);
// -1 for an arm whose HAProxy could not be read.
func (l *lab) heavyPerArm(ctx context.Context) []int {
	out := make([]int, len(l.arms))
	for i, a := range l.arms {
		reply, err := loadlab.RuntimeCommand(ctx, a.socket, "show sess")
		if err != nil {
			out[i] = -1
			continue
		}
		out[i] = mostHeavyOnOneServer(reply)
	}
	return out
}

// mostHeavyOnOneServer counts, in a `show sess` reply, the streams from the heavy
// clients' addresses (heavyNet) per server, and returns the largest count.
func mostHeavyOnOneServer(reply string) int {
	per := map[string]int{}
	most := 0
	for _, line := range strings.Split(reply, "\n") {
		var src, srv string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "src="); ok {
				src = v
			} else if v, ok := strings.CutPrefix(f, "srv="); ok {
				srv = v
			}
		}
		prefix := fmt.Sprintf("%d.%d.", heavyNet[0], heavyNet[1])
		if !strings.HasPrefix(src, prefix) || srv == "" || srv == "<none>" {
			continue
		}
		per[srv]++
		most = max(most, per[srv])
	}
	return most
}

// shedsLogged lists the sheds a weighter logged ("session shed" lines): when, after the
// traffic started at start, from which server, which client, at what rate; so a run
// says which sessions were moved (a heavy client's address is 127.200.0.x).
func shedsLogged(path string, start time.Time) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `msg="session shed"`) {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		at, err := time.Parse(time.RFC3339Nano, kv["time"])
		if err != nil {
			continue
		}
		client, _, _ := strings.Cut(kv["client"], ":")
		rate, _ := strconv.ParseFloat(kv["rate_bytes_per_second"], 64)
		out = append(out, fmt.Sprintf("%.0fs %s %s %.0f/s", at.Sub(start).Seconds(), kv["server"], client, rate/float64(len(datapoint))))
	}
	return out
}

// pinsLogged sums up the pins a weighter logged: whether it said it pins ("pinning
// heavy clients", or why not: "clients not pinned", "clients not measured"), each batch
// written ("pins written": when after the traffic started at start, how many set and
// cleared) and the pins in force after the last one.
func pinsLogged(path string, start time.Time) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	var state string
	var batches []string
	set, cleared, pinned := 0, 0, "0"
	for _, line := range strings.Split(string(b), "\n") {
		kv := loadlab.LogFields(line)
		switch kv["msg"] {
		case "pinning heavy clients", "clients not pinned", "clients not measured", "pin table full", "pin table not read":
			if state == "" || kv["msg"] != "pinning heavy clients" {
				state = kv["msg"]
				if r := kv["reason"]; r != "" {
					state += " (" + r + ")"
				}
			}
		case "pins written":
			at, err := time.Parse(time.RFC3339Nano, kv["time"])
			if err != nil {
				continue
			}
			s, _ := strconv.Atoi(kv["set"])
			c, _ := strconv.Atoi(kv["cleared"])
			set, cleared, pinned = set+s, cleared+c, kv["pinned"]
			batches = append(batches, fmt.Sprintf("%.0fs +%d-%d", at.Sub(start).Seconds(), s, c))
		}
	}
	if state == "" {
		state = "said nothing of pins"
	}
	out := fmt.Sprintf("%s; %d pins set, %d cleared, %s in force at the end", state, set, cleared, pinned)
	if len(batches) > 0 {
		out += " (writes: " + strings.Join(batches, ", ") + ")"
	}
	return out
}

// pinsWhere compares, at the end of a run, a pinning arm's pin table (`show table`: client
// address → server_id) with where each pinned client's connection is (`show sess`): how
// many pinned clients sit on their pin's server, how many elsewhere (a pin only steers a
// client's next connection), and how many pins each server has.
func pinsWhere(ctx context.Context, socket, backend string) string {
	table, err := loadlab.RuntimeCommand(ctx, socket, "show table "+backend)
	if err != nil {
		return "pin table not read: " + err.Error()
	}
	sess, err := loadlab.RuntimeCommand(ctx, socket, "show sess")
	if err != nil {
		return "sessions not read: " + err.Error()
	}
	state, err := loadlab.RuntimeCommand(ctx, socket, "show servers state "+backend)
	if err != nil {
		return "servers not read: " + err.Error()
	}
	return comparePins(table, sess, state)
}

// comparePins is pinsWhere's count from the three replies.
func comparePins(table, sess, state string) string {
	names := map[string]string{} // srv_id → srv_name, from `show servers state`
	for _, l := range strings.Split(state, "\n") {
		if f := strings.Fields(l); len(f) > 3 && !strings.HasPrefix(l, "#") {
			names[f[2]] = f[3]
		}
	}
	on := map[string]string{} // client address → server of its connection
	for _, l := range strings.Split(sess, "\n") {
		var src, srv string
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "src="); ok {
				src, _, _ = strings.Cut(v, ":")
			} else if v, ok := strings.CutPrefix(f, "srv="); ok {
				srv = v
			}
		}
		if src != "" && srv != "" && srv != "<none>" {
			on[src] = srv
		}
	}
	pins, sits, away, gone := 0, 0, 0, 0
	per := map[string]int{}
	for _, l := range strings.Split(table, "\n") {
		var key, id string
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "key="); ok {
				key = v
			} else if v, ok := strings.CutPrefix(f, "server_id="); ok {
				id = v
			}
		}
		if key == "" || id == "" {
			continue
		}
		pins++
		srv := names[id]
		per[srv]++
		switch on[key] {
		case "":
			gone++
		case srv:
			sits++
		default:
			away++
		}
	}
	var counts []string
	for _, s := range slices.Sorted(maps.Keys(per)) {
		counts = append(counts, fmt.Sprintf("%s=%d", s, per[s]))
	}
	return fmt.Sprintf("%d pins: %d clients on their pin's server, %d connected elsewhere, %d not connected; pins per server %s",
		pins, sits, away, gone, strings.Join(counts, " "))
}

// weighterFigures is what a weighter's /metrics says at the end of a run.
type weighterFigures struct {
	sheds  float64 // haproxy_weighter_sessions_shed_total, summed over servers
	reader string  // the fast_signal_reader whose value is 1 ("" when none)
}

// scrapeWeighter reads a weighter's /metrics.
func scrapeWeighter(ctx context.Context, listen string) (weighterFigures, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second) // a busy machine (many)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/metrics", nil)
	if err != nil {
		return weighterFigures{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return weighterFigures{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return weighterFigures{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseWeighterMetrics(resp.Body)
}

// parseWeighterMetrics reads the two series the bench prints from Prometheus' text format.
func parseWeighterMetrics(r io.Reader) (weighterFigures, error) {
	var f weighterFigures
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return f, fmt.Errorf("metrics line %q: %w", line, err)
		}
		switch name {
		case "haproxy_weighter_sessions_shed_total":
			f.sheds += v
		case "haproxy_weighter_fast_signal_reader":
			if v == 1 {
				_, r, _ := strings.Cut(labels, `reader="`)
				r, _, _ = strings.Cut(r, `"`)
				f.reader = r
			}
		}
	}
	if err := sc.Err(); err != nil {
		return f, fmt.Errorf("read /metrics: %w", err)
	}
	return f, nil
}

// writeShedConfig writes, at path, the README's minimal config with its commented `shed:`
// line on: what a user of the quick start who turns shedding on for the production world
// does. socket and promURL replace the README's values (those of the quick start's flags).
func writeShedConfig(readme string, qs quickStart, path, socket, promURL string) error {
	b, err := os.ReadFile(readme)
	if err != nil {
		return fmt.Errorf("shed arm: %w", err)
	}
	text, err := shedConfig(string(b), qs, socket, promURL)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("shed arm: write config: %w", err)
	}
	return nil
}

// shedConfig is the README's minimal config (the Quick start's yaml block) with the
// quick start's socket and Prometheus URL replaced and its `# shed:` line uncommented.
// It refuses a config that does not name the quick start's backend, socket and URL, or
// has no commented shed line: the arm would not be the quick start with shedding.
func shedConfig(readme string, qs quickStart, socket, promURL string) (string, error) {
	yaml, err := minimalConfig(readme)
	if err != nil {
		return "", err
	}
	replace := map[string]string{}
	for flag, to := range map[string]string{"--socket": socket, "--prometheus-url": promURL} {
		from, ok := flagValue(qs.Args, flag)
		if !ok || !strings.Contains(yaml, from) {
			return "", fmt.Errorf("README minimal config: no %s value %q of the quick start", flag, from)
		}
		replace[from] = to
	}
	backend, _ := flagValue(qs.Args, "--backend")
	if !strings.Contains(yaml, "name: "+backend) {
		return "", fmt.Errorf("README minimal config: no backend %q (the quick start's)", backend)
	}
	var out strings.Builder
	shed := false
	for _, line := range strings.SplitAfter(yaml, "\n") {
		for from, to := range replace {
			line = strings.ReplaceAll(line, from, to)
		}
		if t := strings.TrimLeft(line, " "); strings.HasPrefix(t, "# shed:") && !shed {
			line = line[:len(line)-len(t)] + strings.TrimPrefix(t, "# ")
			shed = true
		}
		out.WriteString(line)
	}
	if !shed {
		return "", errors.New("README minimal config: no `# shed:` line to turn on")
	}
	return out.String(), nil
}

// minimalConfig is the first ```yaml block of the README's Quick start.
func minimalConfig(readme string) (string, error) {
	section, ok := sectionOf(readme, "## Quick start")
	if !ok {
		return "", errors.New("README: no \"## Quick start\" section")
	}
	_, rest, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		return "", errors.New("README quick start: no ```yaml block (the minimal config)")
	}
	yaml, _, ok := strings.Cut(rest, "```")
	if !ok {
		return "", errors.New("README quick start: unterminated ```yaml block")
	}
	return yaml, nil
}

// prodSeed is one seed's production figures.
type prodSeed struct {
	f   figures
	res seedResult
}

// writeProdTable prints the production scenarios' balance table: p50 / p90 per arm and
// the gap each weighted arm closes.
func writeProdTable(w io.Writer, arms []armSpec, rows []figures) {
	ctl, orc := armIndex(arms, kindControl), armIndex(arms, kindOracle)
	fmt.Fprintf(w, "%-12s", "seed")
	for _, a := range arms {
		fmt.Fprintf(w, " %-20s", a.Name+" p50 / p90")
	}
	for _, a := range arms {
		if a.Kind == kindWeighted {
			fmt.Fprintf(w, " %-24s", "gap closed "+a.Name)
		}
	}
	fmt.Fprintln(w)
	for _, f := range rows {
		fmt.Fprintf(w, "%-12s", f.Label)
		for i := range arms {
			fmt.Fprintf(w, " %-20s", ratio(f.P50[i])+" / "+ratio(f.P90[i]))
		}
		for i, a := range arms {
			if a.Kind == kindWeighted {
				g50 := gapClosed(f.P50[ctl], f.P50[orc], f.P50[i])
				g90 := gapClosed(f.P90[ctl], f.P90[orc], f.P90[i])
				fmt.Fprintf(w, " %-24s", percent(g50)+" / "+percent(g90))
			}
		}
		fmt.Fprintln(w)
	}
}

func armIndex(arms []armSpec, k armKind) int {
	for i, a := range arms {
		if a.Kind == k {
			return i
		}
	}
	return -1
}

// writeProdLines prints, per seed and arm, the lines sent and lost, the sheds and the
// heavy clients on one server, then the means over the seeds.
func writeProdLines(w io.Writer, o options, seeds []prodSeed) {
	hours := o.Duration.Hours() * float64(o.Servers)
	fmt.Fprintf(w, "%-6s %-10s %12s %10s %9s %6s %14s %-22s %s\n", "seed", "arm", "lines sent", "lines lost", "lost", "sheds", "sheds/h/server", "heavy on one server", "fast signal")
	type sum struct {
		sent, lost, sheds, after, end float64
		n, nAfter, nEnd               int
	}
	sums := make([]sum, len(o.arms))
	for _, s := range seeds {
		for i, a := range o.arms {
			sent, lost := s.res.Sent[i], s.res.Sent[i]-s.res.Received[i]
			heavy := heavyPair(s.res.HeavyAfter, s.res.HeavyEnd, i)
			sheds, perH := "-", "-"
			if !math.IsNaN(s.res.Sheds[i]) {
				sheds, perH = fmt.Sprintf("%.0f", s.res.Sheds[i]), fmt.Sprintf("%.2f", s.res.Sheds[i]/hours)
				sums[i].sheds += s.res.Sheds[i]
			}
			reader := s.res.Readers[i]
			if reader == "" {
				reader = "-"
			}
			fmt.Fprintf(w, "%-6s %-10s %12d %10d %8.4f%% %6s %14s %-22s %s\n", s.f.Label, a.Name, sent, lost, pct(lost, sent), sheds, perH, heavy, reader)
			sums[i].sent += float64(sent)
			sums[i].lost += float64(lost)
			sums[i].n++
			if i < len(s.res.HeavyAfter) && s.res.HeavyAfter[i] >= 0 {
				sums[i].after += float64(s.res.HeavyAfter[i])
				sums[i].nAfter++
			}
			if i < len(s.res.HeavyEnd) && s.res.HeavyEnd[i] >= 0 {
				sums[i].end += float64(s.res.HeavyEnd[i])
				sums[i].nEnd++
			}
		}
	}
	if len(seeds) < 2 {
		return
	}
	for i, a := range o.arms {
		s := sums[i]
		sheds, perH := "-", "-"
		if a.Kind == kindWeighted {
			sheds = fmt.Sprintf("%.1f", s.sheds/float64(s.n))
			perH = fmt.Sprintf("%.2f", s.sheds/float64(s.n)/hours)
		}
		heavy := "-"
		if s.nAfter > 0 && s.nEnd > 0 {
			heavy = fmt.Sprintf("%.2f / %.2f", s.after/float64(s.nAfter), s.end/float64(s.nEnd))
		}
		n := float64(s.n)
		fmt.Fprintf(w, "%-6s %-10s %12.0f %10.0f %8.4f%% %6s %14s %-22s\n", "mean", a.Name, s.sent/n, s.lost/n, 100*s.lost/s.sent, sheds, perH, heavy)
	}
}

func heavyPair(after, end []int, i int) string {
	if i >= len(after) || i >= len(end) {
		return "-"
	}
	f := func(n int) string {
		if n < 0 {
			return "?"
		}
		return strconv.Itoa(n)
	}
	return f(after[i]) + " / " + f(end[i])
}

func pct(part, whole int64) float64 {
	if whole == 0 {
		return math.NaN()
	}
	return 100 * float64(part) / float64(whole)
}
