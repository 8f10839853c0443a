package message_test

import (
	"fmt"

	"github.com/mqtarget/mqtarget/message"
)

// A consumer in another program reads the id and send time of every payload mqtarget published.
func ExampleParse() {
	body := []byte("c0ffee0000000002 1796083200000000000 xxxxxxxxxx") // as received from the broker
	id, sent, err := message.Parse(body)
	if err != nil {
		fmt.Println("not an mqtarget payload:", err)
		return
	}
	n, _ := message.ParseID(id)
	fmt.Printf("id %s run %06x seq %d sent %s\n", id, message.Run(n), message.Seq(n), sent.UTC().Format("2006-01-02T15:04:05Z"))
	// Output: id c0ffee0000000002 run c0ffee seq 2 sent 2026-12-01T00:00:00Z
}
