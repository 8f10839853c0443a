package publishertest_test

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// The suite must fail a publisher whose Close leaves a pending callback unrun. The check runs in a child
// test process (a failing run cannot be observed from inside the same test), once with the real STOMP
// publisher, which must pass, and once with that publisher wrapped so that Close drops one callback,
// which must fail naming the callback.

const helperEnv = "PUBLISHERTEST_HELPER" // "ok" or "broken": run TestHelperSuite with that publisher

func TestSuiteFailsWhenCloseLeavesACallbackUnrun(t *testing.T) {
	const pendingAtClose = "^TestHelperSuite$/^close$/^pending_at_close$"
	out, err := runHelper(t, "ok", pendingAtClose)
	if err != nil || !strings.Contains(out, "--- PASS: TestHelperSuite/close/pending_at_close") {
		t.Fatalf("the real STOMP publisher does not pass close/pending at close (%v):\n%s", err, out)
	}
	out, err = runHelper(t, "broken", pendingAtClose)
	if err == nil {
		t.Fatalf("the suite passed a publisher whose Close leaves a callback unrun:\n%s", out)
	}
	if !strings.Contains(out, "--- FAIL: TestHelperSuite/close/pending_at_close") ||
		!strings.Contains(out, "1 pending PublishAsync calls: Close returned") || !strings.Contains(out, "their done never ran") {
		t.Fatalf("the suite failed, but not by finding the unrun callback (%v):\n%s", err, out)
	}
}

func runHelper(t *testing.T, mode, run string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHelperSuite runs the suite against an embedded go-stomp server behind a proxy that can stall it;
// it runs only in the child processes of the test above.
func TestHelperSuite(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper of TestSuiteFailsWhenCloseLeavesACallbackUnrun")
	}
	srv, err := stomp.StartServer(1, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	px := startProxy(t, srv.Addrs()[0])
	b := proxied{STOMP: &itest.STOMP{Addrs: srv.Addrs()}, proxies: []*proxy{px}}
	f := publishertest.Features{
		NoReject:         "go-stomp accepts every SEND",
		AsyncTimeout:     30 * time.Second, // stompReceiptTimeout
		IgnoreGoroutines: stomp.EmbeddedGoroutines(),
	}
	publishertest.Run(t, f, b, func(t testing.TB) publishers.Publisher {
		c := stomp.DefaultConfig()
		c.Hosts = []string{px.Addr()}
		p, err := stomp.New(c, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if mode == "broken" {
			return &dropsCallbackOnClose{Publisher: p}
		}
		return p
	})
}

// dropsCallbackOnClose is a publisher with the bug the suite must catch: during Close it swallows the
// first callback failed with ErrClosed, so that publish's done never runs.
type dropsCallbackOnClose struct {
	publishers.Publisher
	closing, dropped atomic.Bool
}

func (d *dropsCallbackOnClose) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	return d.Publisher.PublishAsync(host, topic, body, func(err error) {
		if d.closing.Load() && errors.Is(err, publishers.ErrClosed) && d.dropped.CompareAndSwap(false, true) {
			return
		}
		done(err)
	})
}

func (d *dropsCallbackOnClose) Close() error {
	d.closing.Store(true)
	return d.Publisher.Close()
}

// proxied is the embedded server's harness with host i reached through proxies[i], which stalls it.
type proxied struct {
	*itest.STOMP
	proxies []*proxy
}

func (p proxied) FreezeHost(_ testing.TB, host int) { p.proxies[host].stall(true) }
func (p proxied) ThawHost(_ testing.TB, host int)   { p.proxies[host].stall(false) }

// proxy forwards TCP connections to target. Stalled, it forwards nothing in either direction (it holds
// what it read; the sockets' buffers fill), and connections made meanwhile are accepted but get no
// answer: what a SIGSTOPped broker does, for a broker running in the test process.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	gate  chan struct{} // closed while forwarding
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) stall(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate: // forwarding
		if on {
			p.gate = make(chan struct{})
		}
	default:
		if !on {
			close(p.gate)
		}
	}
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

// pipe copies src to dst, holding each chunk while the proxy is stalled; it closes both when either ends.
func (p *proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.stall(false)
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
