package serve

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// startRoundTrips starts, per enabled broker, the echo (echo.enabled) and the ack consumer behind
// /sendRoundTrip (echo.roundtrip). Their closers run before the publishers close.
func (a *App) startRoundTrips(cfg config.Config, pubs map[string]publishers.Publisher, reg prometheus.Registerer, log *slog.Logger) (map[string]handlers.RoundTripper, error) {
	e := cfg.Echo
	if !e.Enabled && !e.RoundTrip {
		return nil, nil
	}
	metrics := roundtrip.NewMetrics(reg)
	rts := map[string]handlers.RoundTripper{}
	for _, b := range brokers.List {
		pub := pubs[b.Name]
		if pub == nil {
			continue
		}
		for i, t := range e.Topics {
			if err := pub.ValidateTopic(t); err != nil {
				return nil, fmt.Errorf("echo.topics[%d]: %s: %w", i, b.Name, err)
			}
			if err := pub.ValidateTopic(t + e.AckSuffix); err != nil {
				return nil, fmt.Errorf("echo.ack_suffix: %s: ack topic of %q: %w", b.Name, t, err)
			}
		}
		blog := log.With("broker", b.Name)
		open := func(group string) (publishers.Consumer, error) {
			c, err := b.OpenConsumer(&cfg.Sections, a.addrs[b], publishers.ConsumerOptions{Group: group}, blog)
			if err != nil {
				return nil, fmt.Errorf("echo: %w", err)
			}
			a.stoppers = append(a.stoppers, c.Close) // after what uses it: stoppers run last to first
			return c, nil
		}
		if e.RoundTrip {
			acks, err := open(roundtrip.AckGroup(b, &cfg.Sections))
			if err != nil {
				return nil, err
			}
			// Finished ids are remembered for a minute beyond the wait, so late duplicates still count.
			corr := roundtrip.NewCorrelator(b.Name, cfg.PublishTimeout+time.Minute, metrics)
			client := roundtrip.NewClient(pub, acks, e.Topics, e.AckSuffix, corr, blog)
			// The consumers subscribe in the background (the echo's too, below): a /sendRoundTrip before
			// then waits for a probe back from every host instead of going to nobody.
			client.StartProbes(message.NewSource(), roundtrip.DefaultProbeWait)
			a.stoppers = append(a.stoppers, client.Close)
			rts[b.Name] = client
		}
		if e.Enabled {
			in, err := open(roundtrip.EchoGroup)
			if err != nil {
				return nil, err
			}
			echo, err := roundtrip.StartEcho(roundtrip.EchoOptions{Broker: b.Name, Consumer: in, Publisher: pub,
				Topics: e.Topics, AckSuffix: e.AckSuffix, Handoff: roundtrip.Handoff(e.Handoff), Workers: e.Workers,
				QueueMaxMessages: e.QueueMaxMessages, QueueMaxBytes: e.QueueMaxBytes,
				Timeout: cfg.PublishTimeout, Metrics: metrics, Log: blog})
			if err != nil {
				return nil, err
			}
			a.stoppers = append(a.stoppers, echo.Close)
		}
	}
	return rts, nil
}
