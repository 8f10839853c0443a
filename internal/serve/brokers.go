package serve

import (
	"log/slog"
	"maps"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers"
)

// startBroker starts one registry entry's publisher, and its embedded servers when the configuration
// gives it no addresses. It returns a nil publisher when the broker is not in use (config.InUse: no
// addresses, and neither the default broker nor in embedded_brokers), and the effective setup to show on /.
func (a *App) startBroker(b *publishers.Broker, cfg config.Config, log *slog.Logger) (publishers.Publisher, map[string]any, error) {
	s := &cfg.Sections
	if !cfg.InUse(b) {
		return nil, nil, nil
	}
	info := map[string]any{}
	maps.Copy(info, b.Setup(s))
	addrs := b.Addrs(s)
	n := b.Embedded(s)
	info["embedded"] = n > 0
	if n > 0 {
		e, err := b.StartEmbedded(s, n, cfg.Common(), log)
		if err != nil {
			return nil, nil, err
		}
		a.closers = append(a.closers, e.Close)
		if a.embedded == nil {
			a.embedded = map[string]*publishers.Embedded{}
		}
		a.embedded[b.Name] = e
		addrs = e.Addrs
		maps.Copy(info, e.Setup)
	}
	pub, err := b.Open(s, addrs, cfg.Common(), log)
	if err != nil {
		return nil, nil, err
	}
	a.addrs[b] = addrs
	info["hosts"] = pub.Hosts()
	return pub, info, nil
}

// Embedded returns the in-process servers broker runs on, or nil when its brokers are external.
func (a *App) Embedded(broker string) *publishers.Embedded { return a.embedded[broker] }

// StartEmbedded starts n in-process servers of broker b for a program other than serve (the roundtrip
// command) and returns their addresses and what stops them.
func StartEmbedded(b *publishers.Broker, cfg config.Config, n int, log *slog.Logger) (addrs []string, stop func(), err error) {
	e, err := b.StartEmbedded(&cfg.Sections, n, cfg.Common(), log)
	if err != nil {
		return nil, nil, err
	}
	return e.Addrs, func() {
		if err := e.Close(); err != nil {
			log.Warn("closing embedded broker", "err", err)
		}
	}, nil
}
