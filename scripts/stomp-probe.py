#!/usr/bin/env python3
"""Minimal STOMP readiness probe (python3 stdlib only).

Usage:
  stomp-probe.py HOST:PORT [--login L --passcode P --host VHOST]
                 [--dest /queue/mqtarget-probe] [--timeout 10]
                 [--heart-beat 0,0] [--tx] [-v | -q]

Steps, all within --timeout seconds:
  1. CONNECT (STOMP 1.0-1.2) and wait for CONNECTED
  2. SEND a unique token to --dest with a receipt header and wait for the
     RECEIPT (with --tx: BEGIN, SEND-with-receipt in the transaction,
     COMMIT-with-receipt)
  3. SUBSCRIBE (client-individual ack) to --dest and read MESSAGE frames
     until the token comes back, ACKing each (the last ACK with a receipt);
     older probe messages left behind by failed runs are drained on the way,
     so the probe queue ends up empty
  4. UNSUBSCRIBE, DISCONNECT with a receipt

Exit status: 0 success, 1 could not connect / timeout / I/O error,
2 the broker answered with an ERROR frame or an unexpected frame, 64 usage.
"""

import argparse
import os
import socket
import sys
import time
import uuid

EXIT_OK, EXIT_IO, EXIT_PROTO, EXIT_USAGE = 0, 1, 2, 64


class ProbeError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


def _escape(value):
    # STOMP 1.1/1.2 header escaping (not applied to CONNECT frames).
    return (value.replace("\\", "\\\\").replace("\r", "\\r")
            .replace("\n", "\\n").replace(":", "\\c"))


def _unescape(value):
    out, i = [], 0
    while i < len(value):
        c = value[i]
        if c == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"\\": "\\", "r": "\r", "n": "\n", "c": ":"}.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Frame:
    def __init__(self, command, headers, body):
        self.command = command
        self.headers = headers
        self.body = body

    def __repr__(self):
        hdrs = " ".join("%s=%s" % (k, v) for k, v in self.headers.items())
        body = self.body[:60]
        return "%s [%s] body=%r" % (self.command, hdrs, body)


