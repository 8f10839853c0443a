package publishertest_test

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
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
	px := publishertest.StartStallProxy(t, srv.Addrs()[0], 0)
	b := proxied{STOMP: &itest.STOMP{Addrs: srv.Addrs()}, proxies: []*publishertest.StallProxy{px}}
	f := publishertest.Features{
		NoReject:         "go-stomp accepts every SEND",
		NoLogin:          "go-stomp takes any login",
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
	proxies []*publishertest.StallProxy
}

func (p proxied) FreezeHost(_ testing.TB, host int) { p.proxies[host].Stall(true) }
func (p proxied) ThawHost(_ testing.TB, host int)   { p.proxies[host].Stall(false) }
