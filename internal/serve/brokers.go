package serve

import (
	"fmt"
	"log/slog"
	"maps"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/embedded"
	"github.com/mqtarget/mqtarget/publishers"
)

// embedder starts n in-process servers of one broker, registering their closers on the App, and returns
// the addresses to publish to and what / shows of them.
type embedder func(a *App, cfg config.Config, n int, log *slog.Logger) (addrs []string, setup map[string]any, err error)

// embedders serve the registry entries that have an embedded mode. They stay here rather than in the
// registry because publishers must not import internal/embedded; keying them by entry keeps the broker
// named once, and TestEveryEmbeddedModeHasAServer keeps the two in step.
var embedders = map[*publishers.Broker]embedder{
	publishers.NSQBroker:   startEmbeddedNSQ,
	publishers.STOMPBroker: startEmbeddedSTOMP,
}

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
		start := embedders[b]
		if start == nil {
			return nil, nil, fmt.Errorf("%s: empty, and mqtarget has no embedded %s server", b.AddrsSetting(), b.Name)
		}
		var extra map[string]any
		var err error
		if addrs, extra, err = start(a, cfg, n, log); err != nil {
			return nil, nil, err
		}
		maps.Copy(info, extra)
	}
	pub, err := b.Open(s, addrs, cfg.Common(), log)
	if err != nil {
		return nil, nil, err
	}
	a.addrs[b] = addrs
	info["hosts"] = pub.Hosts()
	return pub, info, nil
}

func startEmbeddedNSQ(a *App, cfg config.Config, n int, log *slog.Logger) ([]string, map[string]any, error) {
	nsqd, err := embedded.StartNSQDWith(n, embedded.NSQDOptions{
		MaxMsgSize: int64(cfg.Message.MaxSize),
		MaxDisk:    cfg.NSQ.EmbeddedMaxDisk,
		MaxMemory:  cfg.NSQ.EmbeddedMaxMemory,
	}, log)
	if err != nil {
		return nil, nil, err
	}
	a.closers = append(a.closers, nsqd.Close)
	a.embeddedNSQ = nsqd
	return nsqd.TCPAddrs(), map[string]any{"http": nsqd.HTTPAddrs(), "version": "nsqd " + moduleVersion("github.com/nsqio/nsq")}, nil
}

func startEmbeddedSTOMP(a *App, cfg config.Config, n int, log *slog.Logger) ([]string, map[string]any, error) {
	srv, err := embedded.StartSTOMP(n, cfg.STOMP.EmbeddedMaxBytes, log)
	if err != nil {
		return nil, nil, err
	}
	a.closers = append(a.closers, srv.Close)
	a.embeddedSTOMP = srv
	return srv.Addrs(), map[string]any{"version": "go-stomp server " + moduleVersion("github.com/go-stomp/stomp/v3")}, nil
}

// EmbeddedNSQ returns the embedded nsqd TCP and HTTP addresses, or nils when nsqd is external.
func (a *App) EmbeddedNSQ() (tcp, http []string) {
	if a.embeddedNSQ == nil {
		return nil, nil
	}
	return a.embeddedNSQ.TCPAddrs(), a.embeddedNSQ.HTTPAddrs()
}

// EmbeddedSTOMP returns the embedded STOMP server addresses, or nil when the STOMP brokers are external.
func (a *App) EmbeddedSTOMP() []string {
	if a.embeddedSTOMP == nil {
		return nil
	}
	return a.embeddedSTOMP.Addrs()
}

// StartEmbedded starts n in-process servers of broker b for a program other than serve (the roundtrip
// command) and returns their addresses and what stops them.
func StartEmbedded(b *publishers.Broker, cfg config.Config, n int, log *slog.Logger) (addrs []string, stop func(), err error) {
	start := embedders[b]
	if start == nil {
		return nil, nil, fmt.Errorf("%s: empty, and mqtarget has no embedded %s server", b.AddrsSetting(), b.Name)
	}
	a := &App{log: log}
	addrs, _, err = start(a, cfg, n, log)
	if err != nil {
		return nil, nil, err
	}
	return addrs, a.closeBrokers, nil
}