class StompConn:
    def __init__(self, host, port, deadline, verbose):
        self.deadline = deadline
        self.verbose = verbose
        self.escape = False  # switched on once a 1.1+ session is negotiated
        self.buf = b""
        remaining = self._remaining()
        try:
            self.sock = socket.create_connection((host, port), timeout=remaining)
        except OSError as exc:
            raise ProbeError(EXIT_IO, "connect %s:%d: %s" % (host, port, exc))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _remaining(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ProbeError(EXIT_IO, "timeout")
        return left

    def send(self, command, headers, body=b""):
        lines = [command]
        for key, val in headers.items():
            if self.escape and command != "CONNECT":
                key, val = _escape(key), _escape(str(val))
            lines.append("%s:%s" % (key, val))
        if body:
            lines.append("content-length:%d" % len(body))
        data = ("\n".join(lines) + "\n\n").encode("utf-8") + body + b"\x00"
        if self.verbose:
            shown = {k: ("***" if k == "passcode" else v) for k, v in headers.items()}
            print(">>> %s %s" % (command, shown), file=sys.stderr)
        try:
            self.sock.settimeout(self._remaining())
            self.sock.sendall(data)
        except OSError as exc:
            raise ProbeError(EXIT_IO, "send %s: %s" % (command, exc))

    def _fill(self):
        try:
            self.sock.settimeout(self._remaining())
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise ProbeError(EXIT_IO, "timeout")
        except OSError as exc:
            raise ProbeError(EXIT_IO, "recv: %s" % exc)
        if not chunk:
            raise ProbeError(EXIT_IO, "connection closed by broker")
        self.buf += chunk

    def recv(self):
        while True:
            # Skip heart-beat EOLs between frames.
            self.buf = self.buf.lstrip(b"\r\n")
            sep = self.buf.find(b"\n\n")
            sep_len = 2
            crlf = self.buf.find(b"\r\n\r\n")
            if crlf != -1 and (sep == -1 or crlf < sep):
                sep, sep_len = crlf, 4
            if sep == -1:
                self._fill()
                continue
            head = self.buf[:sep].decode("utf-8").replace("\r\n", "\n").split("\n")
            command, headers = head[0], {}
            for line in head[1:]:
                key, _, val = line.partition(":")
                if self.escape and command != "CONNECTED":
                    key, val = _unescape(key), _unescape(val)
                headers.setdefault(key, val)  # first occurrence wins (STOMP 1.2)
            start = sep + sep_len
            if "content-length" in headers:
                need = start + int(headers["content-length"]) + 1
                while len(self.buf) < need:
                    self._fill()
                body = self.buf[start:need - 1]
                self.buf = self.buf[need:]
            else:
                end = self.buf.find(b"\x00", start)
                while end == -1:
                    self._fill()
                    end = self.buf.find(b"\x00", start)
                body = self.buf[start:end]
                self.buf = self.buf[end + 1:]
            frame = Frame(command, headers, body)
            if self.verbose:
                print("<<< %r" % frame, file=sys.stderr)
            if command == "ERROR":
                msg = _unescape(headers.get("message", ""))
                detail = body.decode("utf-8", "replace").strip()
                raise ProbeError(EXIT_PROTO, "ERROR frame: %s %s" % (msg, detail[:300]))
            return frame

    def expect_receipt(self, receipt_id, what):
        while True:
            frame = self.recv()
            if frame.command == "RECEIPT" and frame.headers.get("receipt-id") == receipt_id:
                return
            if frame.command == "RECEIPT":
                raise ProbeError(EXIT_PROTO, "%s: unexpected receipt-id %r"
                                 % (what, frame.headers.get("receipt-id")))
            raise ProbeError(EXIT_PROTO, "%s: expected RECEIPT, got %s" % (what, frame.command))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def ack_headers(version, msg):
    if version == "1.2":
        return {"id": msg.headers.get("ack", "")}
    hdrs = {"message-id": msg.headers.get("message-id", "")}
    if version == "1.1":
        hdrs["subscription"] = msg.headers.get("subscription", "")
    return hdrs


def probe(args):
    host, _, port = args.address.rpartition(":")
    if not host or not port.isdigit():
        raise ProbeError(EXIT_USAGE, "address must be HOST:PORT, got %r" % args.address)
    port = int(port)
    vhost = args.host if args.host is not None else host
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    conn = StompConn(host, port, deadline, args.verbose)
    try:
        hdrs = {"accept-version": "1.0,1.1,1.2", "host": vhost,
                "heart-beat": args.heart_beat}
        if args.login is not None:
            hdrs["login"] = args.login
        if args.passcode is not None:
            hdrs["passcode"] = args.passcode
        conn.send("CONNECT", hdrs)
        frame = conn.recv()
        if frame.command != "CONNECTED":
            raise ProbeError(EXIT_PROTO, "expected CONNECTED, got %s" % frame.command)
        version = frame.headers.get("version", "1.0")
        server = frame.headers.get("server", "?")
        server_hb = frame.headers.get("heart-beat", "none")
        conn.escape = version in ("1.1", "1.2")
        t_conn = time.monotonic()

        token = "probe-%s-%d" % (uuid.uuid4().hex, os.getpid())
        send_hdrs = {"destination": args.dest, "receipt": "send-1",
                     "content-type": "text/plain", "mqtarget-probe": "1"}
        if args.tx:
            conn.send("BEGIN", {"transaction": "tx-1"})
            send_hdrs["transaction"] = "tx-1"
        conn.send("SEND", send_hdrs, token.encode("ascii"))
        conn.expect_receipt("send-1", "SEND")
        if args.tx:
            conn.send("COMMIT", {"transaction": "tx-1", "receipt": "commit-1"})
            conn.expect_receipt("commit-1", "COMMIT")
        t_send = time.monotonic()

        # Explicit client-individual ACKs (the last one with a receipt), so the
        # message is really removed before we unsubscribe: with ack:auto some
        # brokers ack asynchronously and an immediate UNSUBSCRIBE leaves it queued.
        conn.send("SUBSCRIBE", {"id": "probe-sub", "destination": args.dest,
                                "ack": "client-individual" if version != "1.0" else "client"})
        drained = 0
        while True:
            frame = conn.recv()
            if frame.command != "MESSAGE":
                raise ProbeError(EXIT_PROTO, "expected MESSAGE, got %s" % frame.command)
            mine = frame.body == token.encode("ascii")
            ack = ack_headers(version, frame)
            if mine:
                ack["receipt"] = "ack-1"
            conn.send("ACK", ack)
            if mine:
                conn.expect_receipt("ack-1", "ACK")
                break
            drained += 1
        t_recv = time.monotonic()

        conn.send("UNSUBSCRIBE", {"id": "probe-sub"})
        conn.send("DISCONNECT", {"receipt": "disconnect-1"})
        try:
            conn.expect_receipt("disconnect-1", "DISCONNECT")
        except ProbeError:
            pass  # some brokers close before the receipt arrives; not a failure
        return ("ok %s: CONNECTED version=%s server=%s heart-beat=%s; "
                "connect %.0fms, send%s+receipt %.0fms, consume-back %.0fms, "
                "drained %d stale" % (
                    args.address, version, server, server_hb, (t_conn - t0) * 1000, "+tx" if args.tx else "",
                    (t_send - t_conn) * 1000, (t_recv - t_send) * 1000, drained))
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description="STOMP CONNECT + SEND(receipt) + consume-back probe")
    ap.add_argument("address", help="HOST:PORT")
    ap.add_argument("--login")
    ap.add_argument("--passcode")
    ap.add_argument("--host", help="host header (virtual host); default: HOST part of address")
    ap.add_argument("--dest", default="/queue/mqtarget-probe")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--heart-beat", default="0,0")
    ap.add_argument("--tx", action="store_true", help="send inside BEGIN/COMMIT")
    ap.add_argument("-v", "--verbose", action="store_true", help="print frames to stderr")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing on success or failure")
    args = ap.parse_args()
    try:
        summary = probe(args)
    except ProbeError as exc:
        if not args.quiet:
            print("stomp-probe %s: FAILED: %s" % (args.address, exc), file=sys.stderr)
        return exc.code
    if not args.quiet:
        print("stomp-probe " + summary)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
