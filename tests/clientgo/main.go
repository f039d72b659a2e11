// Command clientgo-observe prints, as one JSON object, what client-go would send for one
// kubeconfig or in-cluster set-up: the requests of a rest.Config made by clientcmd (their URL
// and the credentials and impersonation headers on them), the TLS the transport would use
// (trusted CAs, client certificate, server name, verification), the proxy it would choose for
// the server, and the namespace; or the error, and where it arose.
//
// tests/clientgo/test_differential.py runs it next to archfit's own loader on a
// generated corpus and compares the two, case by case.
//
//	clientgo-observe -mode kubeconfig [-kubeconfig FILE] [-context NAME] [-rotate SRC=DST]...
//	clientgo-observe -mode in-cluster -service-account DIR
//
// The environment is the case's: KUBECONFIG, HOME, HTTPS_PROXY, NO_PROXY, POD_NAMESPACE,
// KUBERNETES_SERVICE_HOST... In-cluster, client-go reads fixed paths under
// /var/run/secrets/kubernetes.io/serviceaccount: the program runs itself again in a private
// user and mount namespace with DIR mounted there, so nothing on the machine changes.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	// What kubectl registers: oidc, and the gcp and azure stubs that refuse.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"
)

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Request is one request as the transport handed it to the network.
type Request struct {
	URL     string              `json:"url"`
	Headers map[string][]string `json:"headers"`
	Error   string              `json:"error,omitempty"`
}

// TLS is what the transport's tls.Config trusts and presents.
type TLS struct {
	Insecure   bool     `json:"insecure"`
	ServerName string   `json:"server_name"`
	CA         []string `json:"ca"`     // DER digests of the trusted certificates; nil: the system's
	System     bool     `json:"system"` // the system's roots are trusted
	ClientCert []string `json:"client_cert"`
	CertError  string   `json:"client_cert_error,omitempty"`
}

// Observation is the program's output.
type Observation struct {
	Stage          string    `json:"stage"` // "config", "transport" or "" when neither failed
	Error          string    `json:"error,omitempty"`
	TLS            *TLS      `json:"tls"`
	Proxy          string    `json:"proxy"`
	Requests       []Request `json:"requests"`
	Namespace      string    `json:"namespace"`
	NamespaceError string    `json:"namespace_error,omitempty"`
}

type rotations []string

func (r *rotations) String() string     { return strings.Join(*r, ",") }
func (r *rotations) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	// client-go's own log lines (an unreadable in-cluster CA...) are not the output.
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	_ = logFlags.Set("logtostderr", "false")
	_ = logFlags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	mode := flag.String("mode", "kubeconfig", "kubeconfig or in-cluster")
	explicit := flag.String("kubeconfig", "", "an explicit kubeconfig file (kubectl --kubeconfig)")
	contextName := flag.String("context", "", "the context to use instead of current-context")
	account := flag.String("service-account", "", "in-cluster: the folder to mount as the service account's")
	inNamespace := flag.Bool("in-namespace", false, "internal: already in the private mount namespace")
	var rotate rotations
	flag.Var(&rotate, "rotate", "SRC=DST: rename SRC onto DST between the two requests")
	proxyFor := flag.String("proxy-for", "", "only print the proxy http.ProxyFromEnvironment picks for this URL")
	flag.Parse()

	if *proxyFor != "" {
		os.Exit(printProxy(*proxyFor))
	}

	if *mode == "in-cluster" && *account != "" && !*inNamespace {
		os.Exit(reexecWithAccount(*account))
	}
	if *inNamespace {
		if err := mountAccount(*account); err != nil {
			fmt.Fprintln(os.Stderr, "mount:", err)
			os.Exit(2)
		}
	}
	out := observe(*mode, *explicit, *contextName, rotate)
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(out); err != nil {
		os.Exit(2)
	}
}

