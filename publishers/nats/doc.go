// Package nats publishes to and consumes from NATS servers, with JetStream (the default) or core
// NATS, behind mqtarget's Publisher and Consumer contracts.
//
// # Servers
//
// nats.servers are independent servers in configured order: host k of /send2Host and /send3Host is
// server k. Each gets one nats.go connection of its own, made with a single URL and DontRandomize,
// IgnoreDiscoveredServers and SkipHostLookup, so the library never shuffles, fails over to a server
// learned from INFO, or rotates through the addresses a name resolves to. With nats.servers empty,
// StartEmbedded runs nats.embedded in-process nats-servers (JetStream on, each its store in a temporary
// directory bounded by nats.embedded_max_store, listening on 127.0.0.1 ephemeral ports).
//
// # What a 200 means
//
// With nats.jetstream: true, Publish returns nil only after the server's PubAck for that very publish:
// the answer comes on a reply subject carrying a token mqtarget issued for it, is parsed, and must name
// the stream mqtarget published into with a sequence number (and, for a batch, the batch id and its
// message count). A PubAck means the server stored the message in the stream (R1 here: the one
// server); it is not an fsync: nats-server writes to its file store and syncs every sync_interval
// (2 minutes by default), so a machine crash (not a process kill) can lose the last interval's
// acknowledged messages unless the server runs with sync_interval: always. An error answer is
// ErrRejected (502). Each reply subject carries the publish's token and a random nonce, so an answer
// a server guesses for a publish it has not got yet is told from the real one. An answer that is not a
// PubAck of this publish, a reply to a token never issued or with the wrong nonce, or a second answer
// to a token is a protocol violation: counted (ProtocolErrors), the connection is closed (nats.go
// redials; at most one such forced redial a second per server) and what was pending on it fails as
// ErrUnavailable, never as success. A late answer, to a publish that already timed out, is ignored.
//
// With nats.jetstream: false, messages go to core NATS subjects and Publish returns after a PING/PONG
// round trip on the connection (nats.go's Flush): the server has read the message, nothing more. Core
// NATS stores nothing and drops a message no subscriber wants: a 200 is no storage acknowledgement.
//
// # Streams
//
// With nats.stream empty, topic T goes to a stream named StreamName(T) (T with each byte a stream name
// cannot hold replaced by '_') with subjects [T], looked up on the first publish to T on each server
// and created there when missing (file storage, atomic batches allowed). With nats.stream set, every
// topic goes to that one stream; a topic none of its subjects matches is added to its subjects
// (nats-server refuses a stream capturing every subject, ">", unless it acknowledges nothing). At most
// 1024 topics per server; a stream that disappears (the server lost it) is looked up again after the
// first publish that finds no stream. A look-up is the publisher's, bounded by 10 s and Close: the
// publishes that wait for it each wait under their own deadline, and the first of them leaving neither
// fails the others nor abandons it.
//
// # Batches
//
// PublishBatch sends the messages as one JetStream atomic batch (Nats-Batch-Id, Nats-Batch-Sequence,
// Nats-Batch-Commit on the last; nats-server 2.12 or later, a stream with allow_atomic): the server
// stores all or none and answers the commit with one PubAck that counts them. On a stream without
// allow_atomic (one made elsewhere) each message gets its own PubAck and the batch succeeds when all
// did (acknowledged together, not atomic). With core NATS the messages are followed by one round trip.
//
// # Async
//
// PublishAsync hands the message to the server's writer at once and returns (a full writer queue
// refuses it with ErrUnavailable); done runs exactly once, with the PubAck's
// outcome, ErrUnavailable when the connection is lost before the PubAck, ErrTimeout after AsyncMaxWait
// without one, or ErrClosed at Close (which waits until every done has run). At most 16384 are in
// flight per publisher; beyond, PublishAsync refuses with ErrUnavailable.
//
// # Deadlines, reconnects and resends
//
// A publish ends by its own deadline (ctx) whatever the server does; a server that stops answering is
// also dropped after about three missed PINGs (2 s apart). nats.go writes under its connection's lock
// and holds that lock across network I/O (its flusher's write to a frozen server's full socket, up to
// 5 s; a redial's dial and handshake), so each server's messages are written by a goroutine of the
// publisher (writer.go), not on the publishing caller's: a caller waits for that writer (a queue of
// 1024 writes per server) under its own deadline, and a write whose caller already left is not made.
// Pings and core NATS round trips run on owned goroutines too. nats.go redials a lost connection
// forever with the shared redial policy (publishers.Backoff: 100 ms doubling to 2 s, equal jitter; a
// connection lost within 2 s of its handshake counts as a failed dial, so a server that drops every
// connection is redialled ever more slowly, not every 100 ms). mqtarget
// never resends: a publish that timed out or whose connection broke is reported and forgotten (its
// late PubAck, should it come, is ignored). The library does not resend either: nats.go keeps no copy
// of what it wrote, and its reconnect buffer, which would hold publishes made while disconnected and
// write them after the reconnect (possibly long after their callers gave up), is disabled
// (ReconnectBufSize -1): a publish while disconnected fails at once as ErrUnavailable (503).
//
// # Permissions
//
// nats-server drops a publish or subscription its user may not make and says so only with an -ERR
// on the connection, which it keeps: no PubAck comes and a core NATS round trip succeeds all the
// same. mqtarget reads those refusals (perms.go): a publish to a subject refused fails as
// ErrRejected (502), with JetStream as soon as the refusal is read, with core NATS after its round
// trip (nats.go records the refusal before the PONG that follows it); a refused JetStream API
// request fails the stream's look-up as ErrRejected; a refused subscription to the reply subject
// fails JetStream publishes and Ping as ErrUnavailable (503) until the next connection. A subject
// refused is refused without being sent for 10 s (at most 1024 per server). Consume ends with any
// refusal on its connections.
//
// # Consumer
//
// The Consumer reads a topic from every server: with JetStream a durable consumer named after the
// group (ConsumerOptions.Group) on the topic's stream, filtered to the topic, each message acked after
// handle returned (consumers of one group share the messages; what none read stays in the stream);
// with core NATS a queue subscription of the group, which sees only what arrives while it runs.
package nats
