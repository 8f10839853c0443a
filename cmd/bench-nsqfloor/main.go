// Command bench-nsqfloor is the floor scripts/bench.sh measures mqtarget against (issue #17): the same
// stack as mqtarget's /send1 with nothing else. chi and net/http serve two routes:
//
//	/healthz  a constant reply: the HTTP stack's trivial route
//	/send1    one 100-byte message published to nsqd, answered once nsqd acknowledged it
//
// -mode chooses how /send1 publishes, on one TCP connection to one nsqd:
//
//	limit  mqtarget's connection core (publishers/wire, its gathering writer), one PUB per request
//	group  the same core, group commit: while a command is in flight requests queue, and its answer
//	       sends everything queued as one MPUB (what nsq.coalesce does, without mqtarget around it)
//	seed   one go-nsq Producer (Publish per request), as a service written the obvious way would
//
// No metrics, no parameters, no ids, a fixed payload and a minimal reply: whatever mqtarget spends
// beyond this is its own. It prints "listening addr=HOST:PORT" once it serves.
//
//	go run ./cmd/bench-nsqfloor -mode limit -addr 127.0.0.1:25080 -nsqd 127.0.0.1:25150
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nsqio/go-nsq"

	"github.com/mqtarget/mqtarget/publishers/wire"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "HTTP listen address")
	nsqd := flag.String("nsqd", "127.0.0.1:4150", "nsqd TCP address")
	mode := flag.String("mode", "limit", "how /send1 publishes: limit, group or seed")
	topic := flag.String("topic", "mqtarget", "topic")
	timeout := flag.Duration("timeout", 5*time.Second, "publish timeout")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file until SIGTERM or SIGINT")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-nsqfloor: -cpuprofile:", err)
			os.Exit(2)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := run(*addr, *nsqd, *mode, *topic, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-nsqfloor:", err)
		pprof.StopCPUProfile()
		os.Exit(2)
	}
}

// publish sends one message and waits for nsqd's answer.
type publish func(ctx context.Context, body []byte) error

func run(addr, nsqd, mode, topic string, timeout time.Duration) error {
	var pub publish
	var closeFn func()
	switch mode {
	case "limit", "group":
		c, err := dialWire(nsqd)
		if err != nil {
			return err
		}
		closeFn = c.Close
		pub = func(ctx context.Context, body []byte) error { return sendPUB(ctx, c, topic, body) }
		if mode == "group" {
			g := &group{conn: c, topic: topic}
			pub = g.publish
		}
	case "seed":
		cfg := nsq.NewConfig()
		p, err := nsq.NewProducer(nsqd, cfg)
		if err != nil {
			return err
		}
		p.SetLogger(log.New(io.Discard, "", 0), nsq.LogLevelError)
		if err := p.Ping(); err != nil {
			return err
		}
		closeFn = p.Stop
		pub = func(_ context.Context, body []byte) error { return p.Publish(topic, body) }
	default:
		return fmt.Errorf("-mode: want limit, group or seed, got %q", mode)
	}
	defer closeFn()

	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	ok := []byte(`{"status":"ok"}` + "\n")
	published := []byte(`{"published":1}` + "\n")
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = jsonType
		_, _ = w.Write(ok)
	})
	send := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := pub(ctx, payload)
		cancel()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header()["Content-Type"] = jsonType
		_, _ = w.Write(published)
	}
	r.Get("/send1", send)
	r.Post("/send1", send)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening addr=%s mode=%s\n", ln.Addr(), mode)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	}
}

var jsonType = []string{"application/json"}

// dialWire connects to nsqd and starts mqtarget's connection core on the connection. nsqd takes PUB and
// MPUB without IDENTIFY.
func dialWire(addr string) (*wire.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write([]byte("  V2")); err != nil {
		nc.Close()
		return nil, err
	}
	return wire.New(nc, wire.Config{
		Name:        "nsq",
		Read:        readAnswer,
		MaxWait:     5 * time.Second,
		StallGrace:  time.Second,
		IdleTimeout: 65 * time.Second,
		CloseWait:   time.Second,
		Unavailable: errUnavailable,
		Closed:      errClosed,
		Log:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}), nil
}

var (
	errUnavailable = errors.New("unavailable")
	errClosed      = errors.New("closed")
	errFrame       = fmt.Errorf("%w: bad nsqd frame", wire.ErrProtocol)
	nop            = []byte("NOP\n")
)

