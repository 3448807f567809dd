package daemon

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"math"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The status page in a real browser: Debian's headless chromium loads the
// page the daemon serves, dumps the DOM it built and takes a screenshot,
// which the test decodes and measures: the page rendered, each server has
// its bar in its colour and of its length, the sparkline is drawn, and
// hostile names stayed text.
//
// STATUS_PAGE_PNG=<path> keeps the screenshot of the realistic page; the
// README's docs/status-page.png is made so (from the repository's root):
//
//	STATUS_PAGE_PNG=$PWD/docs/status-page.png go test -count=1 -run TestStatusPageInBrowser ./daemon/

// The bars' colours, as statuspage's page.html fills them.
var barColours = map[string]color.RGBA{
	"ok":   {0x3b, 0x7d, 0xd8, 0xff},
	"warm": {0xf0, 0xa5, 0x00, 0xff},
	"hot":  {0xd6, 0x27, 0x28, 0xff},
}

// pageBarWidth is a bar's full width in CSS pixels, as page.html draws it.
const pageBarWidth = 200

// sparkColour is the sparkline's stroke.
var sparkColour = color.RGBA{0x6a, 0x3f, 0xb5, 0xff}

// TestStatusPageInBrowser: a backend of seven servers on a real HAProxy,
// cycled for 16 minutes of the fake clock (weights written to HAProxy,
// sessions shed through it), as chromium shows it; then a page of hostile
// names.
func TestStatusPageInBrowser(t *testing.T) {
	t.Run("realistic", func(t *testing.T) {
		d, reg, plan := storyDaemon(t)
		srv := httptest.NewServer(d.handler(reg))
		defer srv.Close()

		dom := testenv.ChromiumDOM(t, srv.URL+"/")
		assert.Equal(t, len(plan.Servers), strings.Count(dom, `<svg class="bar"`), "one bar per server")
		assert.Contains(t, dom, "<polyline", "the sparkline")

		shot := chromiumScreenshot(t, srv.URL+"/")
		img := decodePNG(t, shot)
		assertNotBlank(t, img)
		bars := findBars(img)
		bars50 := pageBars(t, dom)
		require.Len(t, bars50, len(plan.Servers), "bars the page wrote")
		require.Len(t, bars, len(plan.Servers), "bars found in the screenshot: %+v", bars)
		hot, cool := 0, 0
		for i, b := range bars {
			want := bars50[i]
			assert.Equal(t, want.class, b.class, "%s's bar colour", plan.Servers[i].Server)
			// The mean's marker (2 px) may cover part of a bar.
			assert.InDelta(t, want.width, b.width, 3, "%s's bar: %d px drawn, %d px written", plan.Servers[i].Server, b.width, want.width)
			if plan.Servers[i].Load > plan.Servers[hot].Load {
				hot = i
			}
			if plan.Servers[i].Load < plan.Servers[cool].Load {
				cool = i
			}
		}
		assert.Equal(t, "hot", bars[hot].class, "the hottest server's bar is red")
		assert.Greater(t, bars[hot].width, 2*bars[cool].width, "the hottest server's bar against the coolest's")
		assert.Greater(t, countNear(img, sparkColour, 40), 100, "sparkline pixels")
		if path := os.Getenv("STATUS_PAGE_PNG"); path != "" {
			require.NoError(t, os.WriteFile(path, shot, 0o644))
			t.Logf("screenshot written to %s", path)
		}
	})

	t.Run("hostile names", func(t *testing.T) {
		hostile := []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(2)>`, `x' onmouseover='alert(3)`}
		f := newDryFixture(t, true, hostile...)
		f.r.unit.Backend.Name = `be"><svg onload=alert(4)>`
		f.src.set(map[string]float64{hostile[0]: 10, hostile[1]: 20, hostile[2]: 60, `<iframe src=x>`: 5}, nil)
		f.r.step(context.Background())
		srv := httptest.NewServer(f.d.handler(f.reg))
		defer srv.Close()

		dom := testenv.ChromiumDOM(t, srv.URL+"/")
		for _, h := range hostile {
			assert.Contains(t, dom, `<td class="name">`+htmlText(h)+`</td>`, "the name as text in the DOM")
		}
		assert.Contains(t, dom, htmlText(`<iframe src=x>`), "the unknown series as text")
		for _, el := range []string{"<script", "<img", "<iframe", "<svg onload"} {
			assert.NotContains(t, dom, el, "an element the page did not write")
		}
		assert.Equal(t, 3, strings.Count(dom, `<svg class="bar"`), "one bar per server")

		img := decodePNG(t, chromiumScreenshot(t, srv.URL+"/"))
		assertNotBlank(t, img)
		bars := findBars(img)
		require.Len(t, bars, 3, "%+v", bars)
		// Table order is by name: `"><img…` (20), `<script>…` (10), `x' …` (60); the mean is 30.
		assert.Equal(t, []string{"ok", "ok", "hot"}, []string{bars[0].class, bars[1].class, bars[2].class})
		assert.Greater(t, bars[2].width, bars[0].width)
		assert.Greater(t, bars[0].width, bars[1].width)
	})
}

