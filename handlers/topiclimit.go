package handlers

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// topicLimit bounds the distinct topic names each broker is sent to since start (topics.max_distinct),
// so a runaway ?topic= or ?topics= loop cannot create unbounded topics on a shared broker.
type topicLimit struct {
	max     int
	brokers map[string]*brokerTopics // fixed at New: read without a lock
	topic   string                   // the default topic: most requests publish to it
}

// brokerTopics are one broker's admitted names. Names already admitted cost one map read without
// allocating; only new names take the lock.
type brokerTopics struct {
	topicKnown atomic.Bool // the default topic has been admitted: one load instead of a map lookup
	known      sync.Map    // name → struct{}
	spreads    sync.Map    // base → int: the widest ?topics= spread admitted for base

	mu    sync.Mutex // held while admitting new names
	count int
}

func newTopicLimit(max int, brokers []string, topic string) *topicLimit {
	if max <= 0 {
		return nil
	}
	t := &topicLimit{max: max, brokers: map[string]*brokerTopics{}, topic: topic}
	for _, b := range brokers {
		t.brokers[b] = &brokerTopics{}
	}
	return t
}

// admit records the names a request with base topic and spread n (1: no spread) publishes to on broker,
// or answers 429 when they would take the broker past the limit; then nothing is recorded.
func (t *topicLimit) admit(broker, base string, n int) error {
	if t == nil {
		return nil
	}
	b := t.brokers[broker]
	if n <= 1 {
		if base == t.topic && b.topicKnown.Load() {
			return nil
		}
		if _, ok := b.known.Load(base); ok {
			return nil
		}
	} else if w, ok := b.spreads.Load(base); ok && w.(int) >= n {
		return nil
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	if n <= 1 {
		if _, ok := b.known.Load(base); !ok {
			names = append(names, base)
		}
	} else {
		from := 0
		if w, ok := b.spreads.Load(base); ok {
			if from = w.(int); from >= n { // admitted by another request meanwhile
				return nil
			}
		}
		for k := from; k < n; k++ {
			name := topicName(base, k)
			if _, ok := b.known.Load(name); !ok {
				names = append(names, name)
			}
		}
	}
	if b.count+len(names) > t.max {
		return &Error{Status: http.StatusTooManyRequests, Field: "topics.max_distinct",
			Msg: "broker " + broker + " has been sent to " + strconv.Itoa(b.count) + " distinct topics; " +
				strconv.Itoa(len(names)) + " more would exceed topics.max_distinct (" + strconv.Itoa(t.max) + ")"}
	}
	for _, name := range names {
		b.known.Store(name, struct{}{})
		if name == t.topic {
			b.topicKnown.Store(true)
		}
	}
	b.count += len(names)
	if n > 1 {
		b.spreads.Store(base, n)
	}
	return nil
}
