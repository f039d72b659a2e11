// Command noop-extender is a kube-scheduler extender that does nothing, as cheaply as Go's
// standard library allows: the floor any extender's throughput is judged against
// (bench/scheduler_throughput.py).
//
// filter passes every node: it echoes the NodeNames it was given (nodeCacheCapable true),
// or the Nodes list byte for byte (nodeCacheCapable false). prioritize reads the request
// and answers an empty HostPriorityList: kube-scheduler adds extender scores only for the
// hosts an extender returns, so an empty list is the same as a score of 0 for every node.
// GET /stats counts the calls answered, so the bench can tell that the scheduler really
// called it (with `ignorable: true` a failing extender is skipped, not reported).
//
//	noop-extender -listen 127.0.0.1:8888 -prefix /scheduler
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"sync/atomic"
)

// answered counts the calls answered per verb, for GET /stats.
var answered struct {
	Filter     atomic.Int64
	Prioritize atomic.Int64
}

// extenderArgs is the part of ExtenderArgs (k8s.io/kube-scheduler/extender/v1) a pass-through
// needs. The decoder skips the Pod; Nodes stays raw so that it is echoed without a re-encode.
type extenderArgs struct {
	Nodes     json.RawMessage
	NodeNames *[]string
}

// filterResult is ExtenderFilterResult with nothing filtered out. The scheduler reads
// NodeNames when nodeCacheCapable, Nodes otherwise; the other one is null.
type filterResult struct {
	Nodes     json.RawMessage
	NodeNames *[]string
}

func filter(w http.ResponseWriter, r *http.Request) {
	var args extenderArgs
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	respond(w, filterResult(args))
	answered.Filter.Add(1)
}

func prioritize(w http.ResponseWriter, r *http.Request) {
	// Drain the body so that the connection is reused; nothing in it changes the answer.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("[]\n"))
	answered.Prioritize.Add(1)
}

func stats(w http.ResponseWriter, _ *http.Request) {
	respond(w, map[string]int64{
		"filter":     answered.Filter.Load(),
		"prioritize": answered.Prioritize.Load(),
	})
}

func respond(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(body); err != nil {
		log.Printf("noop-extender: writing the answer: %v", err)
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8888", "host:port to serve on")
	prefix := flag.String("prefix", "/scheduler", "the path of the scheduler's urlPrefix")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("POST "+*prefix+"/filter", filter)
	mux.HandleFunc("POST "+*prefix+"/prioritize", prioritize)
	mux.HandleFunc("GET /stats", stats)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	log.Printf("noop-extender: serving %s%s on %s", *prefix, "/{filter,prioritize}", *listen)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
