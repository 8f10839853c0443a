package app

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/embedded"
	"github.com/mqtarget/mqtarget/publishers"
)

// startSTOMP publishes to stomp.hosts, or to embedded go-stomp servers when stomp.hosts is empty. STOMP
// is always enabled.
func startSTOMP(a *App, cfg config.Config, log *slog.Logger) (publishers.Publisher, any, error) {
	c := cfg.STOMP
	info := map[string]any{"embedded": len(c.Hosts) == 0, "prefix": c.Prefix, "persistent": c.Persistent}
	if len(c.Hosts) == 0 {
		srv, err := embedded.StartSTOMP(c.Embedded, c.EmbeddedMaxBytes, log)
		if err != nil {
			return nil, nil, err
		}
		a.closers = append(a.closers, srv.Close)
		a.embeddedSTOMP = srv
		c.Hosts = srv.Addrs()
	}
	info["hosts"] = c.Hosts
	pub, err := publishers.NewSTOMP(c, log)
	return pub, info, err
}

// EmbeddedSTOMP returns the embedded STOMP server addresses, or nil when the STOMP brokers are external.
func (a *App) EmbeddedSTOMP() []string {
	if a.embeddedSTOMP == nil {
		return nil
	}
	return a.embeddedSTOMP.Addrs()
}
