package app

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/embedded"
	"github.com/mqtarget/mqtarget/publishers"
)

// startNSQ publishes to nsq.hosts, or to embedded nsqd instances when nsq.hosts is empty. NSQ is always
// enabled.
func startNSQ(a *App, cfg config.Config, log *slog.Logger) (publishers.Publisher, any, error) {
	c := cfg.NSQ
	info := map[string]any{"embedded": len(c.Hosts) == 0}
	if len(c.Hosts) == 0 {
		nsqd, err := embedded.StartNSQD(c.Embedded, int64(cfg.Message.MaxSize), log)
		if err != nil {
			return nil, nil, err
		}
		a.closers = append(a.closers, nsqd.Close)
		a.embeddedNSQ = nsqd
		c.Hosts = nsqd.TCPAddrs()
		info["http"] = nsqd.HTTPAddrs()
	}
	info["hosts"] = c.Hosts
	pub, err := publishers.NewNSQ(c, log)
	return pub, info, err
}

// EmbeddedNSQ returns the embedded nsqd TCP and HTTP addresses, or nils when nsqd is external.
func (a *App) EmbeddedNSQ() (tcp, http []string) {
	if a.embeddedNSQ == nil {
		return nil, nil
	}
	return a.embeddedNSQ.TCPAddrs(), a.embeddedNSQ.HTTPAddrs()
}