func observe(mode, explicit, contextName string, rotate rotations) Observation {
	out := Observation{Requests: []Request{}}
	var rules *clientcmd.ClientConfigLoadingRules
	if mode == "in-cluster" {
		// No kubeconfig at all: clientcmd falls back to the pod's service account.
		rules = &clientcmd.ClientConfigLoadingRules{}
	} else {
		rules = clientcmd.NewDefaultClientConfigLoadingRules()
		rules.MigrationRules = nil // never copy ~/.kube/.kubeconfig over: see docs/kubeconfig.md
		rules.ExplicitPath = explicit
	}
	clientConfig := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		rules, &clientcmd.ConfigOverrides{CurrentContext: contextName})

	namespace, _, err := clientConfig.Namespace()
	out.Namespace = namespace
	if err != nil {
		out.NamespaceError = err.Error()
	}

	config, err := clientConfig.ClientConfig()
	if err != nil {
		out.Stage, out.Error = "config", err.Error()
		return out
	}
	config.UserAgent = "clientgo-observe"

	// The transport client-go would dial with: its TLS and its proxy.
	transportConfig, err := config.TransportConfig()
	if err == nil {
		var rt http.RoundTripper
		rt, err = transport.New(transportConfig)
		if err == nil {
			out.TLS, out.Proxy, err = inspect(config, transportConfig, rt)
		}
	}
	if err != nil {
		out.Stage, out.Error = "transport", err.Error()
		return out
	}

	// Two requests through client-go's own header wrappers, caught before the network.
	captured := &capture{}
	requestConfig, err := config.TransportConfig()
	var wrapped http.RoundTripper
	if err == nil {
		wrapped, err = transport.HTTPWrappersForConfig(requestConfig, captured)
	}
	if err != nil {
		out.Stage, out.Error = "transport", err.Error()
		return out
	}
	restConfig := rest.CopyConfig(config)
	restConfig.APIPath = "/api"
	restConfig.GroupVersion = &schema.GroupVersion{Version: "v1"}
	restConfig.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	client, err := rest.RESTClientForConfigAndClient(restConfig, &http.Client{Transport: wrapped})
	if err != nil {
		out.Stage, out.Error = "transport", err.Error()
		return out
	}
	for i := 0; i < 2; i++ {
		if i == 1 {
			for _, pair := range rotate {
				src, dst, _ := strings.Cut(pair, "=")
				if err := os.Rename(src, dst); err != nil {
					out.Stage, out.Error = "rotate", err.Error()
					return out
				}
			}
		}
		captured.last = nil
		_, err := client.Get().Resource("nodes").DoRaw(context.Background())
		request := Request{Headers: map[string][]string{}}
		if captured.last != nil {
			sent := *captured.last.URL // what the request line and Host header carry
			sent.User, sent.Fragment, sent.RawFragment = nil, "", ""
			request.URL = sent.String()
			request.Headers = credentialHeaders(captured.last.Header)
		}
		if err != nil {
			request.Error = err.Error()
		}
		out.Requests = append(out.Requests, request)
	}
	return out
}

// capture is the network as the requests see it: it keeps the last request and answers 200.
type capture struct{ last *http.Request }

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	c.last = req
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(`{}`)),
		Request:    req,
	}, nil
}

// credentialHeaders keeps the headers that say who the client is, lower-cased; a credential's
// value is replaced by its digest.
func credentialHeaders(header http.Header) map[string][]string {
	kept := map[string][]string{}
	for name, values := range header {
		lower := strings.ToLower(name)
		switch {
		case lower == "authorization":
			for _, value := range values {
				scheme, _, _ := strings.Cut(value, " ")
				kept[lower] = append(kept[lower], scheme+" "+digest([]byte(value)))
			}
		case strings.HasPrefix(lower, "impersonate-"):
			kept[lower] = append([]string{}, values...)
		}
	}
	return kept
}

// inspect reads the tls.Config and proxy of the http.Transport under client-go's wrappers.
func inspect(config *rest.Config, transportConfig *transport.Config, rt http.RoundTripper) (*TLS, string, error) {
	base := rt
	for {
		if t, ok := base.(*http.Transport); ok {
			return inspectTransport(config, transportConfig, t)
		}
		wrapper, ok := base.(utilnet.RoundTripperWrapper)
		if !ok {
			return nil, "", fmt.Errorf("clientgo-observe: cannot see through %T", base)
		}
		base = wrapper.WrappedRoundTripper()
	}
}

