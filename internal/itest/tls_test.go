package itest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/serve"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// testPKI is a throwaway CA and a server certificate it signed for 127.0.0.1 and localhost, as PEM files.
type testPKI struct{ publishertest.PKI }

func newTestPKI(t testing.TB) testPKI { return testPKI{publishertest.NewPKI(t)} }

// verifying is the TLS client setting that trusts p's CA.
func (p testPKI) verifying() publishers.TLSConfig {
	return publishers.TLSConfig{Enabled: true, CAFile: p.CA}
}

// noEcho keeps a target to its publishers: the echo's consumers would only add their own failures.
func noEcho(c *config.Config) { c.Echo.Enabled, c.Echo.RoundTrip = false, false }

// status sends a GET to url with client and returns the status code and body.
func status(t testing.TB, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHTTPS: with http.tls_cert_file and http.tls_key_file both listeners serve HTTPS only; /send1 over
// HTTPS publishes, plain HTTP gets 400 and publishes nothing; an unreadable certificate stops the start.
func TestHTTPS(t *testing.T) {
	pki := newTestPKI(t)
	tg := StartTarget(t, nil, func(c *config.Config) {
		c.HTTP.TLSCertFile, c.HTTP.TLSKeyFile = pki.Cert, pki.Key
		c.HTTP.AdminAddr = "127.0.0.1:0"
		noEcho(c)
	})
	tcp, httpAddrs := embeddedNSQ(tg)
	nsqd := &NSQ{TCP: tcp, HTTP: httpAddrs}
	roots := x509.NewCertPool()
	pem, err := os.ReadFile(pki.CA)
	must(t, err)
	roots.AppendCertsFromPEM(pem)
	httpsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	plainClient := &http.Client{Timeout: 10 * time.Second}
	topic := uniqueTopic("ithttps")

	for i := range 3 {
		if code, body := status(t, httpsClient, "https://"+tg.App.Addr()+"/send1?topic="+topic); code != http.StatusOK {
			t.Fatalf("HTTPS /send1 #%d: %d %s", i, code, body)
		}
	}
	code, body := status(t, plainClient, "http://"+tg.App.Addr()+"/send1?topic="+topic)
	if code != http.StatusBadRequest || !strings.Contains(body, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP /send1 on the HTTPS listener: %d %q, want 400 (HTTP request to an HTTPS server)", code, body)
	}
	if n := nsqd.Stored(t, 0, topic); n != 3 {
		t.Errorf("nsqd holds %d messages, want the 3 sent over HTTPS", n)
	}
	if code, body := status(t, httpsClient, "https://"+tg.App.AdminAddr()+"/healthz"); code != http.StatusOK {
		t.Errorf("HTTPS /healthz on http.admin_addr: %d %s", code, body)
	}
	if code, _ := status(t, plainClient, "http://"+tg.App.AdminAddr()+"/healthz"); code != http.StatusBadRequest {
		t.Errorf("plain HTTP /healthz on the HTTPS admin listener: %d, want 400", code)
	}

	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.TLSCertFile, cfg.HTTP.TLSKeyFile = pki.CA, pki.Key // the CA's certificate does not match the key
	if a, err := serve.Start(cfg, slog.New(slog.DiscardHandler)); err == nil {
		_ = a.Shutdown(context.Background())
		t.Error("serve.Start with a certificate that does not match its key succeeded")
	} else if !strings.Contains(err.Error(), "http.tls_cert_file") {
		t.Errorf("serve.Start with a bad certificate: %v, want an error naming http.tls_cert_file", err)
	}
}

// brokerTLSCase is one client TLS setting against a broker and what /send1 must answer.
type brokerTLSCase struct {
	name    string
	tls     publishers.TLSConfig
	status  int
	wantErr string // in the reply's error when status is not 200
}

// runBrokerTLSCases starts a target per case on h with the case's TLS settings and checks /send1's answer,
// what the broker stored, and that /readyz fails exactly when publishing does.
func runBrokerTLSCases(t *testing.T, h Harness, setTLS func(*config.Config, publishers.TLSConfig), cases []brokerTLSCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := StartTarget(t, h, func(cfg *config.Config) { noEcho(cfg); setTLS(cfg, c.tls) })
			topic := uniqueTopic("ittls")
			r := tg.Get(t, "/send1?topic="+topic)
			if r.Status != c.status || (c.status != http.StatusOK && !strings.Contains(r.Error, c.wantErr)) {
				t.Fatalf("/send1: %d %q, want %d with %q", r.Status, r.Error, c.status, c.wantErr)
			}
			want := 0
			if c.status == http.StatusOK {
				want = 1
			}
			if n := h.Stored(t, 0, topic); n != want {
				t.Errorf("the broker holds %d messages, want %d", n, want)
			}
			code, body := status(t, &http.Client{Timeout: 10 * time.Second}, tg.Base+"/readyz")
			if wantReady := c.status == http.StatusOK; (code == http.StatusOK) != wantReady {
				t.Errorf("/readyz: %d %s, want ready=%v", code, body, wantReady)
			}
		})
	}
}

