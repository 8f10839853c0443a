// Package amqp publishes to and consumes from AMQP 0-9-1 brokers (RabbitMQ) with
// github.com/rabbitmq/amqp091-go: the amqp section, its publisher and consumer, and (broker.go,
// enabled at merge) its registry entry.
//
// # What a 200 means
//
// With amqp.confirm (the default) the publishing channel is in confirm mode, and Publish returns nil
// only once the broker's basic.ack for that very delivery tag arrived. RabbitMQ sends it when the
// message is in every queue it routes to; with amqp.durable (the default: durable queues, persistent
// messages) a persistent message routed to a durable classic queue is acked once it is written to
// disk (fsynced in batches), and for a quorum queue once a majority of its replicas has it. An ack is
// therefore no promise that a consumer got the message, only that the broker holds it. A basic.nack
// answers 502 (ErrRejected). With amqp.mandatory (the default) a message no queue takes comes back
// as a basic.return before its ack, and answers 502 too; without it RabbitMQ acks and drops it.
//
// With amqp.confirm: false a publish answers once its frames are written to the socket: the broker
// has promised nothing, and a message lost in a connection that breaks is lost silently. mandatory
// then cannot be told (a return has no confirm to precede) and Validate refuses it.
//
// PublishBatch (/send2, /send3) publishes its bodies back to back on the one channel and answers
// once every one is confirmed; any nack or return fails the whole call (the others may be stored:
// AMQP 0-9-1 has no unit of several publishes that works with confirms, tx.select excludes them).
// When its deadline passes while its bodies are handed to the library, the rest are never sent and
// the call answers a timeout.
//
// Before the first publish to topic T on a connection the queue T is declared (durable as
// amqp.durable says) and, with amqp.exchange set, bound to that exchange with routing key T; the
// message goes to amqp.exchange ("" is the default exchange) with routing key T. A declaration the
// broker refuses (406 PRECONDITION_FAILED for a queue that exists with another durability, 404 for
// a missing exchange, 403) answers 502 naming the reason, on a channel of its own, so publishing
// goes on. A publish refused for want of permission (a 403 declaration, or the publishing channel
// closed with 403 for a topic permission or the exchange) is remembered and refused unsent for a while
// (refusals.go). A refused handshake (403 ACCESS_REFUSED for a wrong login or a vhost the user may not
// use) is a refused connection: ErrUnavailable (503), as with every broker.
//
// # Hosts, connections, redial
//
// amqp.urls are independent servers in configured order: host k of /send2Host and /send3Host is
// URLs[k], amqp.connections_per_host connections each, never a list the library may shuffle or fail
// over. Each connection has one writer goroutine that hands publishes to the library in order (so
// no caller ever waits on the library's locks or a socket write: a publish ends under its own
// deadline whatever the broker does) and one listener that takes the confirms and returns in the
// order the broker sent them and checks each; the dones of confirmed PublishAsyncs run in order on
// a goroutine of their own, so a slow one never holds the listener (the library drops a return it
// cannot hand over within 5 s). A confirm out of sequence, one sent before its publish (the library
// would replay it in sequence later), a return for nothing in flight or after its confirm, or
// frames the library cannot parse are protocol violations: the connection is closed, what was
// pending on it fails as unavailable, and ProtocolErrors counts them. A basic.ack or basic.nack for
// a delivery tag never published, or a single one for a tag confirmed already, is one too, found in
// the bytes before the library reads them: it would loop over every tag up to a multiple one's
// (2^40: hours, Close waiting for it) and keep single ones it cannot sequence for good.
//
// The connections are a publishers.Pool, the host pool the connection-oriented publishers share: a
// connection is redialled on the next publish after it broke, with the shared policy
// (publishers.Backoff: exponential to 2 s, equal jitter; a connection counts as healthy once it lived
// 2 s or had an answer); the dial runs to amqp.dial_timeout whatever the publish that started it does,
// and while it runs a live sibling takes the requests. A broker silent for 1.5 amqp.heartbeat
// intervals is taken for dead (the library's read deadline), a write that cannot proceed for 15 s ends
// the connection, and a publish unconfirmed for 30 s, or not handed to the library 30 s after it was
// made (the writer waits on a queue declaration the broker never answers, while its heartbeats keep
// the connection alive), does too: that bounds PublishAsync, whose done runs within about 31 s. While
// RabbitMQ blocks a connection (connection.blocked: a memory or disk alarm) publishes to it fail at
// once as unavailable.
//
// Close waits up to 1 s for the confirms of what was published, then, when nothing is unconfirmed,
// up to 1 s for the broker's answer to connection.close; the socket is closed then whatever the broker
// does (a blocked RabbitMQ keeps heartbeating without answering, which would hold the library's close
// for good). The consumer's Close is bounded the same way.
//
// # No resends
//
// amqp091-go reconnects only with Config.Recovery set, which this package never sets: the library
// never redials, never redeclares and never republishes. mqtarget does not either: a publish that
// timed out, or whose connection broke before its confirm, has failed and is never sent again, so
// the only duplicates a broker can hold are its own. A publish whose caller left while it was still
// queued for the writer is dropped unsent.
//
// # Bounds
//
// At most 64 URLs; per connection 4096 publishes queued for the writer (a sync publish waits for
// room under its deadline, an async one fails at once) and 65536 unconfirmed or awaiting their
// async done; 4096 queue names remembered as declared. A Ping result answers for its host for a
// second (whichever connection the next Ping takes), unless a connection was made or lost since.
// Passwords in amqp.urls are never printed: Hosts, GET /, logs and errors name host:port (and the
// vhost), and URLs prints redacted.
//
// # Embedded mode
//
// None: there is no AMQP 0-9-1 server in Go to embed. scripts/rabbitmq.sh runs a real RabbitMQ on
// 127.0.0.1 (docs/amqp.md).
//
// # Consumer
//
// NewConsumer's Consume declares queue T on every host (as the publisher does), consumes it with
// manual acks and a prefetch of 256, and acks each message once handle returned (at least once:
// what was delivered and not acked when a connection breaks is delivered again, to this consumer
// or another). Consumers on the same queue share its messages; ConsumerOptions.Group is not used.
package amqp