// readAnswer classifies one nsqd frame: OK answers the oldest command, an error fails it and ends the
// connection, a heart-beat wants a NOP.
func readAnswer(r *bufio.Reader) (wire.Answer, error) {
	hdr, err := r.Peek(8)
	if err != nil {
		return wire.Answer{}, err
	}
	size := binary.BigEndian.Uint32(hdr)
	if size < 4 || int(size)+4 > r.Size() {
		return wire.Answer{}, errFrame
	}
	frame, err := r.Peek(4 + int(size))
	if err != nil {
		return wire.Answer{}, err
	}
	defer r.Discard(4 + int(size))
	data := frame[8:]
	switch typ := int32(binary.BigEndian.Uint32(hdr[4:])); {
	case typ == nsq.FrameTypeResponse && string(data) == "_heartbeat_":
		return wire.Answer{Reply: nop}, nil
	case typ == nsq.FrameTypeResponse && string(data) == "OK":
		return wire.Answer{Kind: wire.Next}, nil
	case typ == nsq.FrameTypeError:
		err := fmt.Errorf("nsqd: %s", data)
		return wire.Answer{Kind: wire.Next, Err: err, Close: err}, nil
	default:
		return wire.Answer{}, errFrame
	}
}

// waiter is a recycled one-shot result channel and the callback feeding it, as mqtarget's publishers
// use, so a publish allocates neither.
type waiter struct {
	ch   chan error
	done func(error)
}

var waiters = sync.Pool{New: func() any {
	w := &waiter{ch: make(chan error, 1)}
	w.done = func(err error) { w.ch <- err }
	return w
}}

func wait(ctx context.Context, w *waiter) error {
	select {
	case err := <-w.ch:
		waiters.Put(w)
		return err
	case <-ctx.Done(): // not put back: the callback may still run
		return ctx.Err()
	}
}

func sendPUB(ctx context.Context, c *wire.Conn, topic string, body []byte) error {
	w := waiters.Get().(*waiter)
	by, _ := ctx.Deadline()
	if err := c.Send(by, func(b []byte, _ uint64) []byte { return appendPUB(b, topic, body) }, w.done); err != nil {
		waiters.Put(w)
		return err
	}
	return wait(ctx, w)
}

func appendPUB(b []byte, topic string, body []byte) []byte {
	b = append(b, "PUB "...)
	b = append(b, topic...)
	b = append(b, '\n')
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// group is the bare group commit: one command in flight; whatever queued meanwhile leaves as one MPUB
// when it is answered.
type group struct {
	conn  *wire.Conn
	topic string
	mu    sync.Mutex
	busy  bool
	queue []queued
}

type queued struct {
	body []byte
	w    *waiter
}

func (g *group) publish(ctx context.Context, body []byte) error {
	w := waiters.Get().(*waiter)
	g.mu.Lock()
	if g.busy {
		g.queue = append(g.queue, queued{body, w})
		g.mu.Unlock()
		return wait(ctx, w)
	}
	g.busy = true
	g.mu.Unlock()
	g.send([]queued{{body, w}})
	return wait(ctx, w)
}

// send writes batch as one MPUB (a PUB for one message); its answer sends what queued meanwhile.
func (g *group) send(batch []queued) {
	for len(batch) > 0 {
		enc := func(b []byte, _ uint64) []byte { return appendMPUB(b, g.topic, batch) }
		err := g.conn.Send(time.Time{}, enc, func(err error) {
			for _, q := range batch {
				q.w.ch <- err
			}
			g.send(g.next())
		})
		if err == nil {
			return
		}
		for _, q := range batch {
			q.w.ch <- err
		}
		batch = g.next()
	}
}

func (g *group) next() []queued {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.busy = false
		return nil
	}
	batch := g.queue
	g.queue = make([]queued, 0, cap(batch))
	return batch
}

func appendMPUB(b []byte, topic string, batch []queued) []byte {
	if len(batch) == 1 {
		return appendPUB(b, topic, batch[0].body)
	}
	size := 4
	for _, q := range batch {
		size += 4 + len(q.body)
	}
	b = append(b, "MPUB "...)
	b = append(b, topic...)
	b = append(b, '\n')
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, uint32(len(batch)))
	for _, q := range batch {
		b = binary.BigEndian.AppendUint32(b, uint32(len(q.body)))
		b = append(b, q.body...)
	}
	return b
}
