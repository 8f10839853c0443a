package roundtrip

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// RunOptions are the batch's own settings, beside the service's configuration.
type RunOptions struct {
	Count, Size, Producers int
	Handoff                Handoff
	Workers                int
	Echo                   bool // run the echo in this process; false: a remote one answers
	Wait                   time.Duration
	ProbeWait              time.Duration  // bounds the probes before the batch (BatchOptions.ProbeWait)
	Progress               func(Progress) // nil: none
}

// Run opens cfg.Broker's publisher and consumers for addrs (the configured addresses, or embedded
// servers' the caller started), runs one batch on echo.topics[0] and closes them: `mqtarget roundtrip`
// and the integration suite run batches through it, so both use the same wiring. A topic or ack topic
// the broker refuses is an error wrapping publishers.ErrBadTopic that names its setting.
func Run(ctx context.Context, cfg config.Config, addrs []string, o RunOptions, log *slog.Logger) (Result, error) {
	b := brokers.Lookup(cfg.Broker) // config.Load validated the name
	pub, err := b.Open(&cfg.Sections, addrs, cfg.Common(), log)
	if err != nil {
		return Result{}, err
	}
	defer pub.Close()
	// Checked here, so a name the broker refuses is bad input (ErrBadTopic), told before anything starts.
	topic, ack := cfg.Echo.Topics[0], cfg.Echo.Topics[0]+cfg.Echo.AckSuffix
	if err := pub.ValidateTopic(topic); err != nil {
		return Result{}, fmt.Errorf("echo.topics[0]: %w: %w", publishers.ErrBadTopic, err)
	}
	if err := pub.ValidateTopic(ack); err != nil {
		return Result{}, fmt.Errorf("echo.ack_suffix: ack topic %q: %w: %w", ack, publishers.ErrBadTopic, err)
	}
	open := func(group string) (publishers.Consumer, error) {
		return b.OpenConsumer(&cfg.Sections, addrs, publishers.ConsumerOptions{Group: group}, log)
	}
	acks, err := open(AckGroup(b, &cfg.Sections))
	if err != nil {
		return Result{}, err
	}
	defer acks.Close()
	bo := BatchOptions{Broker: b.Name, Publisher: pub, Acks: acks, Topic: cfg.Echo.Topics[0], AckSuffix: cfg.Echo.AckSuffix,
		Count: o.Count, Size: o.Size, Producers: o.Producers, Wait: o.Wait, ProbeWait: o.ProbeWait, Grace: 200 * time.Millisecond, Progress: o.Progress}
	if o.Echo {
		in, err := open(EchoGroup)
		if err != nil {
			return Result{}, err
		}
		defer in.Close()
		bo.Echo = &EchoOptions{Consumer: in, Handoff: o.Handoff, Workers: o.Workers, Timeout: cfg.PublishTimeout, Log: log,
			QueueMaxMessages: cfg.Echo.QueueMaxMessages, QueueMaxBytes: cfg.Echo.QueueMaxBytes}
	}
	return Batch(ctx, bo)
}
