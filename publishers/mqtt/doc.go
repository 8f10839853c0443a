// Package mqtt is mqtarget's MQTT broker: a publisher and a consumer over github.com/eclipse/paho.golang
// (v0.23.0, its low-level paho client) at MQTT 5, the default, or over github.com/eclipse/paho.mqtt.golang
// (v1.5.1) at MQTT 3.1.1 (mqtt.version; see "MQTT 3.1.1" below), the mqtt configuration section, and
// embedded github.com/mochi-mqtt/server/v2 servers for running without a broker. Topic T is the MQTT
// topic T.
//
// # Servers
//
// mqtt.servers are independent brokers in configured order: host k of /send2Host and /send3Host is
// servers[k], over one connection of its own, never a list a library may shuffle or fail over across.
// A connection is made on first use (CONNECT with clean start and no session expiry, at 3.1.1 clean
// session, answered by a successful CONNACK within mqtt.dial_timeout) and again after it broke, under
// the shared redial policy (publishers.DefaultBackoff: exponential, capped, equal jitter; a connection
// that lived 2 s proved itself). While a host is in its backoff its publishes fail at once with ErrUnavailable (503).
//
// # What a 200 means
//
//   - qos 1 (default): the broker answered the PUBLISH with a PUBACK whose reason code is below 0x80.
//   - qos 2: the PUBREC was not a refusal and the PUBCOMP came.
//   - qos 0: the PUBLISH was written to the socket. That is no acknowledgement at all: the broker may
//     never have read it.
//
// What a broker has promised then is its own: an MQTT broker forwards a message to the subscriptions
// that exist when it arrives and keeps nothing for a topic nobody subscribes to (mosquitto even answers
// PUBACK reason 0x10, "no matching subscribers", which is a success). For a QoS 1 or 2 subscriber it
// holds the message until that subscriber acknowledges it (mosquitto: up to max_queued_messages, which
// scripts/mosquitto.sh sets to 0, unlimited; with the default of 1000 a subscriber that falls behind
// loses messages). Neither PUBACK nor PUBCOMP says the message is on disk: mosquitto writes its
// persistence file every autosave_interval and at shutdown, so a kill -9 loses what came since.
//
// Every answer is checked: a PUBACK, PUBREC or PUBCOMP with a reason code of 0x80 or more is ErrRejected
// (502). paho ignores an acknowledgement naming an identifier it does not know and would take one for
// an identifier it allocated but has not written yet (a broker answering ahead), so the connection
// carries a tap (proto.go) that follows the packet identifiers written and answered: an answer to
// nothing outstanding at its stage (never sent, not yet written, a second one, a PUBCOMP before the
// PUBREL), a malformed packet header, or a packet announcing more than 64 KiB (paho would allocate it
// before reading: up to 256 MiB) ends the connection before paho reads any of what arrived with it
// (netConn reads whole buffers under the tap, which paho would read in pieces), fails what was
// pending on it with ErrUnavailable and counts in ProtocolErrors. A CONNACK refusal, garbage or a lost
// connection is ErrUnavailable (503); a deadline is ErrTimeout (504). A topic is checked by ValidateTopic (no wildcards, no $ topics, no control
// characters, at most MaxTopicLen bytes); a PUBLISH over the Maximum Packet Size the broker announced in
// CONNACK is refused before it is sent (ErrTooLarge, 413; mochi-mqtt announces none and drops the
// connection instead).
//
// # Batches
//
// MQTT has no batch. PublishBatch hands every body to the connection at once, each its own PUBLISH, and
// answers once every one is acknowledged; on the first failure it answers that failure, and the others
// may have been stored all the same.
//
// # Deadlines, retries and duplicates
//
// A publish handed to the connection waits for its acknowledgement up to its context's deadline; the
// PUBLISH itself stays with the connection until it is answered, the connection is lost, or 10 s pass
// (maxAckWait, the bound for PublishAsync's done). A broker that answers none within that bound has
// stalled: the connection is closed, failing everything pending on it, and the host redials. Writes are
// bounded too (5 s), so a broker that stopped reading cannot hold a publish in a write past its deadline.
//
// Nothing is ever sent twice by mqtarget. paho keeps unacknowledged QoS 1/2 PUBLISHes in a session and
// resends them with DUP set when a connection with the same session is made again; here every
// connection is a new paho client with its own in-memory session, with clean start and session expiry
// 0, so the broker discards the session when the connection ends and paho's copy ends with the client:
// there is nothing to resend. autopaho, paho's reconnecting client with its publish queue, is not used.
// A publish that timed out or whose connection was lost may still have reached the broker: it counts as
// failed (5xx) and may be in the broker's ledger, never twice.
//
// # Bounds
//
// At most mqtt.max_inflight publishes per host are accepted and not yet answered: beyond it a sync
// publish waits under its deadline and PublishAsync is refused with ErrUnavailable (503). Of those, at
// most the broker's Receive Maximum (CONNACK; mosquitto: max_inflight_messages, 20 by default) are on
// the wire; the rest wait in order for a slot, within the 10 s bound. PublishAsync never waits for the
// network on its caller's goroutine: a publish made while its host's connection is being set up waits
// for it on a goroutine of the publisher's, up to twice mqtt.dial_timeout (at most
// publishers.MaxAsyncWaiting per host, each counting in mqtt.max_inflight; beyond, it is refused with
// ErrUnavailable), and a failure of that wait goes to done. PublishAsync's done runs exactly once,
// within 10 s of the PUBLISH being handed to the connection (twice mqtt.dial_timeout more when it
// waited for one), or at Close with ErrClosed.
//
// # Version and counters
//
// BrokerVersion is the broker's retained $SYS/broker/version ("mosquitto version 2.0.11"; mochi-mqtt
// publishes its own version number), read once per host by subscribing to it on the publishing
// connection; "" for a broker without $SYS. ConnCounts counts each host's connections made, remade
// and failed dials; ProtocolErrors the connections closed for a protocol violation.
//
// # Consumer
//
// Consumer subscribes to the topic on every server at mqtt.qos with a clean session per Consume, and
// resubscribes after a connection breaks (same backoff). A broker keeps nothing for a subscription
// that is not connected, so what is published meanwhile is not delivered. ConsumerOptions.Group is
// not used.
//
// # Embedded servers
//
// StartEmbedded runs mochi-mqtt servers in-process on ephemeral ports of 127.0.0.1, anonymous, with no
// session kept past its connection, no retained messages, and at most 64 clients with 8192 packets
// queued and 8192 in flight to each, packets up to message.max_size plus the topic: what a server holds
// is bounded by their product (a count, not bytes: 64 × 16384 × 100 B is 105 MB; with 1 MiB messages
// it is no practical bound). A subscriber more than 8192 messages behind loses what comes next (mochi
// drops it, as mosquitto does past max_queued_messages). They speak MQTT 5 and 3.1.1, as the publisher
// does.
//
// # MQTT 3.1.1
//
// mqtt.version 3.1.1 makes every connection, the publisher's and the consumer's, an MQTT 3.1.1 one
// (protocol level 4, never falling back to 3.1) over paho.mqtt.golang, chosen in one place (dial, in
// conn.go; the 3.1.1 client is session311.go). Everything above holds as at MQTT 5, with these
// differences:
//
//   - No reason codes. A PUBACK, PUBREC or PUBCOMP says nothing but its identifier, so a broker cannot
//     refuse a publish in it: mochi-mqtt closes the connection instead (503, and the host redials);
//     mosquitto acknowledges a publish its ACL denies and drops it (a 200 for a message nobody gets:
//     tried with mosquitto 2.0.11 and mosquitto_pub -V mqttv311). ErrRejected (502) does not occur.
//     A refused CONNECT is CONNACK's return code (1..5), ErrUnavailable (503).
//   - No CONNACK limits: no Receive Maximum, Maximum Packet Size or Maximum QoS is announced, so none is
//     obeyed or checked before sending (a PUBLISH too large for the broker is a closed connection,
//     503). At QoS 2 at most 20 PUBLISHes are on the wire awaiting their PUBCOMP (qos2Window311):
//     mosquitto holds a 3.1.1 client to max_inflight_messages (20) for incoming QoS 2 all the same and
//     closes the connection at the 21st. At QoS 1 up to mqtt.max_inflight are.
//   - The broker version is the same $SYS/broker/version, read the same way ("mosquitto version
//     2.0.11", mochi-mqtt's number); the protocol spoken shows as the setup's "mqtt_version" on GET /.
//
// paho.mqtt.golang reconnects, resumes its session and resends unacknowledged PUBLISHes (with DUP set)
// unless told not to. Here: one client per connection with AutoReconnect and ConnectRetry off (the
// host redials under mqtarget's backoff, as at 5), CleanSession on and ResumeSubs off, and a Store that
// keeps nothing, so there is never anything to resend. It has no Done: Close waits for the last act of
// its shutdown (the connection-lost handler, or the Store's Close after a Disconnect), after which only
// the returns of its goroutines are left. It takes a PUBACK naming an identifier it allocated but not
// yet wrote, a PUBCOMP before any PUBREC, or the other QoS's answer as the acknowledgement of that
// publish (TestMisbehavingBrokers: without the tap, 6 such answers made 6 acknowledgements of which
// the fake stored none); the tap ends such a connection first, as at 5. One for an identifier it does
// not know it drops. Its loggers stay silent (no log line per packet). Its Publish waits at most 1 s
// (handoff311) for the client's writer to take the PUBLISH: behind a broker that stopped reading that
// long, a publish fails unsent (503), and Close waits up to that for calls made as the connection
// ended. Its keep alive pings after mqtt.keepalive idle and drops a connection whose PINGRESP does not
// come within another.
package mqtt
