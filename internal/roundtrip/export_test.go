package roundtrip

// SetCopies gives the echo of o a test hook: how many times to publish id's ack (0 drops it, 2
// duplicates it).
func SetCopies(o *EchoOptions, copies func(id string, size int) int) { o.copies = copies }

// ProbeBudget is how many probes Probe publishes per host at most.
const ProbeBudget = probeBudget
