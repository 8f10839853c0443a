package stomp_test

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// startFake starts a STOMP 1.2 broker that misbehaves as m: CONNECT, SEND (with or without a
// transaction), BEGIN, COMMIT, ABORT, DISCONNECT. Its guessed receipt ids take the receipt id it got and
// add 1, 2, 3 to its first number ("41" → "42", "41-x" → "42-x"); with none seen yet, 1, 2, 3. The
// flood names, in turn, the three receipts after the last one it got.
// Stored are the messages of every SEND outside a transaction and of every committed transaction it
// acknowledges or would (Garbage and Flood store none; StrayThenDrop stores nothing of what it drops).
func startFake(t testing.TB, m publishertest.Misbehaviour) publishertest.Fake {
	f := &fakeSTOMP{publishertest.FakeOne{M: m}}
	f.S = publishertest.StartFakeServer(t, f.serve)
	return f
}

type fakeSTOMP struct{ publishertest.FakeOne }

// guessReceipt is what a broker would expect the receipt id k after id to be.
func guessReceipt(id string, k int) string {
	i := 0
	for i < len(id) && id[i] >= '0' && id[i] <= '9' {
		i++
	}
	n, err := strconv.Atoi(id[:i])
	if err != nil {
		return strconv.Itoa(k)
	}
	return strconv.Itoa(n+k) + id[i:]
}

func stompReceipt(id string) []byte {
	return []byte("RECEIPT\nreceipt-id:" + id + "\n\n\x00")
}

func (f *fakeSTOMP) serve(c *publishertest.FakeConn) {
	r := frame.NewReader(c)
	var (
		last atomic.Value // string: the last receipt id received, for the flood's guesses
		txs  = map[string][][]byte{}
		a    = publishertest.Answerer{M: f.M}
	)
	last.Store("")
	for {
		fr, err := r.Read()
		if err != nil {
			return
		}
		if fr == nil { // heart-beat
			continue
		}
		var bodies [][]byte
		switch fr.Command {
		case frame.CONNECT, frame.STOMP:
			if c.Send([]byte("CONNECTED\nversion:1.2\nheart-beat:0,0\nserver:fake/1.0\n\n\x00")) != nil {
				return
			}
			switch f.M {
			case publishertest.CloseAfterHandshake:
				return
			case publishertest.AheadOfHandshake:
				if c.Send(append(stompReceipt("1"), stompReceipt("2")...)) != nil {
					return
				}
			case publishertest.Flood:
				c.Flood(func(i int) []byte { return stompReceipt(guessReceipt(last.Load().(string), i%3+1)) })
			}
			continue
		case frame.DISCONNECT:
			return
		case frame.BEGIN:
			txs[fr.Header.Get(frame.Transaction)] = [][]byte{}
		case frame.ABORT:
			delete(txs, fr.Header.Get(frame.Transaction))
		case frame.SEND:
			body := bytes.Clone(fr.Body)
			if tx, ok := fr.Header.Contains(frame.Transaction); ok {
				if _, open := txs[tx]; !open {
					_ = c.Send([]byte("ERROR\nmessage:no such transaction\n\n\x00"))
					return
				}
				txs[tx] = append(txs[tx], body)
			} else {
				bodies = [][]byte{body}
			}
		case frame.COMMIT:
			tx := fr.Header.Get(frame.Transaction)
			bodies = txs[tx]
			delete(txs, tx)
		default:
			_ = c.Send([]byte("ERROR\nmessage:fake broker: unexpected " + fr.Command + "\n\n\x00"))
			return
		}
		id, want := fr.Header.Contains(frame.Receipt)
		if !want {
			continue
		}
		last.Store(id)
		answer := a.Answer(func() { f.S.Store(bodies...) }, stompReceipt(id),
			func(k int) []byte { return stompReceipt(guessReceipt(id, k)) }, stompReceipt("GARBAGE-NOT-OK"))
		if answer != nil && c.Send(answer) != nil {
			return
		}
	}
}