// pageBar is one server's bar as the page wrote it: the row's class and
// the filled rect's width (0: none).
var pageBar = regexp.MustCompile(`(?s)<tr class="load-(\w+)[^"]*">.*?<svg class="bar"[^>]*>(.*?)</svg>`)
var pageFill = regexp.MustCompile(`<rect class="(?:ok|warm|hot)" x="0" y="2" width="(\d+)"`)

// pageBars are the server table's bars as the DOM holds them, in table
// order: what chromium was told to draw.
func pageBars(t *testing.T, dom string) []foundBar {
	t.Helper()
	var out []foundBar
	for _, m := range pageBar.FindAllStringSubmatch(dom, -1) {
		b := foundBar{class: m[1]}
		if f := pageFill.FindStringSubmatch(m[2]); f != nil {
			w, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			b.width = w
		}
		out = append(out, b)
	}
	return out
}

// htmlText is s as the DOM serializer writes text: &, < and > escaped.
func htmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// chromiumScreenshot returns the PNG chromium takes of url at 1200×900.
func chromiumScreenshot(t *testing.T, url string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page.png")
	testenv.Chromium(t, "--screenshot="+path, url)
	shot, err := os.ReadFile(path)
	require.NoError(t, err, "chromium wrote no screenshot")
	return shot
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, 1200, 900), img.Bounds())
	return img
}

// assertNotBlank: a rendered page has ink (text, bars) on a good share of
// it and many colours, not one.
func assertNotBlank(t *testing.T, img image.Image) {
	t.Helper()
	ink, colours := 0, map[color.RGBA]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := rgba(img.At(x, y))
			colours[c] = true
			if c.R < 200 || c.G < 200 || c.B < 200 {
				ink++
			}
		}
	}
	assert.Greater(t, ink, b.Dx()*b.Dy()/100, "pixels with ink")
	assert.Greater(t, len(colours), 50, "distinct colours")
}

func rgba(c color.Color) color.RGBA {
	r, g, b, a := c.RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
}

// near: every channel within tol.
func near(a, b color.RGBA, tol int) bool {
	d := func(x, y uint8) int { return max(int(x)-int(y), int(y)-int(x)) }
	return d(a.R, b.R) <= tol && d(a.G, b.G) <= tol && d(a.B, b.B) <= tol
}

func countNear(img image.Image, c color.RGBA, tol int) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if near(rgba(img.At(x, y)), c, tol) {
				n++
			}
		}
	}
	return n
}

// foundBar is one bar measured in a screenshot.
type foundBar struct {
	class string
	width int // pixels of its colour on its widest line
	top   int // its first line
}

