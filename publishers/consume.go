package publishers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Consumer reads messages from one broker family: the read side beside each publisher, used by the
// consume command, the echo and round trip, and the integration tests alike.
//
// The contract lives here rather than with one caller because all of those drive it.
type Consumer interface {
	// Consume subscribes to topic on every host and calls handle for each message until ctx ends or the
	// consumer is closed, then returns nil once nothing of the subscription runs any more. It returns an
	// error when a host cannot be subscribed to at the start; a connection that breaks later is
	// re-established. handle may run on several goroutines at once (one per host) and owns the Delivery.
	// What counts as consumed is the broker's (its package's consumer says: acknowledged when handle
	// returns, once sent, or nothing committed).
	Consume(ctx context.Context, topic string, handle func(Delivery)) error
	// Hosts lists where messages come from (the configured hosts, or the cluster's brokers as the
	// publisher's Hosts names them); Delivery.Host indexes it.
	Hosts() []string
	// Close ends every running Consume and waits for them; it is idempotent.
	Close() error
}

// Delivery is one received message.
type Delivery struct {
	Host     int       // index into Hosts of where it came from (a cluster: the broker, in Hosts order)
	Topic    string    // the topic consumed
	Body     []byte    // the payload; the handler owns it
	Received time.Time // when the consumer read it
}

// ConsumerOptions are the consumer settings that are not a broker section's: what a consumer calls itself
// towards the broker.
type ConsumerOptions struct {
	// Group is the consumer group (consumers sharing one share its messages) on the brokers that have
	// one (publishers.Broker.Group says what it is there); the others do not use it.
	Group string
}

// Errors of consumer input, so callers can tell bad input from a broker failure.
var (
	// ErrBadTopic: the topic is not valid for the broker.
	ErrBadTopic = errors.New("invalid topic")
	// ErrBadGroup: the consumer group is not valid for the broker.
	ErrBadGroup = errors.New("invalid consumer group")
)

// DefaultConsumerGroup is the consumer group of mqtarget's consumers.
const DefaultConsumerGroup = "mqtarget-consume"

// OpenConsumer creates broker b's consumer for addrs: the configured addresses, or the embedded servers'.
func (b *Broker) OpenConsumer(s SectionSet, addrs []string, o ConsumerOptions, log *slog.Logger) (Consumer, error) {
	if b.Hooks.Consume == nil {
		return nil, fmt.Errorf("%s: no consumer", b.Name)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: no addresses to consume from", b.AddrsSetting())
	}
	if o.Group == "" {
		o.Group = DefaultConsumerGroup
	}
	return b.Hooks.Consume(b.section(s), addrs, o, log)
}

// Scope tracks calls that its Close must end and wait for: a consumer's running Consume calls, a
// pool's dials, a cluster's topic lookups.
type Scope struct {
	mu     sync.Mutex
	closed bool
	root   context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func NewScope() *Scope {
	s := &Scope{}
	s.root, s.cancel = context.WithCancel(context.Background())
	return s
}

// Enter registers a call: the context it returns ends with ctx or with close; done must be called when
// the call returns. It fails with ErrClosed after close.
func (s *Scope) Enter(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	s.wg.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.root, cancel)
	return ctx, func() { unhook(); cancel(); s.wg.Done() }, nil
}

// Close ends every registered call and waits for them; later calls only wait.
func (s *Scope) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}
