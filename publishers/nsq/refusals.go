package nsq

import (
	"errors"
	"strconv"
	"strings"

	"github.com/nsqio/go-nsq"

	"github.com/mqtarget/mqtarget/publishers"
)

// nsqd answers a PUB or MPUB to a topic its AUTH does not cover with E_UNAUTHORIZED and closes the
// connection, as it does after every error: each request to such a topic would cost a connection, and
// the requests behind it on that connection a redial. Such a topic is remembered per nsqd
// (publishers.Refusals) and refused without being sent until then.

// unauthorizedPrefix begins nsqd's answer to a command its authorizations do not cover:
// `E_UNAUTHORIZED AUTH failed for PUB on "topic" ""` (nsqd's CheckAuth).
const unauthorizedPrefix = "E_UNAUTHORIZED AUTH failed for "

// newRefusals makes each host's Refusals, one for all hosts of one address.
func newRefusals(addrs []string) ([]*publishers.Refusals, map[string]*publishers.Refusals) {
	byAddr := map[string]*publishers.Refusals{}
	hosts := make([]*publishers.Refusals, len(addrs))
	for i, a := range addrs {
		if byAddr[a] == nil {
			byAddr[a] = &publishers.Refusals{}
		}
		hosts[i] = byAddr[a]
	}
	return hosts, byAddr
}

// unauthorizedTopic is the topic nsqd's error reason says AUTH does not cover ("" when it says none).
func unauthorizedTopic(reason string) string {
	rest, ok := strings.CutPrefix(reason, unauthorizedPrefix)
	if !ok {
		return ""
	}
	_, rest, ok = strings.Cut(rest, " on ")
	if !ok {
		return ""
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return ""
	}
	topic, err := strconv.Unquote(q)
	if err != nil {
		return ""
	}
	return topic
}

// refusedBefore is the error of a publish to topic on host while nsqd's refusal of it is
// remembered; nil otherwise.
func (p *Publisher) refusedBefore(host int, topic string) error {
	if host < 0 || host >= len(p.refused) {
		return nil
	}
	return p.refused[host].Refused(topic, "nsqd", p.pool.Addrs[host])
}

// noteUnauthorized remembers the topic when err is nsqd's E_UNAUTHORIZED naming one.
func noteUnauthorized(refused *publishers.Refusals, err error) {
	var pe nsq.ErrProtocol
	if errors.As(err, &pe) {
		if topic := unauthorizedTopic(pe.Reason); topic != "" {
			refused.Add(topic, pe.Reason)
		}
	}
}
