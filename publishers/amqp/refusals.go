package amqp

import (
	"fmt"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/mqtarget/mqtarget/publishers"
)

// A publish RabbitMQ refuses for want of permission is refused the same way each time. A refused
// declaration (no configure permission on the queue, 403) costs a round trip on the declaration
// channel; a refused publish (no write permission on the exchange, or a topic permission refusing its
// routing key) closes the publishing channel, and with it the connection and the publishes in flight
// on it. So that a load test against a forbidden topic or exchange does not pay that on every request,
// the refusal is remembered per host (publishers.Refusals) and such publishes are refused unsent
// until then.

// accessRefusal is what RabbitMQ refused when it closed the publishing channel with 403
// ACCESS_REFUSED: every publish to the exchange ("access to exchange 'x' in vhost …": no write
// permission on it; key "") or those with one routing key ("access to topic 'k' in exchange 'x' …": a
// topic permission). Its checks depend on the exchange and the routing key alone, so every publish in
// flight on that channel within its scope was refused too (RabbitMQ 3.10.8's words; checked by
// TestIntegrationPermission).
type accessRefusal struct {
	text string
	key  string
}

func parseAccessRefusal(e *amqp091.Error) (accessRefusal, bool) {
	if e == nil || !e.Server || e.Code != amqp091.AccessRefused {
		return accessRefusal{}, false
	}
	if _, rest, ok := strings.Cut(e.Reason, "access to topic '"); ok {
		if key, _, ok := strings.Cut(rest, "' in exchange '"); ok {
			return accessRefusal{text: e.Reason, key: key}, true
		}
	}
	if strings.Contains(e.Reason, "access to exchange '") {
		return accessRefusal{text: e.Reason}, true
	}
	return accessRefusal{}, false
}

// covers reports whether a publish to topic (its routing key) falls within the refusal.
func (a accessRefusal) covers(topic string) bool { return a.key == "" || a.key == topic }

// refusedBefore is the error of a publish to topic on h while a refusal of it, or of the whole
// exchange, is remembered; nil otherwise.
func (p *Publisher) refusedBefore(h *host, topic string) error {
	if err := h.refused.Refused(topic, "amqp", h.srv.name); err != nil {
		return err
	}
	return h.refusedExchange.Refused(p.exchangeName(), "amqp", h.srv.name)
}

// exchangeName is amqp.exchange as RabbitMQ names it ("" is amq.default).
func (p *Publisher) exchangeName() string {
	if p.cfg.Exchange == "" {
		return "amq.default"
	}
	return p.cfg.Exchange
}

// noteRefusal remembers a on h.
func (p *Publisher) noteRefusal(h *host, a accessRefusal) {
	if a.key == "" {
		h.refusedExchange.Add(p.exchangeName(), a.text)
	} else {
		h.refused.Add(a.key, a.text)
	}
}

// refusedErr is the error of a publish in flight on a channel RabbitMQ closed for a, within its scope.
func (l *link) refusedErr(a accessRefusal) error {
	return wrap(publishers.ErrRejected, fmt.Errorf("%s: the publishing channel closed: %d %s", l.h.srv.name, amqp091.AccessRefused, a.text))
}
