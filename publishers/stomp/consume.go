package stomp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/mqtarget/mqtarget/publishers"
)

// Consumer reads a destination (stomp.prefix + topic) from every configured broker, one connection
// per host and Consume call.
//
// It subscribes with ack:auto, the one mode every supported broker handles: the go-stomp v3.1.3 server
// never matches ack:client-individual acknowledgements and can crash on ack:client. A broker therefore
// counts a message consumed once it sent it, so on leaving the consumer UNSUBSCRIBEs, then DISCONNECTs
// with a receipt and handles what arrives until the receipt: a message dispatched before the broker saw
// the UNSUBSCRIBE is handled, not dropped with the connection.
type Consumer struct {
	cfg   Config
	tls   *tls.Config // nil: plain TCP
	log   *slog.Logger
	scope *publishers.Scope
	// backoff is the redial policy of the sessions (DefaultBackoff; tests shorten it).
	backoff publishers.Backoff
}

// stompConsumeLeave bounds the UNSUBSCRIBE/DISCONNECT exchange at the end.
const stompConsumeLeave = 2 * time.Second

// NewConsumer creates the consumer; it connects in Consume.
func NewConsumer(c Config, log *slog.Logger) (*Consumer, error) {
	if err := c.Validate("stomp"); err != nil {
		return nil, err
	}
	if len(c.Hosts) == 0 {
		return nil, errors.New("stomp.hosts: at least one host is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = publishers.LimitLog(log)
	tc, err := c.TLSConfig.Client("stomp")
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: c, tls: tc, log: log, scope: publishers.NewScope(), backoff: publishers.DefaultBackoff()}, nil
}

// Hosts implements Consumer.
func (c *Consumer) Hosts() []string { return c.cfg.Hosts }

// Consume implements Consumer.
func (c *Consumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if err := validateSTOMPTopic(topic); err != nil {
		return publishers.Wrap(publishers.ErrBadTopic, fmt.Errorf("stomp topic %q: %w", topic, err))
	}
	ctx, done, err := c.scope.Enter(ctx)
	if err != nil {
		return err
	}
	defer done()

	dest := c.cfg.Prefix + topic
	sessions := make([]*stompSession, len(c.cfg.Hosts))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, addr := range c.cfg.Hosts {
		s := &stompSession{c: c, host: i, addr: addr, topic: topic, dest: dest, handle: handle}
		if err := s.subscribe(ctx); err != nil {
			for _, s := range sessions[:i] {
				s.leave()
				s.conn.Close()
			}
			if ctx.Err() != nil { // ended (or closed) while connecting: a stop, not a failure
				return nil
			}
			return fmt.Errorf("stomp.hosts[%d] %s: %w", i, addr, err)
		}
		sessions[i] = s
	}
	for _, s := range sessions {
		wg.Go(func() { s.run(ctx) })
	}
	<-ctx.Done()
	return nil
}

// Close implements Consumer.
func (c *Consumer) Close() error {
	c.scope.Close()
	return nil
}

// stompSession is one host's subscription, reconnected after its connection broke.
type stompSession struct {
	c      *Consumer
	host   int
	addr   string
	topic  string
	dest   string
	handle func(publishers.Delivery)

	conn  net.Conn
	r     *bufio.Reader
	wmu   sync.Mutex // serialises writes: heart-beats and the leave frames
	w     *frame.Writer
	hbOut time.Duration // negotiated heart-beat send interval (0: none)
	since time.Time     // when conn subscribed
	// leaving: the DISCONNECT was sent (its RECEIPT ends the session); set by leave, read by serve.
	leaving atomic.Bool
}

// subscribe connects and subscribes within the dial timeout and ctx.
func (s *stompSession) subscribe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.DialTimeout)
	defer cancel()
	conn, err := dialSTOMP(ctx, s.addr, s.c.tls)
	if err != nil {
		return err
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	stop := interruptible(ctx, conn)
	defer stop()
	r, w := bufio.NewReaderSize(conn, stompConsumeBuffer), frame.NewWriter(conn)
	fail := func(err error) error {
		conn.Close()
		return publishers.Wrap(publishers.ErrUnavailable, noAnswer(ctx, err))
	}
	if err := w.Write(s.connectFrame()); err != nil {
		return fail(err)
	}
	f, err := readFrame(r)
	if err != nil {
		return fail(err)
	}
	switch f.Command {
	case frame.CONNECTED:
	case frame.ERROR:
		conn.Close()
		return connectRefused(f)
	default:
		return fail(publishers.ProtocolError("CONNECT answered with %s", f.Command))
	}
	hb, err := negotiate(s.c.cfg.HeartBeat, 0, f.Header.Get(frame.HeartBeat))
	if err != nil {
		return fail(err)
	}
	if err := w.Write(frame.New(frame.SUBSCRIBE, frame.Id, stompSubscription, frame.Destination, s.dest, frame.Ack, frame.AckAuto)); err != nil {
		return fail(err)
	}
	if !stop() {
		return fail(errors.New("subscribed as the dial ended")) // the interruption may have reached the socket
	}
	_ = conn.SetDeadline(time.Time{})
	s.conn, s.r, s.w, s.hbOut, s.since = conn, r, w, hb.send, time.Now()
	return nil
}

