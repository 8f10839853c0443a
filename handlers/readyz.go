package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Host states in /readyz and in the state-change log lines.
const (
	stateUp   = "up"
	stateDown = "down"
)

// DefaultReadyTimeout bounds /readyz's pings when Options.ReadyTimeout is 0: under the 1 s probes
// usually allow, so a hanging broker makes /readyz answer 503, not time the probe out.
const DefaultReadyTimeout = 900 * time.Millisecond

// hostStates remembers each broker host's last ping result, so that going down or coming back is
// logged once per change rather than on every probe.
type hostStates struct {
	mu   sync.Mutex
	last map[[2]string]string // broker, host → state
}

// record stores state and reports whether it differs from the last one. A first result of up is no
// change: hosts are presumed reachable at start, the publishers dialled them.
func (h *hostStates) record(broker, host, state string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		h.last = map[[2]string]string{}
	}
	k := [2]string{broker, host}
	prev, seen := h.last[k]
	h.last[k] = state
	if !seen {
		return state != stateUp
	}
	return prev != state
}

type hostCheck struct {
	Host  string `json:"host"`
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

type brokerCheck struct {
	// Required: a host of this broker being down makes /readyz answer 503 (Options.ReadyBrokers).
	Required bool        `json:"required"`
	Ready    bool        `json:"ready"`
	Hosts    []hostCheck `json:"hosts"`
}

// readyz pings every host of every broker in use at once, within the ready timeout, and answers 200 when every
// host of the required brokers is up, else 503; the body reports each broker and host. During the
// lame-duck phase it answers 503 without pinging, so load balancers stop sending before the shutdown.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.lameDuck.Load() {
		writeJSON(w, http.StatusServiceUnavailable, []byte(`{"ready":false,"shutting_down":true,"brokers":{}}`+"\n"))
		return
	}
	brokers := s.readyCheck(r.Context())
	if brokers == nil {
		return // the client left
	}
	ready := true
	for _, b := range brokers {
		if b.Required && !b.Ready {
			ready = false
		}
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	body, _ := json.Marshal(map[string]any{"ready": ready, "brokers": brokers})
	writeJSON(w, status, append(body, '\n'))
}

// readyRound is one round of /readyz pings, shared by every /readyz request that arrives while it runs.
type readyRound struct {
	done    chan struct{}
	brokers map[string]*brokerCheck // read-only once done is closed
}

// readyCheck returns the result of a round of pings: the one running, else a new one run by this
// request. However many probes (or clients) ask at once, each broker host gets one ping at a time, not
// one connection per request. The round does not end with the request that runs it, so those waiting
// for it get its result; nil when ctx ends first.
func (s *Server) readyCheck(ctx context.Context) map[string]*brokerCheck {
	s.readyMu.Lock()
	round := s.readyRound
	if round == nil {
		round = &readyRound{done: make(chan struct{})}
		s.readyRound = round
		s.readyMu.Unlock()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.readyTimeout)
		round.brokers = s.checkHosts(pctx)
		cancel()
		s.readyMu.Lock()
		s.readyRound = nil
		s.readyMu.Unlock()
		close(round.done)
		return round.brokers
	}
	s.readyMu.Unlock()
	select {
	case <-round.done:
		return round.brokers
	case <-ctx.Done():
		return nil
	}
}

// checkHosts pings every host of every broker in use at once, within ctx, and logs the hosts whose
// state changed since the last check (by /readyz or /stats).
func (s *Server) checkHosts(ctx context.Context) map[string]*brokerCheck {
	brokers := make(map[string]*brokerCheck, len(s.brokerNames))
	var wg sync.WaitGroup
	for _, name := range s.brokerNames {
		pub := s.pubs[name]
		hosts := pub.Hosts()
		b := &brokerCheck{Required: slices.Contains(s.readyBrokers, name), Ready: true, Hosts: make([]hostCheck, len(hosts))}
		brokers[name] = b
		for i, addr := range hosts {
			wg.Go(func() {
				// Each goroutine writes its own element; wg.Wait orders the writes before the reads.
				c := hostCheck{Host: addr, State: stateUp}
				if err := pub.Ping(ctx, i); err != nil {
					c.State, c.Error = stateDown, err.Error()
				}
				b.Hosts[i] = c
			})
		}
	}
	wg.Wait()
	for _, name := range s.brokerNames {
		b := brokers[name]
		for _, c := range b.Hosts {
			if c.State != stateUp {
				b.Ready = false
			}
			if s.hostStates.record(name, c.Host, c.State) {
				if c.State == stateUp {
					s.hostLog.Info("broker host reachable again", "broker", name, "host", c.Host)
				} else {
					s.hostLog.Warn("broker host unreachable", "broker", name, "host", c.Host, "err", c.Error)
				}
			}
		}
	}
	return brokers
}
