package load

import "time"

// Recorder is the latency histogram of load's runs for programs that time requests of their own (the
// anchor benchmarks' direct clients, cmd/internal/closedloop), so their percentiles are computed the
// same way as mqtarget load's: nearest rank, exact to the microsecond below 2 ms, within 0.05 % above,
// in bounded memory however many requests a run sends. Not safe for concurrent use: give each sender
// its own and Merge them.
type Recorder struct{ h histogram }

// Add records one latency.
func (r *Recorder) Add(d time.Duration) { r.h.add(d) }

// Merge adds o's latencies to r.
func (r *Recorder) Merge(o *Recorder) {
	if o.h.n == 0 {
		return
	}
	// o's export is of this layout with counts that add up: merge cannot fail
	_ = r.h.merge(o.h.export())
}

// Count is how many latencies r holds.
func (r *Recorder) Count() int64 { return r.h.n }

// Latency is r's percentiles, max and mean in milliseconds (zero when r is empty).
func (r *Recorder) Latency() Latency { return r.h.latency() }
