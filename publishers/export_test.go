package publishers

import "time"

// SetFailureLogInterval lets tests move the failure log's rate limit instead of waiting for it.
func (m *Metrics) SetFailureLogInterval(d time.Duration) { m.logEvery = d }