func inspectTransport(config *rest.Config, transportConfig *transport.Config, t *http.Transport) (*TLS, string, error) {
	server, _, err := rest.DefaultServerUrlFor(config)
	if err != nil {
		return nil, "", err
	}
	proxy := ""
	if t.Proxy != nil {
		request, err := http.NewRequest(http.MethodGet, server.String(), nil)
		if err != nil {
			return nil, "", err
		}
		chosen, err := t.Proxy(request)
		if err != nil {
			return nil, "", err
		}
		if chosen != nil {
			proxy = chosen.String()
		}
	}
	if server.Scheme != "https" {
		return nil, proxy, nil
	}
	seen := &TLS{System: true, ClientCert: []string{}}
	tlsConfig := t.TLSClientConfig
	if tlsConfig == nil {
		return seen, proxy, nil
	}
	seen.Insecure = tlsConfig.InsecureSkipVerify
	seen.ServerName = tlsConfig.ServerName
	if tlsConfig.RootCAs != nil {
		seen.System = false
		seen.CA = []string{}
		pool := x509.NewCertPool()
		for _, der := range certificates(transportConfig.TLS.CAData) {
			parsed, _ := x509.ParseCertificate(der)
			pool.AddCert(parsed)
			seen.CA = append(seen.CA, digest(der))
		}
		sort.Strings(seen.CA)
		if !pool.Equal(tlsConfig.RootCAs) {
			return nil, "", fmt.Errorf("clientgo-observe: the trusted CAs are not the CA data's")
		}
	}
	if tlsConfig.GetClientCertificate != nil {
		cert, err := tlsConfig.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			seen.CertError = err.Error()
		} else if cert != nil {
			for _, der := range cert.Certificate {
				seen.ClientCert = append(seen.ClientCert, digest(der))
			}
		}
	}
	for _, cert := range tlsConfig.Certificates {
		for _, der := range cert.Certificate {
			seen.ClientCert = append(seen.ClientCert, digest(der))
		}
	}
	return seen, proxy, nil
}

// certificates are the DER certificates x509.CertPool.AppendCertsFromPEM takes from data.
func certificates(data []byte) [][]byte {
	var found [][]byte
	for len(data) > 0 {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			continue
		}
		found = append(found, block.Bytes)
	}
	return found
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// printProxy prints {"proxy": URL or ""} or {"error": ...}: Go's own choice for a request.
func printProxy(target string) int {
	answer := map[string]string{}
	request, err := http.NewRequest(http.MethodGet, target, nil)
	if err == nil {
		var chosen *url.URL
		chosen, err = http.ProxyFromEnvironment(request)
		if chosen != nil {
			answer["proxy"] = chosen.String()
		} else {
			answer["proxy"] = ""
		}
	}
	if err != nil {
		answer["error"] = err.Error()
	}
	if json.NewEncoder(os.Stdout).Encode(answer) != nil {
		return 2
	}
	return 0
}

// reexecWithAccount runs this program again in a new user and mount namespace, where
// mountAccount puts the service account folder at client-go's fixed path.
func reexecWithAccount(account string) int {
	args := append([]string{"-in-namespace"}, os.Args[1:]...)
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "re-exec:", err)
		return 2
	}
	return 0
}

func mountAccount(account string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return err
	}
	run, err := filepath.EvalSymlinks("/var/run")
	if err != nil {
		return err
	}
	// A fresh tmpfs over /var/run (this process's view only) holds the mount point.
	if err := syscall.Mount("tmpfs", run, "tmpfs", 0, "size=1m"); err != nil {
		return err
	}
	if err := os.MkdirAll(serviceAccountDir, 0o755); err != nil {
		return err
	}
	return syscall.Mount(account, serviceAccountDir, "", syscall.MS_BIND, "")
}
