package publishertest

import "strings"

// TopicSeeds are the topic fuzzers' seeds: names at and past the brokers' limits, reserved ones,
// bytes that break frames.
var TopicSeeds = []string{
	"", "mqtarget", "a", "load-7#ephemeral", "#ephemeral", "a#ephemeral#ephemeral", "a b", "a:b", "a\\b",
	"a\nb", "/queue/x", " x", "x ", "%RETRY%g", "%DLQ%g", "rmq_sys_x", "TBW102", "a|b%c", "ä", "\xff",
	strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("b", 127), strings.Repeat("b", 128),
	strings.Repeat("c", 255), strings.Repeat("c", 256), "x\x7f", "x\x00",
}
