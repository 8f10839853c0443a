package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// What this package needs of publishers that main's publishers keeps unexported. On the plugin branch
// (#18) these are exported (publishers.Wrap, CtxErr, ValidateAddrs, TLSConfig.Validate, Backoff.Wait);
// at the merge each helper here becomes a call of its exported twin.

// wrap attaches an error kind to err, both visible to errors.Is (publishers.Wrap).
func wrap(kind, err error) error { return fmt.Errorf("%w: %w", kind, err) }

// ctxErr converts a context's end into ErrTimeout (deadline) or the cancellation (publishers.CtxErr).
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return wrap(publishers.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}

// validateAddrs checks an address list as publishers.ValidateAddrs does: at most publishers.MaxHosts
// host:port addresses, none twice.
func validateAddrs(key string, addrs []string) error {
	if len(addrs) > publishers.MaxHosts {
		return fmt.Errorf("%s: %d addresses, at most %d are allowed", key, len(addrs), publishers.MaxHosts)
	}
	var errs []error
	seen := make(map[string]int, len(addrs))
	for i, a := range addrs {
		if err := publishers.ValidateHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", key, i, err))
		} else if j, dup := seen[a]; dup {
			errs = append(errs, fmt.Errorf("%s[%d]: %q repeats %s[%d]", key, i, a, key, j))
		} else {
			seen[a] = i
		}
	}
	return errors.Join(errs...)
}

// validateTLS checks the TLS settings' combination (publishers.TLSConfig.Validate); the files are read
// by TLSConfig.Client when the publisher opens.
func validateTLS(c publishers.TLSConfig, prefix string) error {
	var errs []error
	if !c.Enabled && (c.CAFile != "" || c.ServerName != "" || c.InsecureSkipVerify || c.CertFile != "" || c.KeyFile != "") {
		errs = append(errs, fmt.Errorf("%s.tls: TLS settings (%s.tls_*) are set without %s.tls: true", prefix, prefix, prefix))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s.tls_cert_file: tls_cert_file and tls_key_file must be set together", prefix))
	}
	if c.InsecureSkipVerify && c.CAFile != "" {
		errs = append(errs, fmt.Errorf("%s.tls_ca_file: pointless with %s.tls_insecure_skip_verify, which verifies nothing", prefix, prefix))
	}
	return errors.Join(errs...)
}

// redialWait is the shared redial policy (publishers.Backoff: equal jitter, doubling from Base to Max)
// for nats.go's reconnect loop: attempts is its count of consecutive failed rounds (0 on the first).
func redialWait(b publishers.Backoff, attempts int) time.Duration {
	d := b.Max
	if attempts < 30 && b.Base<<attempts < b.Max {
		d = b.Base << attempts
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// limitLog is log with each message (per level, text and addr attribute) at most once per logEvery, the number
// suppressed in between added to the next (publishers.LimitLog, over internal/lograte, which this
// package may not import on main).
func limitLog(log *slog.Logger) *slog.Logger {
	return slog.New(&limitHandler{Handler: log.Handler(), last: &sync.Map{}})
}

const logEvery = 10 * time.Second

type limitHandler struct {
	slog.Handler
	last *sync.Map // level, message and addr -> *limitState; bounded by the messages and hosts
}

type limitState struct {
	mu         sync.Mutex
	at         time.Time
	suppressed int
}

func (h *limitHandler) Handle(ctx context.Context, r slog.Record) error {
	key := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" { // per host
			key += " " + a.Value.String()
		}
		return true
	})
	v, _ := h.last.LoadOrStore(key, &limitState{})
	st := v.(*limitState)
	st.mu.Lock()
	if !st.at.IsZero() && r.Time.Sub(st.at) < logEvery {
		st.suppressed++
		st.mu.Unlock()
		return nil
	}
	n := st.suppressed
	st.at, st.suppressed = r.Time, 0
	st.mu.Unlock()
	if n > 0 {
		r.AddAttrs(slog.Int("suppressed", n))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *limitHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &limitHandler{Handler: h.Handler.WithAttrs(as), last: h.last}
}

func (h *limitHandler) WithGroup(name string) slog.Handler {
	return &limitHandler{Handler: h.Handler.WithGroup(name), last: h.last}
}
