// Command noop-webhook is a mutating admission webhook that decides nothing, as cheaply as
// Go's standard library allows: what kube-apiserver's call to any webhook costs a pod
// CREATE, the floor bench/webhook_latency.py judges archfit's webhook against.
//
// POST /allow answers every AdmissionReview allowed and unchanged. POST /answer answers it
// allowed with the fixed patch and warnings of the -answer file (an AdmissionResponse's
// `patch`, as RFC 6902 operations, and `warnings`), so the apiserver's cost of applying a
// mutation like archfit's is measured apart from archfit. Both read the whole review and
// echo its request.uid, as a webhook must. GET /stats counts the reviews answered.
//
//	noop-webhook -listen 127.0.0.1:8443 -cert tls.crt -key tls.key [-answer answer.json] [-h2]
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
	"sync/atomic"
)

// answered counts the reviews answered per path, for GET /stats.
var answered struct {
	Allow  atomic.Int64
	Answer atomic.Int64
}

// review is the part of an AdmissionReview (admission.k8s.io/v1) an answer needs.
type review struct {
	Request struct {
		UID string `json:"uid"`
	} `json:"request"`
}

type response struct {
	UID       string   `json:"uid"`
	Allowed   bool     `json:"allowed"`
	PatchType *string  `json:"patchType,omitempty"`
	Patch     []byte   `json:"patch,omitempty"` // encoding/json writes []byte as base64
	Warnings  []string `json:"warnings,omitempty"`
}

type reviewAnswer struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Response   response `json:"response"`
}

// fixed is what the -answer file holds.
type fixed struct {
	Patch    json.RawMessage `json:"patch"`
	Warnings []string        `json:"warnings"`
}

func handler(template response, count *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in review
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := template
		out.UID = in.Request.UID
		w.Header().Set("Content-Type", "application/json")
		answer := reviewAnswer{"admission.k8s.io/v1", "AdmissionReview", out}
		if err := json.NewEncoder(w).Encode(answer); err != nil {
			log.Printf("noop-webhook: writing the answer: %v", err)
			return
		}
		count.Add(1)
	}
}

func stats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{
		"allow":  answered.Allow.Load(),
		"answer": answered.Answer.Load(),
	})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8443", "host:port to serve on")
	cert := flag.String("cert", "", "PEM serving certificate")
	key := flag.String("key", "", "PEM key of -cert")
	answerFile := flag.String("answer", "", "JSON {patch: [...], warnings: [...]} for POST /answer")
	h2 := flag.Bool("h2", false, "offer HTTP/2 too (ALPN)")
	flag.Parse()

	withPatch := response{Allowed: true}
	if *answerFile != "" {
		raw, err := os.ReadFile(*answerFile)
		if err != nil {
			log.Fatalf("noop-webhook: %v", err)
		}
		var f fixed
		if err := json.Unmarshal(raw, &f); err != nil {
			log.Fatalf("noop-webhook: %s: %v", *answerFile, err)
		}
		jsonPatch := "JSONPatch"
		withPatch = response{Allowed: true, PatchType: &jsonPatch, Patch: f.Patch, Warnings: f.Warnings}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /allow", handler(response{Allowed: true}, &answered.Allow))
	mux.HandleFunc("POST /answer", handler(withPatch, &answered.Answer))
	mux.HandleFunc("GET /stats", stats)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	// HTTP/1.1 only, as archfit's aiohttp and as kube-apiserver speaks to every webhook it
	// reaches through a Service (k8s.io/apiserver/pkg/util/webhook/client.go); -h2 lets a
	// loopback URL's client negotiate HTTP/2 as it would.
	server := &http.Server{Addr: *listen, Handler: mux, Protocols: new(http.Protocols)}
	server.Protocols.SetHTTP1(true)
	server.Protocols.SetHTTP2(*h2)
	log.Printf("noop-webhook: serving /allow and /answer on https://%s", *listen)
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
