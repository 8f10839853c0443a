package handlers

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// maxScrapes bounds the /metrics answers being rendered at once; a scrape past it waits up to
// scrapeWait for a turn, then gets 503. Rendering (the gather, the encoder, gzip's state: hundreds of KB)
// takes milliseconds, so Prometheus servers and people never wait; a flood of scrapers cannot multiply
// that memory.
const (
	maxScrapes = 4
	scrapeWait = time.Second
)

// metrics serves /metrics: promhttp renders each answer into a buffer while it holds one of maxScrapes
// turns, and the buffer is written afterwards. A client that reads slowly, or not at all, then holds
// only its rendered answer (a few KB gzipped) until http.write_timeout, never an encoder or a turn.
func (s *Server) metrics() http.Handler {
	h := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg, EnableOpenMetrics: true})
	turns := make(chan struct{}, maxScrapes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(scrapeWait)
		select {
		case turns <- struct{}{}:
			t.Stop()
		case <-t.C:
			w.Header()["Retry-After"] = retryAfter
			writeError(w, http.StatusServiceUnavailable, "",
				"too many /metrics scrapes at once (at most "+strconv.Itoa(maxScrapes)+" are rendered at a time)", 0)
			return
		case <-r.Context().Done():
			t.Stop()
			return // the client left
		}
		rendered := &bufferedResponse{header: w.Header(), status: http.StatusOK}
		h.ServeHTTP(rendered, r)
		<-turns
		w.Header()["Content-Length"] = []string{strconv.Itoa(rendered.body.Len())}
		w.WriteHeader(rendered.status)
		_, _ = w.Write(rendered.body.Bytes())
	})
}

// bufferedResponse is a ResponseWriter that keeps the body; its header is the real answer's.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }
