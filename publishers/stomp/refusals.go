package stomp

import (
	"errors"
	"strings"
)

// A STOMP broker answers a SEND it refuses with an ERROR and closes the connection (the protocol
// says so). A destination refused for want of permission is refused the same way each time, so each
// request to it would cost a connection, and the requests to other destinations on that connection
// would wait for a redial: such a destination is remembered per host (publishers.Refusals) and
// refused without being sent until then.

// permissionWords are what the brokers say when they refuse a SEND for want of permission, lower
// case: RabbitMQ's access_refused; Artemis' "AMQ229032 User x does not have permission='CREATE_ADDRESS'
// on address y" (an address it may not create; a SEND refused on an address that exists says only
// "AMQ339011 Error sending message …", not remembered: Artemis 2.40.0); ActiveMQ Classic's "User x
// is not authorized to write to: queue://y" (its AuthorizationBroker; 5.17.2). Each is checked against
// the broker by publishers/stomp's TestIntegration*Permission.
var permissionWords = []string{"access_refused", "access refused", "does not have permission", "not authorized", "not authorised"}

// sendError is an ERROR frame's refusal; named: it named the receipt of the request it refused (else
// it refused every request outstanding, and only its words may tell which one caused it: RabbitMQ
// names no receipt).
type sendError struct {
	text  string
	named bool
}

func (e *sendError) Error() string { return "broker ERROR: " + e.text }

// refusedBefore is the error of a publish to topic on host while the broker's refusal of it is
// remembered; nil otherwise.
func (p *Publisher) refusedBefore(host int, topic string) error {
	if host < 0 || host >= len(p.refused) {
		return nil
	}
	return p.refused[host].Refused(topic, "stomp", p.pool.Addrs[host])
}

// noteRefusal remembers topic on host when err is the broker's ERROR refusing a SEND to topic for
// want of permission: one that named the SEND's receipt, or whose words name topic.
func (p *Publisher) noteRefusal(host int, topic string, err error) {
	if err != nil && host >= 0 && host < len(p.refused) {
		p.noteError(host, topic, err) // its own function: its error target would go to the heap on every call
	}
}

func (p *Publisher) noteError(host int, topic string, err error) {
	var se *sendError
	if !errors.As(err, &se) || (!se.named && !namesTopic(se.text, topic)) {
		return
	}
	text := strings.ToLower(se.text)
	for _, w := range permissionWords {
		if strings.Contains(text, w) {
			p.refused[host].Add(topic, se.text)
			return
		}
	}
}

// namesTopic reports whether text names topic as a word of its own: RabbitMQ's "access to queue
// 'orders' in vhost '/' refused", Artemis' "on address orders", ActiveMQ's "write to: queue://orders".
func namesTopic(text, topic string) bool {
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(" \t'\"`,;:=/()[]", r) }) {
		if w == topic || strings.TrimSuffix(w, ".") == topic {
			return true
		}
	}
	return false
}
