package mqtt

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	p311 "github.com/eclipse/paho.mqtt.golang/packets"
	mochi "github.com/mochi-mqtt/server/v2"

	"github.com/mqtarget/mqtarget/publishers"
)

// config311 is the test configuration at MQTT 3.1.1 for servers.
func config311(servers ...string) Config {
	c := DefaultConfig()
	c.Servers = servers
	c.Version = version311
	return c
}

// TestConnect311: the CONNECT at 3.1.1 is protocol level 4 with a clean session, the keep alive in
// seconds, the client_id prefix, mqtt.user and the password file's first line; SUBSCRIBE and PUBLISH
// follow on it.
func TestConnect311(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	connects := make(chan *p311.ConnectPacket, 1)
	served := make(chan struct{})
	go func() { // owned: ends when the publisher closes the connection; waited for below
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		cp, err := p311.ReadPacket(c)
		if err != nil {
			return
		}
		connects <- cp.(*p311.ConnectPacket)
		codec := codec311{}
		_ = codec.connack(c, false)
		for {
			p, err := codec.read(c)
			if err != nil {
				return
			}
			switch p.typ {
			case typeSubscribe:
				_ = codec.write(c, typeSuback, p.id, 0x80)
			case typePublish:
				_ = codec.write(c, typePuback, p.id, 0)
			}
		}
	}()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\nnot this\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config311(ln.Addr().String())
	c.ClientID, c.User, c.PasswordFile, c.KeepAlive = "loadtest", "alice", pw, 7*time.Second
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Publish(ctx, 0, "t", []byte("m")); err != nil {
		t.Errorf("Publish: %v", err)
	}
	cp := <-connects
	if cp.ProtocolName != "MQTT" || cp.ProtocolVersion != 4 || !cp.CleanSession {
		t.Errorf("CONNECT %q level %d clean session %v, want MQTT level 4 (3.1.1), clean", cp.ProtocolName, cp.ProtocolVersion, cp.CleanSession)
	}
	if !strings.HasPrefix(cp.ClientIdentifier, "loadtest-pub-") {
		t.Errorf("client id %q, want the prefix loadtest-pub-", cp.ClientIdentifier)
	}
	if cp.Username != "alice" || string(cp.Password) != "s3cret" || !cp.UsernameFlag || !cp.PasswordFlag {
		t.Errorf("CONNECT user %q password %q (flags %v %v), want alice and the file's first line", cp.Username, cp.Password, cp.UsernameFlag, cp.PasswordFlag)
	}
	if cp.Keepalive != 7 {
		t.Errorf("keep alive %d, want 7", cp.Keepalive)
	}
	_ = p.Close()
	<-served
}

// TestRefused311: an MQTT 3.1.1 acknowledgement carries no reason code, so a broker refusing a
// publish either closes the connection (mochi-mqtt: 503, then the host redials and the next publish
// goes through) or acknowledges it and drops it (mosquitto with an ACL: docs/mqtt.md). The host's
// connection must be found lost at once: paho.mqtt.golang's Subscribe of $SYS/broker/version, made as
// the connection was closed, waited writeTimeout (5 s) for its packet to be taken, and the publisher's
// watch of the connection with it (2 runs in 200 failed so before link311.call).
func TestRefused311(t *testing.T) {
	e := embeddedFor(t, 1)
	p, err := New(config311(e.Addrs()[0]), discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Publish(ctx, 0, deniedPrefix+"_topic", []byte("x")); !errors.Is(err, publishers.ErrUnavailable) {
		t.Errorf("publish the broker refuses: %v, want ErrUnavailable (the connection closed)", err)
	}
	for {
		err := p.Publish(ctx, 0, "allowed", []byte("y"))
		if err == nil {
			break
		}
		if !errors.Is(err, publishers.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("publish after the refusal: %v, want success once the host redialled", err)
		}
		<-time.After(20 * time.Millisecond) // the host is in its redial backoff
	}
	if c := p.ConnCounts(0); c.Reopened != 1 {
		t.Errorf("ConnCounts %+v, want one connection remade", c)
	}
}

// TestVersion311: at 3.1.1 GET /'s broker version is the same $SYS/broker/version as at 5 (mochi-mqtt:
// its number), learned by the first Ping; Ping against a broker refusing the CONNECT is unavailable.
func TestVersion311(t *testing.T) {
	e := embeddedFor(t, 1)
	f := newFakeV(t, refuseConnect, version311)
	p, err := New(config311(e.Addrs()[0], f.addr()), discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Ping(ctx, 0); err != nil {
		t.Errorf("Ping(0): %v", err)
	}
	if err := p.Ping(ctx, 1); !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "return code 5") {
		t.Errorf("Ping(1): %v, want ErrUnavailable naming CONNACK's return code 5", err)
	}
	for p.BrokerVersion(0) == "" && ctx.Err() == nil {
		<-time.After(10 * time.Millisecond)
	}
	if v := p.BrokerVersion(0); v != mochi.Version {
		t.Errorf("BrokerVersion(0) = %q, want mochi-mqtt's %q", v, mochi.Version)
	}
}

// TestQoS0At311: at qos 0 a 3.1.1 publish is answered once the PUBLISH is written (no
// acknowledgement exists): each one reaches the broker as a QoS 0 PUBLISH, none is waited for.
func TestQoS0At311(t *testing.T) {
	f := newFakeV(t, frozen, version311) // answers nothing: only the write can be waited for
	c := config311(f.addr())
	c.QoS = 0
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for i := range 5 {
		if err := p.Publish(ctx, 0, "t", []byte{byte('a' + i)}); err != nil {
			t.Fatalf("publish %d at qos 0: %v", i, err)
		}
	}
	for f.received.Load() < 5 && ctx.Err() == nil {
		<-time.After(5 * time.Millisecond)
	}
	if n := f.received.Load(); n != 5 {
		t.Errorf("the broker read %d PUBLISHes, want 5", n)
	}
}
