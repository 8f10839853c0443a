package serve

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
)

// listeningPorts returns the TCP ports this process listens on: /proc/net/tcp{,6} lists the whole
// network namespace (other test binaries, other users of the machine), so only sockets whose inode is
// one of this process's file descriptors count.
func listeningPorts(t *testing.T) map[int]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	ours := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			ours[strings.TrimSuffix(inode, "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			t.Skipf("no %s: %v", name, err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !ours[fields[9]] { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, fields[1], err)
			}
			ports[int(port)] = true
		}
		f.Close()
	}
	return ports
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestPprof: with pprof.addr set, net/http/pprof answers there and only there; unset, mqtarget opens no
// listener but its HTTP server's. Brokers are external (never dialled at start), so the HTTP and pprof
// listeners are all Start opens.
func TestPprof(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
	}{
		{"unset", ""},
		{"set", "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.HTTP.Addr = "127.0.0.1:0"
			cfg.PProf.Addr = tc.addr
			cfg.NSQ.Hosts = []string{"127.0.0.1:1"}
			cfg.STOMP.Hosts = []string{"127.0.0.1:1"}
			before := listeningPorts(t)
			a, err := Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			shutdown := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return a.Shutdown(ctx)
			}
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					_ = shutdown()
				}
			})

			want := map[int]bool{portOf(t, a.Addr()): true}
			if tc.addr == "" {
				if a.PprofAddr() != "" {
					t.Errorf("PprofAddr() = %q with pprof.addr unset", a.PprofAddr())
				}
			} else {
				want[portOf(t, a.PprofAddr())] = true
			}
			checkOpened(t, before, want)

			// The main mux never serves pprof.
			if code, body := httpGet(t, "http://"+a.Addr()+"/debug/pprof/"); code != http.StatusNotFound {
				t.Errorf("main server /debug/pprof/: %d %s, want 404", code, body)
			}
			if tc.addr != "" {
				base := "http://" + a.PprofAddr()
				for _, c := range []struct{ path, want string }{
					{"/debug/pprof/", "goroutine"},
					{"/debug/pprof/goroutine?debug=1", "goroutine profile:"},
					{"/debug/pprof/cmdline", os.Args[0]},
				} {
					if code, body := httpGet(t, base+c.path); code != http.StatusOK || !strings.Contains(body, c.want) {
						t.Errorf("pprof %s: %d, body lacks %q:\n%.300s", c.path, code, c.want, body)
					}
				}
				if code, _ := httpGet(t, base+"/send1"); code != http.StatusNotFound {
					t.Errorf("pprof server /send1: %d, want 404", code)
				}
			}

			stopped = true
			if err := shutdown(); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			for p := range listeningPorts(t) {
				if want[p] {
					t.Errorf("port %d still listening after Shutdown", p)
				}
			}
		})
	}
}

// TestSideListenError: a pprof.addr or http.admin_addr that cannot be bound fails Start naming the
// setting, and releases the listeners opened before it.
func TestSideListenError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name, key string
		set       func(c *config.Config)
	}{
		{"pprof", "pprof.addr", func(c *config.Config) { c.PProf.Addr = busy.Addr().String() }},
		{"admin", "http.admin_addr", func(c *config.Config) { c.HTTP.AdminAddr = busy.Addr().String() }},
		{"pprof after admin bound", "pprof.addr", func(c *config.Config) {
			c.HTTP.AdminAddr = "127.0.0.1:0"
			c.PProf.Addr = busy.Addr().String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := listeningPorts(t)
			_, err := Start(testConfig(tc.set), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil || !strings.HasPrefix(err.Error(), tc.key+": ") {
				t.Fatalf("Start = %v, want an error naming %s", err, tc.key)
			}
			for p := range listeningPorts(t) {
				if !before[p] {
					t.Errorf("port %d left listening after the failed Start", p)
				}
			}
		})
	}
}
