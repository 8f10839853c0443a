package handlers

import (
	"net/http"
	"strconv"
	"sync"
)

// topicLimit bounds the distinct topic names each broker is sent to since start (topics.max_distinct),
// so a runaway ?topic= or ?topics= loop cannot create unbounded topics on a shared broker. Names already
// admitted cost one map read; only new names take the lock.
type topicLimit struct {
	max     int
	known   sync.Map // broker + "\x00" + name → struct{}
	spreads sync.Map // broker + "\x00" + base → int: the widest ?topics= spread admitted for base

	mu    sync.Mutex // held while admitting new names
	count map[string]int
}

func newTopicLimit(max int) *topicLimit {
	if max <= 0 {
		return nil
	}
	return &topicLimit{max: max, count: map[string]int{}}
}

// admit records the names a request with base topic and spread n (1: no spread) publishes to, or
// answers 429 when they would take broker past the limit; then nothing is recorded.
func (t *topicLimit) admit(broker, base string, n int) error {
	if t == nil {
		return nil
	}
	key := broker + "\x00" + base
	if n <= 1 {
		if _, ok := t.known.Load(key); ok {
			return nil
		}
	} else if w, ok := t.spreads.Load(key); ok && w.(int) >= n {
		return nil
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	if n <= 1 {
		if _, ok := t.known.Load(key); !ok {
			names = append(names, key)
		}
	} else {
		from := 0
		if w, ok := t.spreads.Load(key); ok {
			if from = w.(int); from >= n { // admitted by another request meanwhile
				return nil
			}
		}
		for k := from; k < n; k++ {
			name := broker + "\x00" + topicName(base, k)
			if _, ok := t.known.Load(name); !ok {
				names = append(names, name)
			}
		}
	}
	if t.count[broker]+len(names) > t.max {
		return &Error{Status: http.StatusTooManyRequests, Field: "topics.max_distinct",
			Msg: "broker " + broker + " has been sent to " + strconv.Itoa(t.count[broker]) + " distinct topics; " +
				strconv.Itoa(len(names)) + " more would exceed topics.max_distinct (" + strconv.Itoa(t.max) + ")"}
	}
	for _, name := range names {
		t.known.Store(name, struct{}{})
	}
	t.count[broker] += len(names)
	if n > 1 {
		t.spreads.Store(key, n)
	}
	return nil
}

// distinct is the number of distinct topics admitted for broker.
func (t *topicLimit) distinct(broker string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[broker]
}