// findBars measures the bars of a screenshot, top to bottom. A bar is a
// band of lines with bar-coloured pixels starting at the bars' column:
// the x where most lines with a bar colour start (the legend's swatches
// start further left, on fewer lines).
func findBars(img image.Image) []foundBar {
	b := img.Bounds()
	classOf := func(x, y int) string {
		c := rgba(img.At(x, y))
		for class, bc := range barColours {
			if near(c, bc, 2) {
				return class
			}
		}
		return ""
	}
	starts := map[int]int{}
	first := make([]int, b.Max.Y)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		first[y] = -1
		for x := b.Min.X; x < b.Max.X; x++ {
			if classOf(x, y) != "" {
				first[y] = x
				starts[x]++
				break
			}
		}
	}
	column, most := -1, 0
	for x, n := range starts {
		if n > most || (n == most && x < column) {
			column, most = x, n
		}
	}
	var bars []foundBar
	inBar := false
	for y := b.Min.Y; y < b.Max.Y; y++ {
		if first[y] != column || column < 0 {
			inBar = false
			continue
		}
		count := map[string]int{}
		for x := column; x < min(column+pageBarWidth, b.Max.X); x++ {
			if c := classOf(x, y); c != "" {
				count[c]++
			}
		}
		class, width := "", 0
		for c, n := range count {
			if n > width {
				class, width = c, n
			}
		}
		if !inBar {
			bars = append(bars, foundBar{class: class, top: y})
			inBar = true
		}
		last := &bars[len(bars)-1]
		if width > last.width {
			last.class, last.width = class, width
		}
	}
	return bars
}

// storyServers are the realistic page's servers.
var storyServers = []string{"web-1", "web-2", "web-3", "web-4", "web-5", "web-6", "web-7"}

// storyDaemon is a daemon weighting be_app on a real HAProxy over 16
// minutes of its fake clock, one cycle per 10 s: seven servers with
// ordinary connections (real ones, through HAProxy), a heavy stream on
// web-3 at minute 3 and on web-5 at minute 9, both shed through HAProxy,
// and at the end one on web-6 that the page shows hot. It returns the
// daemon, its registry and the last plan.
func storyDaemon(t *testing.T) (*Daemon, *prometheus.Registry, weighter.Plan) {
	t.Helper()
	var cfg strings.Builder
	cfg.WriteString(testenv.HAProxyDefaults)
	front := testenv.FreePort(t)
	fmt.Fprintf(&cfg, "frontend fe_app\n  bind 127.0.0.1:%d\n  default_backend be_app\nbackend be_app\n  balance roundrobin\n", front)
	for _, s := range storyServers {
		fmt.Fprintf(&cfg, "  server %s %s weight 100\n", s, testenv.StartDiscardServer(t))
	}
	h := testenv.StartHAProxy(t, cfg.String())
	client, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	target := client.Backend("be_app")

	// Round robin at equal weights places the connections evenly, 4 a
	// server; then web-7, as if just added, keeps one: the server a whale
	// can be shed to without making it hot (the shed planner's room).
	var conns []net.Conn
	for range 4 * len(storyServers) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", front))
		require.NoError(t, err)
		_, err = c.Write([]byte("x")) // HAProxy picks the server at once; the discard server reads it
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var listed []haproxy.Session
	for len(listed) < len(conns) && ctx.Err() == nil {
		listed, err = target.Sessions(ctx)
		require.NoError(t, err)
	}
	server := map[string]string{}
	for _, s := range listed {
		server[s.Client] = s.Server
	}
	kept := 0
	for _, c := range conns {
		if server[c.LocalAddr().String()] == "web-7" {
			if kept++; kept > 1 {
				c.Close()
			}
		}
	}
	require.Equal(t, 4, kept, "round robin gave web-7 %d connections", kept)

	clock := testenv.NewClock()
	start := clock.Now()
	src := &storySource{b: target, clock: clock, start: start, whales: map[string]time.Duration{
		"web-3": 3 * time.Minute, "web-5": 9 * time.Minute, "web-6": 15*time.Minute + 40*time.Second}}
	policy := weighter.DefaultPolicy()
	ctl, err := weighter.NewController(policy)
	require.NoError(t, err)
	sp := weighter.DefaultShed()
	sp.Cooldown = duration.Duration(time.Minute) // every client is 127.0.0.1
	sp.MaxShare = 0.1                            // 2 of the 28 sessions a cycle (0.02 would allow none)
	shedder, err := weighter.NewShedder(sp)
	require.NoError(t, err)
	stats, err := config.NewSource("haproxy", &haproxy.StatsConfig{Counter: haproxy.CounterBytesIn})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	d := New(&config.Config{Interval: duration.Duration(10 * time.Second)}, Options{Clock: clock, Registry: reg})
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be_app", Source: src, Target: target, Controller: ctl, Shedder: shedder},
		Kind: "haproxy", target: target, client: client, socket: haproxy.Config{Socket: "/run/haproxy/admin.sock"},
		source: stats, fast: &fastUnit{chain: &fastsignal.Chain{}, kind: "haproxy"}}
	r := newRunner(u, Timing{Interval: 10 * time.Second, Timeout: 10 * time.Second}, clock, d.metrics, slog.New(slog.DiscardHandler))
	d.metrics.Init("be_app")
	d.group = &group{units: []*managedBackend{u}, runners: []*runner{r}}

	var last weighter.Cycle
	for range 16 * 6 {
		last = r.step(context.Background())
		require.Contains(t, []string{weighter.ResultOK, weighter.ResultSkippedCoverage}, last.Result, "%v", last.Err)
		clock.Advance(10 * time.Second)
	}
	clock.Advance(-8 * time.Second) // the page is read 2 s after the last cycle
	require.NotEmpty(t, src.shed(), "no session was shed through HAProxy")
	return d, reg, last.Plan
}

