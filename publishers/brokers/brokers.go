// Package brokers is the broker list: the one place that names the brokers. It lives apart from
// package publishers because every broker package imports publishers (the contract, error kinds,
// pool), so publishers cannot import them back.
//
// Adding a broker is one line in Sections: a field of the broker package's section type, under the
// broker's name. Config, start-up, GET /, flags, env names, help texts and the tests loop over List.
package brokers

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/amqp"
	"github.com/mqtarget/mqtarget/publishers/kafka"
	"github.com/mqtarget/mqtarget/publishers/mqtt"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// Sections are the brokers' sections of the configuration, one field per broker, in start order (the
// first is the default of the broker setting). The yaml key is the broker's name; each section type
// has its Broker entry (publishers.Hooks.Default gives its defaults). config.Config inlines it.
type Sections struct {
	NSQ      nsq.Config      `yaml:"nsq"`
	STOMP    stomp.Config    `yaml:"stomp"`
	RocketMQ rocketmq.Config `yaml:"rocketmq"`
	Kafka    kafka.Config    `yaml:"kafka"`
	AMQP     amqp.Config     `yaml:"amqp"`
	NATS     nats.Config     `yaml:"nats"`
	MQTT     mqtt.Config     `yaml:"mqtt"`
}

// entry is implemented by every section type: its broker's registry entry.
type entry interface{ Broker() *publishers.Broker }

// List is the registry, in Sections' order.
var List = list()

func list() []*publishers.Broker {
	t := reflect.TypeFor[Sections]()
	out := make([]*publishers.Broker, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		e, ok := reflect.Zero(f.Type).Interface().(entry)
		if !ok || f.Tag.Get("yaml") != e.Broker().Name {
			panic(fmt.Sprintf("brokers: Sections.%s is not a broker section under its broker's name", f.Name))
		}
		out[i] = e.Broker()
	}
	return out
}

// Default returns every broker's section defaults.
func Default() Sections {
	var s Sections
	v := reflect.ValueOf(&s).Elem()
	for i, b := range List {
		v.Field(i).Set(reflect.ValueOf(b.Hooks.Default()))
	}
	return s
}

// Section implements publishers.SectionSet: a pointer to the named broker's section, nil if none.
func (s *Sections) Section(name string) any {
	for i, b := range List {
		if b.Name == name {
			return reflect.ValueOf(s).Elem().Field(i).Addr().Interface()
		}
	}
	return nil
}

// Lookup returns the registry entry named name, or nil.
func Lookup(name string) *publishers.Broker {
	for _, b := range List {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// Names lists the registry's names, in order.
func Names() []string {
	names := make([]string, len(List))
	for i, b := range List {
		names[i] = b.Name
	}
	return names
}

// Env are the MQTARGET_* names (without the prefix) the brokers' scripts and tests read.
func Env() []string {
	var out []string
	for _, b := range List {
		out = append(out, b.Env...)
	}
	return out
}

// Batches says, for each broker, how /send2 sends its two messages as one unit: "NSQ MPUB, …".
func Batches() string {
	var parts []string
	for _, b := range List {
		if b.Batch != "" {
			parts = append(parts, b.Batch)
		}
	}
	return strings.Join(parts, ", ")
}

// Groups says what a consumer group names on each broker: "NSQ channel or … (unused on: b)".
func Groups() string {
	var parts, unused []string
	for _, b := range List {
		if b.Group != "" {
			parts = append(parts, b.Group)
		} else {
			unused = append(unused, b.Name)
		}
	}
	s := strings.Join(parts, " or ")
	if len(unused) > 0 {
		s += " (unused on: " + strings.Join(unused, ", ") + ")"
	}
	return s
}
