package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mqtarget/mqtarget/internal/version"
)

const healthcheckUsage = `usage: mqtarget healthcheck [-path /healthz|/readyz] [-timeout D] [-https] [ADDR]

GETs http://ADDR/PATH, or https:// with -https (ADDR is host:port or :port, default 127.0.0.1:8080; a :port means 127.0.0.1) and
exits 0 when the answer is 2xx, 1 otherwise (no answer within -timeout included), 2 for bad input. It
needs no shell or curl, so a distroless image's HEALTHCHECK and a Kubernetes exec probe can use it.

`

// runHealthcheck is `mqtarget healthcheck`.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqtarget healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("path", "/healthz", "path to GET: /healthz (the process serves) or /readyz (its brokers answer)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	useTLS := fs.Bool("https", false, "speak HTTPS (a listener with http.tls_cert_file); the certificate is not verified: the probe asks the server at ADDR whether it serves, not who it is")
	fs.Usage = func() {
		fmt.Fprint(stderr, healthcheckUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	bad := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "mqtarget healthcheck: "+format+"\n", args...)
		return 2
	}
	addr := "127.0.0.1:8080"
	switch fs.NArg() {
	case 0:
	case 1:
		addr = fs.Arg(0)
	default:
		return bad("one address expected, got %q", fs.Args())
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bad("address: %q is not host:port or :port", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1" // a listen address: the server is on this machine
	}
	if *timeout <= 0 {
		return bad("-timeout: must be positive, got %v", *timeout)
	}
	if !strings.HasPrefix(*path, "/") {
		return bad("-path: must start with /, got %q", *path)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// Only ADDR answers: no proxy from the environment, no redirect followed (a 3xx to a healthy
	// elsewhere is not this process healthy).
	scheme, transport := "http", &http.Transport{Proxy: nil}
	client := &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer transport.CloseIdleConnections()
	if *useTLS {
		// A probe of the process on this machine: a certificate issued for the service's public name
		// would not match 127.0.0.1, and its identity is not what the probe checks.
		scheme = "https"
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	}
	url := scheme + "://" + net.JoinHostPort(host, port) + *path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return bad("%v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget healthcheck: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintf(stdout, "%s %s\n%s", url, resp.Status, body)
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}

// printVersion is -version and `mqtarget version`.
func printVersion(w io.Writer) int {
	fmt.Fprintln(w, version.Get())
	return 0
}