// storySource is the realistic page's fast signal: HAProxy's real sessions
// of the backend, each given a rate by the story (the test cannot make
// them carry gigabytes). Each server's ordinary connections send between
// 28 and 32 kB/s, a little more or less as the minutes go; a server's
// whale, from its time on, 180 kB/s and 5 % more each minute until
// shedding closes it: its server's bytes go above 1.75× the mean, and
// web-7 (one connection) can take it without going hot, so it is shed.
type storySource struct {
	b      *haproxy.RuntimeBackend
	clock  Clock
	start  time.Time
	whales map[string]time.Duration // server → when its heavy stream starts

	mu     sync.Mutex
	whale  map[string]uint64 // server → the serial of its whale session
	closed []string          // servers whose whale is gone
}

func (s *storySource) Fetch(ctx context.Context, _ []weighter.ServerState) (weighter.Loads, error) {
	l, _, err := s.FetchSignal(ctx, nil)
	return l, err
}

func (s *storySource) FetchSignal(ctx context.Context, _ []weighter.ServerState) (weighter.Loads, *weighter.Signal, error) {
	sessions, err := s.b.Sessions(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := s.clock.Now()
	since := now.Sub(s.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.whale == nil {
		s.whale = map[string]uint64{}
	}
	open := map[uint64]bool{}
	for _, ss := range sessions {
		open[ss.Serial] = true
	}
	for server, serial := range s.whale {
		if !open[serial] && !slices.Contains(s.closed, server) {
			s.closed = append(s.closed, server)
		}
	}
	sig := &weighter.Signal{Pipeline: weighter.PipelineFast, Fast: weighter.FastLive, FastAt: now,
		Servers: map[string]weighter.FastInput{}}
	rates, conns := map[string]float64{}, map[string]float64{}
	for _, ss := range sessions {
		rate := 28e3 + 4e3*(0.5+0.5*math.Sin(since.Minutes()/4+float64(ss.Serial%7)))
		if at, ok := s.whales[ss.Server]; ok && since >= at && !slices.Contains(s.closed, ss.Server) {
			if _, chosen := s.whale[ss.Server]; !chosen {
				s.whale[ss.Server] = ss.Serial
			}
			if s.whale[ss.Server] == ss.Serial { // still speeding up: not coming down by itself
				rate = 180e3 * (1 + 0.05*(since-at).Minutes())
			}
		}
		rates[ss.Server] += rate
		conns[ss.Server]++
		sig.Sessions = append(sig.Sessions, weighter.ShedSession{ID: ss.ID, Serial: ss.Serial, Server: ss.Server,
			Client: ss.Client, Age: since + 5*time.Minute, Rate: rate})
	}
	loads := weighter.Loads{}
	for server, r := range rates {
		per := r / conns[server]
		loads[server] = weighter.Series{{Time: now, Value: per}}
		sig.Servers[server] = weighter.FastInput{Local: r, Sessions: conns[server], Factor: 1}
	}
	return loads, sig, nil
}

// shed returns the servers whose whale was closed.
func (s *storySource) shed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.closed)
}