// TestNSQTLS runs the delivery suite over TLS against an nsqd that requires it, then the ways a client's
// TLS setting can be wrong.
func TestNSQTLS(t *testing.T) {
	Lane(t, "nsq")
	bin := NSQDBin(t)
	pki, other := newTestPKI(t), newTestPKI(t)
	p := StartNSQDProc(t, bin, "-tls-cert", pki.Cert, "-tls-key", pki.Key, "-tls-required=tcp-https")
	h := &NSQ{TCP: []string{p.TCPAddr}, HTTP: []string{p.HTTPAddr}, Procs: []*NSQDProc{p}, TLS: pki.verifying()}
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })

	setTLS := func(c *config.Config, tc publishers.TLSConfig) { c.NSQ.TLSConfig = tc }
	named := pki.verifying()
	named.ServerName = "localhost"
	wrongName := pki.verifying()
	wrongName.ServerName = "nsqd.example"
	runBrokerTLSCases(t, h, setTLS, []brokerTLSCase{
		{"verified", pki.verifying(), 200, ""},
		{"server name", named, 200, ""},
		{"insecure skip verify", publishers.TLSConfig{Enabled: true, InsecureSkipVerify: true}, 200, ""},
		{"other CA", other.verifying(), 503, "certificate signed by unknown authority"},
		{"wrong server name", wrongName, 503, "nsqd.example"},
		{"plain against TLS required", publishers.TLSConfig{}, 503, "requires TLS"},
	})

	t.Run("TLS against plain nsqd", func(t *testing.T) {
		plain := StartNSQDProc(t, bin)
		ph := &NSQ{TCP: []string{plain.TCPAddr}, HTTP: []string{plain.HTTPAddr}}
		runBrokerTLSCases(t, ph, setTLS, []brokerTLSCase{{"tls", pki.verifying(), 503, "does not offer TLS"}})
	})

	t.Run("consumer with other CA", func(t *testing.T) {
		cfg := nsq.DefaultConfig()
		cfg.Hosts, cfg.TLSConfig = h.TCP, other.verifying()
		cons, err := nsq.NewConsumer(cfg, publishers.ConsumerOptions{}, testLogger(t))
		must(t, err)
		defer cons.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = cons.Consume(ctx, uniqueTopic("ittls"), func(publishers.Delivery) {})
		if err == nil || !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("Consume: %v, want ErrUnavailable with the verification error", err)
		}
	})
}

// artemisTLS reads the TLS acceptor scripts/test.sh configures on Artemis (ARTEMIS_TLS_PORT) and its CA.
func artemisTLS(t *testing.T) (addr, ca string) {
	Integration(t)
	addr, ca = os.Getenv("MQTARGET_ARTEMIS_TLS_STOMP"), os.Getenv("MQTARGET_ARTEMIS_TLS_CA")
	if addr == "" || ca == "" {
		t.Fatal("MQTARGET_ARTEMIS_TLS_STOMP or MQTARGET_ARTEMIS_TLS_CA is not set (scripts/test.sh starts Artemis with a TLS acceptor and sets them)")
	}
	return addr, ca
}

