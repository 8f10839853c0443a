package mqtt

import (
	"fmt"
	"io"

	p311 "github.com/eclipse/paho.mqtt.golang/packets"
)

// Packet types the fakes answer beyond proto.go's.
const (
	typePingreq  = 12
	typePingresp = 13
)

// codec311 is MQTT 3.1.1, over paho.mqtt.golang's packets: no reason codes on acknowledgements, a
// CONNACK return code instead.
type codec311 struct{}

func (codec311) readConnect(r io.Reader) error {
	cp, err := p311.ReadPacket(r)
	if err != nil {
		return err
	}
	c, ok := cp.(*p311.ConnectPacket)
	if !ok {
		return fmt.Errorf("first packet %T, want CONNECT", cp)
	}
	if c.ProtocolName != "MQTT" || c.ProtocolVersion != 4 || !c.CleanSession {
		return fmt.Errorf("CONNECT %q version %d clean %v, want MQTT 4 (3.1.1) with a clean session", c.ProtocolName, c.ProtocolVersion, c.CleanSession)
	}
	return nil
}

func (codec311) connack(w io.Writer, refuse bool) error {
	ca := p311.NewControlPacket(p311.Connack).(*p311.ConnackPacket)
	if refuse {
		ca.ReturnCode = p311.ErrRefusedNotAuthorised
	}
	return ca.Write(w)
}

func (codec311) read(r io.Reader) (fakePacket, error) {
	cp, err := p311.ReadPacket(r)
	if err != nil {
		return fakePacket{}, err
	}
	switch p := cp.(type) {
	case *p311.PublishPacket:
		return fakePacket{typ: typePublish, id: p.MessageID, qos: p.Qos, dup: p.Dup, payload: p.Payload}, nil
	case *p311.SubscribePacket:
		return fakePacket{typ: typeSubscribe, id: p.MessageID}, nil
	case *p311.PubrelPacket:
		return fakePacket{typ: typePubrel, id: p.MessageID}, nil
	case *p311.PingreqPacket:
		return fakePacket{typ: typePingreq}, nil
	}
	return fakePacket{}, nil
}

func (codec311) write(w io.Writer, typ byte, id uint16, reason byte) error {
	cp := p311.NewControlPacket(typ) // MQTT's type numbers: proto.go's are the packets' own
	switch a := cp.(type) {
	case *p311.PubackPacket:
		a.MessageID = id
	case *p311.PubrecPacket:
		a.MessageID = id
	case *p311.PubcompPacket:
		a.MessageID = id
	case *p311.SubackPacket:
		a.MessageID, a.ReturnCodes = id, []byte{reason}
	case *p311.PingrespPacket:
	default:
		return fmt.Errorf("codec311 writes no packet of type %d", typ)
	}
	return cp.Write(w)
}
