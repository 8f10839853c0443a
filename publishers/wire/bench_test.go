package wire

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// BenchmarkSendParallel: concurrent senders on one connection to a broker that answers every command;
// cmds/write says how well the writer gathers.
func BenchmarkSendParallel(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r, w := bufio.NewReader(c), bufio.NewWriter(c)
		for {
			if _, err := r.ReadSlice('\n'); err != nil {
				return
			}
			_, _ = w.WriteString("A 0 ok\n")
			if r.Buffered() == 0 { // answer per read, as a broker flushing per batch read would
				if w.Flush() != nil {
					return
				}
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig(Next)
	c := New(nc, cfg)
	defer c.Close()
	b.SetParallelism(25) // with GOMAXPROCS 2: 50 senders, as wrk -c50
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		res := make(chan error, 1)
		done := func(err error) { res <- err }
		for pb.Next() {
			if err := c.Send(time.Time{}, encLine, done); err != nil {
				b.Error(err)
				return
			}
			if err := <-res; err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	writes, commands := c.Stats()
	b.ReportMetric(float64(commands)/float64(max(writes, 1)), "cmds/write")
}