// TestArtemisTLS runs the delivery suite over Artemis's TLS STOMP acceptor, then wrong settings.
func TestArtemisTLS(t *testing.T) {
	Lane(t, "artemis")
	tlsAddr, ca := artemisTLS(t)
	plainAddr, login, pass, _ := RealBroker(t, "artemis", "ARTEMIS")
	verifying := publishers.TLSConfig{Enabled: true, CAFile: ca}
	h := &STOMP{Addrs: []string{tlsAddr}, Login: login, Passcode: pass, Persistent: true, TLS: verifying}
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })

	other := newTestPKI(t)
	setTLS := func(c *config.Config, tc publishers.TLSConfig) { c.STOMP.TLSConfig = tc }
	runBrokerTLSCases(t, h, setTLS, []brokerTLSCase{
		{"verified", verifying, 200, ""},
		{"other CA", other.verifying(), 503, "certificate signed by unknown authority"},
	})
	// The harness reads the plain port back over TLS: only the target's setting is wrong.
	plainH := &STOMP{Addrs: []string{plainAddr}, Login: login, Passcode: pass, Persistent: true}
	runBrokerTLSCases(t, plainH, setTLS, []brokerTLSCase{{"TLS against the plain port", verifying, 503, "TLS handshake"}})
	tlsHarness := &STOMP{Addrs: []string{tlsAddr}, Login: login, Passcode: pass, Persistent: true, TLS: verifying}
	runBrokerTLSCases(t, tlsHarness, setTLS, []brokerTLSCase{{"plain against the TLS port", publishers.TLSConfig{}, 503, "broker unavailable"}})
}

// tlsRelay forwards connections to a backend and records whether each began with a TLS handshake record.
type tlsRelay struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	conns   int // connections relayed
	plain   int // of them, ones whose first byte was not a TLS handshake record (0x16)
	open    int // still open
	wg      sync.WaitGroup
}

func startTLSRelay(t testing.TB, backend string) *tlsRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	r := &tlsRelay{ln: ln, backend: backend}
	r.wg.Go(r.accept)
	t.Cleanup(func() { ln.Close(); r.wg.Wait() })
	return r
}

func (r *tlsRelay) accept() {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", r.backend)
		if err != nil {
			c.Close()
			continue
		}
		conns = append(conns, c, b)
		r.mu.Lock()
		r.conns++
		r.open++
		r.mu.Unlock()
		r.wg.Go(func() { r.pipe(c, b) })
	}
}

func (r *tlsRelay) pipe(c, b net.Conn) {
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err == nil {
		if first[0] != 0x16 {
			r.mu.Lock()
			r.plain++
			r.mu.Unlock()
		}
		_, _ = b.Write(first)
		done := make(chan struct{})
		go func() { _, _ = io.Copy(c, b); c.Close(); close(done) }()
		_, _ = io.Copy(b, c)
		b.Close()
		<-done
	}
	c.Close()
	b.Close()
	r.mu.Lock()
	r.open--
	r.mu.Unlock()
}

func (r *tlsRelay) counts() (conns, plain, open int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns, r.plain, r.open
}

// rmqTLSHarness is the RocketMQ harness with mqtarget pointed at another name server address (a relay)
// and TLS settings; the harness itself reads back over the plain name server (brokers are permissive).
type rmqTLSHarness struct {
	*RocketMQ
	nameServer string
	tls        publishers.TLSConfig
	client     string // rocketmq.client; empty: the default
}

func (h *rmqTLSHarness) Configure(cfg *config.Config) {
	h.RocketMQ.Configure(cfg)
	cfg.RocketMQ.NameServers = []string{h.nameServer}
	cfg.RocketMQ.TLSConfig = h.tls
	if h.client != "" {
		cfg.RocketMQ.Client = h.client
	}
}

// TestRocketMQTLS publishes over TLS to the permissive brokers scripts/rocketmq.sh starts, with both
// send paths, and consumes the messages back over TLS. A relay in front of the name server shows every
// connection (the client library's lasting ones too) speaking TLS; a wrong CA stops the start; with the
// library, plain and TLS producers cannot live in one process (rocketmq-client-go has one TLS switch per
// process).
func TestRocketMQTLS(t *testing.T) {
	Lane(t, "rocketmq")
	ns := RocketMQNamesrv(t)
	ca := os.Getenv("MQTARGET_ROCKETMQ_TLS_CA")
	if ca == "" {
		t.Fatal("MQTARGET_ROCKETMQ_TLS_CA is not set (scripts/test.sh starts RocketMQ with TLS permissive and sets it)")
	}
	base := NewRocketMQ(t, ns)
	relay := startTLSRelay(t, ns)
	verifying := publishers.TLSConfig{Enabled: true, CAFile: ca}
	// Both send paths: the native one dials the brokers through the admin client's TLS transport and
	// keeps no name server connection open; rocketmq-client-go keeps its own and has one TLS switch
	// per process, so a plain target cannot start beside a TLS one.
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		t.Run(client+"/delivery", func(t *testing.T) { rmqTLSDelivery(t, base, relay, verifying, client) })
	}

	t.Run("other CA stops the start", func(t *testing.T) {
		cfg := config.Default()
		cfg.HTTP.Addr, cfg.Broker = "127.0.0.1:0", "rocketmq"
		bad := &rmqTLSHarness{RocketMQ: base, nameServer: ns, tls: newTestPKI(t).verifying()}
		bad.Configure(&cfg)
		noEcho(&cfg)
		if a, err := serve.Start(cfg, slog.New(slog.DiscardHandler)); err == nil {
			_ = a.Shutdown(context.Background())
			t.Error("serve.Start with a CA that did not sign the name server's certificate succeeded")
		} else if !strings.Contains(err.Error(), "certificate signed by unknown authority") || !strings.Contains(err.Error(), "rocketmq.name_servers") {
			t.Errorf("serve.Start: %v, want the verification error under rocketmq.name_servers", err)
		}
	})
}

