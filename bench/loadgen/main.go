// Command loadgen POSTs one fixed body (or several in turn, or each once) to one URL at a
// fixed concurrency for a fixed time, over keep-alive connections, and prints what it saw
// as one JSON object.
//
// A Python client cannot drive a few thousand requests a second from one core; this
// can, so the benchmark measures archfit rather than its load generator
// (docs/benchmarks.md).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	Requests    int     `json:"requests"`
	Seconds     float64 `json:"seconds"`
	RequestsPS  float64 `json:"req_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	Non200      int     `json:"non_200"`
	Errors      int     `json:"errors"`
	Concurrency int     `json:"concurrency"`
	FirstError  string  `json:"first_error,omitempty"`
	// Every call's milliseconds (each worker's in the order it sent them), with -latencies:
	// for a caller that pools several runs into one median.
	LatenciesMs []float64 `json:"latencies_ms,omitempty"`
}

func main() {
	url := flag.String("url", "", "where to POST")
	bodyPath := flag.String("body", "", "file holding the request body; several, comma-separated, are sent in turn")
	concurrency := flag.Int("c", 1, "requests in flight at once, one connection each")
	duration := flag.Duration("d", 5*time.Second, "how long to send")
	caFile := flag.String("cacert", "", "PEM bundle to trust for an https URL (a webhook's CA)")
	once := flag.Bool("once", false, "send each body once, then stop (-d still bounds the run): for bodies that must not repeat, as a cold cache's never-seen images")
	keep := flag.Bool("latencies", false, "print every call's milliseconds too (latencies_ms)")
	flag.Parse()
	if *url == "" || *bodyPath == "" || *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "usage: loadgen -url URL -body FILE [-c N] [-d 5s] [-cacert FILE] [-once]")
		os.Exit(2)
	}
	var bodies [][]byte
	for _, path := range strings.Split(*bodyPath, ",") {
		body, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		bodies = append(bodies, body)
	}
	transport := &http.Transport{
		MaxIdleConns:        *concurrency,
		MaxIdleConnsPerHost: *concurrency,
		DisableCompression:  true,
	}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			fmt.Fprintln(os.Stderr, "no certificate in", *caFile)
			os.Exit(2)
		}
		// HTTP/1.1 over TLS, kept alive, as kube-apiserver calls a webhook.
		transport.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: transport}

	var (
		mu         sync.Mutex
		latencies  []time.Duration
		non200     int
		errors     int
		firstError string
		wg         sync.WaitGroup
	)
	// With -once, the workers share one count of bodies taken, so each is sent exactly once.
	var taken atomic.Int64
	start := time.Now()
	stop := start.Add(*duration)
	for w := 0; w < *concurrency; w++ {
		wg.Add(1)
		// Each worker starts its own share of the way through the bodies, then takes them in
		// turn: a body comes back only after every other one was sent, whatever the
		// concurrency (starting one apart, each body would be sent by every worker within a
		// few rounds, and a cache of recent bodies would answer most of them).
		next := w * len(bodies) / *concurrency
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad, failed := 0, 0
			problem := ""
			for time.Now().Before(stop) {
				sent := time.Now()
				var body []byte
				if *once {
					index := taken.Add(1) - 1
					if index >= int64(len(bodies)) {
						break
					}
					body = bodies[index]
				} else {
					body = bodies[next%len(bodies)]
					next++
				}
				request, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader(body))
				request.Header.Set("Content-Type", "application/json")
				response, err := client.Do(request)
				if err != nil {
					failed++
					if problem == "" {
						problem = err.Error()
					}
					continue
				}
				// Read the whole answer so the connection is reused.
				_, _ = io.Copy(io.Discard, response.Body)
				response.Body.Close()
				mine = append(mine, time.Since(sent))
				if response.StatusCode != http.StatusOK {
					bad++
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			non200 += bad
			errors += failed
			if firstError == "" {
				firstError = problem
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()

	var inOrder []float64
	if *keep {
		for _, latency := range latencies {
			inOrder = append(inOrder, float64(latency.Microseconds())/1000)
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	out := result{
		Requests:    len(latencies),
		Seconds:     elapsed,
		RequestsPS:  float64(len(latencies)) / elapsed,
		P50Ms:       quantile(latencies, 0.50),
		P90Ms:       quantile(latencies, 0.90),
		P99Ms:       quantile(latencies, 0.99),
		MaxMs:       quantile(latencies, 1),
		Non200:      non200,
		Errors:      errors,
		Concurrency: *concurrency,
		FirstError:  firstError,
		LatenciesMs: inOrder,
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}

// quantile is the nearest-rank q-quantile of sorted latencies, in milliseconds.
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(sorted) {
		rank = len(sorted) - 1
	}
	return float64(sorted[rank].Microseconds()) / 1000
}