func (s *stompSession) connectFrame() *frame.Frame {
	cfg := s.c.cfg
	vhost := cfg.VHost
	if vhost == "" {
		vhost, _, _ = net.SplitHostPort(s.addr)
	}
	// no broker heart-beats asked for: a consumer waits for messages as long as it takes
	f := frame.New(frame.CONNECT, frame.AcceptVersion, "1.2", frame.Host, vhost,
		frame.HeartBeat, fmt.Sprintf("%d,0", cfg.HeartBeat.Milliseconds()))
	if cfg.Login != "" {
		f.Header.Add(frame.Login, cfg.Login)
		f.Header.Add(frame.Passcode, string(cfg.Passcode))
	}
	return f
}

// stompConsumeBuffer bounds a consumed frame's command and header lines; stompConsumeMaxBody its body:
// the largest message.max_size. go-stomp's frame.Reader would allocate whatever content-length a broker
// claims (up to 4 GiB) and read lines without end.
const (
	stompConsumeBuffer  = 64 << 10
	stompConsumeMaxBody = 64 << 20
)

// readFrame returns the next frame, skipping heart-beats.
func readFrame(r *bufio.Reader) (*frame.Frame, error) {
	for {
		f, err := readSTOMPFrameMax(r, stompConsumeMaxBody)
		if err != nil || f != nil {
			return f, err
		}
	}
}

// run delivers messages until ctx ends, reconnecting under the redial policy (Backoff) when the
// connection breaks: a subscription lost before it lived Healthy counts as a failure.
func (s *stompSession) run(ctx context.Context) {
	var r publishers.Redial
	b := s.c.backoff
	for {
		err := s.serve(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := r.Lost(b, time.Now(), time.Since(s.since), false, err)
		s.c.log.Warn("stomp consumer: connection lost, reconnecting", "host", s.addr, "destination", s.dest, "err", err,
			"next_dial_in", wait.Round(time.Millisecond))
		for {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			err := s.subscribe(ctx)
			if err == nil {
				break
			}
			if ctx.Err() == nil {
				s.c.log.Debug("stomp consumer: reconnect failed", "host", s.addr, "err", err)
			}
			wait = r.Failed(b, time.Now(), err)
		}
	}
}

// serve reads the subscribed connection until it breaks or, after ctx ended, until the broker confirmed
// the DISCONNECT; it closes the connection.
func (s *stompSession) serve(ctx context.Context) error {
	defer s.conn.Close()
	served := make(chan struct{})
	var aux sync.WaitGroup // leaving and heart-beats, both over when serve returns
	defer func() { close(served); aux.Wait() }()
	aux.Go(func() {
		select {
		case <-ctx.Done():
			s.leave()
		case <-served:
		}
	})
	if s.hbOut > 0 {
		aux.Go(func() { s.heartBeats(served) })
	}
	for {
		f, err := readFrame(s.r)
		if err != nil {
			return err
		}
		// Only what answers us is believed: a message of our subscription, the receipt of our DISCONNECT
		// once we sent it; anything else ends the connection as a protocol violation (it is redialled).
		switch f.Command {
		case frame.MESSAGE:
			if sub := f.Header.Get(frame.Subscription); sub != stompSubscription {
				return publishers.Wrap(publishers.ErrUnavailable, publishers.ProtocolError("MESSAGE of subscription %s, ours is %s", publishers.Truncate([]byte(sub)), stompSubscription))
			}
			s.handle(publishers.Delivery{Host: s.host, Topic: s.topic, Body: f.Body, Received: time.Now()})
		case frame.RECEIPT:
			if id := f.Header.Get(frame.ReceiptId); id != stompLeaveReceipt || !s.leaving.Load() {
				return publishers.Wrap(publishers.ErrUnavailable, publishers.ProtocolError("RECEIPT %s for nothing we sent", publishers.Truncate([]byte(id))))
			}
			return nil // the DISCONNECT's: everything dispatched to us has arrived
		case frame.ERROR:
			return publishers.Wrap(publishers.ErrRejected, errors.New(errorText(f)))
		default:
			return publishers.Wrap(publishers.ErrUnavailable, publishers.ProtocolError("%s frame on a subscribed connection", f.Command))
		}
	}
}

// The consumer's subscription id and the receipt id of its DISCONNECT.
const (
	stompSubscription = "0"
	stompLeaveReceipt = "bye"
)

// leave asks the broker to stop dispatching and to confirm the end, and bounds the wait for it.
func (s *stompSession) leave() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetDeadline(time.Now().Add(stompConsumeLeave))
	s.leaving.Store(true)
	_ = s.w.Write(frame.New(frame.UNSUBSCRIBE, frame.Id, stompSubscription))
	_ = s.w.Write(frame.New(frame.DISCONNECT, frame.Receipt, stompLeaveReceipt))
}

// stompConsumerWriteTimeout bounds one heart-beat write of a consumer: a broker that cannot take one
// byte in this long is stuck.
const stompConsumerWriteTimeout = 5 * time.Second

// heartBeats writes an EOL every negotiated interval until done is closed, so brokers such as Artemis do
// not drop a consumer that waits long for messages.
func (s *stompSession) heartBeats(done <-chan struct{}) {
	t := time.NewTicker(s.hbOut)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s.wmu.Lock()
			_ = s.conn.SetWriteDeadline(time.Now().Add(stompConsumerWriteTimeout))
			_, err := s.conn.Write([]byte{'\n'})
			s.wmu.Unlock()
			if err != nil {
				return
			}
		}
	}
}