// rmqTLSDelivery publishes over TLS with the given rocketmq.client through the relay in front of the
// name server, consumes the messages back over TLS, and checks what the relay saw meanwhile.
func rmqTLSDelivery(t *testing.T, base *RocketMQ, relay *tlsRelay, verifying publishers.TLSConfig, client string) {
	h := &rmqTLSHarness{RocketMQ: base, nameServer: relay.ln.Addr().String(), tls: verifying, client: client}
	before, beforePlain, _ := relay.counts()
	// A fresh topic's first publish here costs TLS handshakes with the JVMs for its creation on both
	// brokers and its route (CI once ran out of the suite's 2 s on a busy machine): this test is about
	// what arrives over TLS, not how fast, so it takes RunDelivery's budget.
	tg := StartTarget(t, h, func(cfg *config.Config) {
		noEcho(cfg)
		cfg.PublishTimeout, cfg.RocketMQ.SendTimeout = deliveryTimeout, deliveryTimeout
	})
	topic := uniqueTopic("ittls")
	acked := 0
	for _, path := range []string{"/send1", "/send2Host", "/sendAsyncWait", "/send2"} {
		for range 5 {
			r := tg.Get(t, path+"?topic="+topic)
			if r.Status != http.StatusOK {
				t.Fatalf("%s over TLS: %d %s", path, r.Status, r.Error)
			}
			acked += r.Published
		}
	}
	cfg := rocketmq.DefaultConfig()
	cfg.NameServers, cfg.TLSConfig = []string{h.nameServer}, verifying
	cons, err := rocketmq.NewConsumer(cfg, publishers.ConsumerOptions{Group: "mqtarget-itest-tls"}, testLogger(t))
	must(t, err)
	defer cons.Close()
	got := 0
	for host := range base.Brokers {
		got += len(collect(t, cons, host, topic, base.Stored(t, host, topic), 300*time.Millisecond, 20*time.Second))
	}
	if got != acked {
		t.Errorf("consumed %d messages over TLS, mqtarget acknowledged %d", got, acked)
	}
	conns, plain, open := relay.counts()
	conns, plain = conns-before, plain-beforePlain
	t.Logf("name server connections through the relay: %d, %d plain, %d open; %d messages consumed over TLS", conns, plain, open, got)
	library := client == rocketmq.ClientLibrary
	if conns == 0 || plain != 0 || (library && open == 0) {
		t.Errorf("name server connections through the relay: %d, %d of them plain, %d open; want all TLS (and, for the library, its own still open)", conns, plain, open)
	}

	mixed := config.Default()
	mixed.HTTP.Addr, mixed.Broker = "127.0.0.1:0", "rocketmq"
	base.Configure(&mixed) // plain, while the TLS target's producers live
	noEcho(&mixed)
	mixed.RocketMQ.Client = client
	a, err := serve.Start(mixed, slog.New(slog.DiscardHandler))
	switch {
	case err == nil && library:
		_ = a.Shutdown(context.Background())
		t.Error("a plain RocketMQ target started beside a TLS one")
	case err == nil:
		_ = a.Shutdown(context.Background())
	case !library:
		t.Errorf("a plain native target beside a TLS one: %v, want it to start", err)
	case !strings.Contains(err.Error(), "one TLS switch per process"):
		t.Errorf("plain beside TLS: %v, want the per-process switch named", err)
	}
}
