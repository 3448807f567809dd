package sources

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchServers is a large backend: the daemon fetches once per backend per cycle.
const benchServers = 1000

func benchGraphiteReply() []byte {
	var b strings.Builder
	b.WriteString("[")
	for s := 0; s < benchServers; s++ {
		if s > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"target":"tcp.node-%d.rx","tags":{"name":"tcp.node-%d.rx"},"datapoints":[`, s, s)
		for i := 0; i < 30; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "[%d.5,%d]", i, 1796028450+10*i)
		}
		b.WriteString("]}")
	}
	b.WriteString("]")
	return []byte(b.String())
}

func benchPrometheusReply() []byte {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for s := 0; s < benchServers; s++ {
		if s > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"metric":{"server":"node-%d"},"value":[1796036800,"%d.5"]}`, s, s)
	}
	b.WriteString("]}}")
	return []byte(b.String())
}

func serve(b *testing.B, body []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkGraphiteFetch: 1000 servers × 30 points over loopback HTTP.
func BenchmarkGraphiteFetch(b *testing.B) {
	g, err := NewGraphite(GraphiteConfig{URL: serve(b, benchGraphiteReply()), Target: "x", ServerNode: intp(1)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if loads, err := g.Fetch(context.Background(), nil); err != nil || len(loads) != benchServers {
			b.Fatal(len(loads), err)
		}
	}
}

// BenchmarkPrometheusFetch: an instant vector of 1000 servers over loopback HTTP.
func BenchmarkPrometheusFetch(b *testing.B) {
	p, err := NewPrometheus(PrometheusConfig{URL: serve(b, benchPrometheusReply()), Query: "x"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if loads, err := p.Fetch(context.Background(), nil); err != nil || len(loads) != benchServers {
			b.Fatal(len(loads), err)
		}
	}
}
