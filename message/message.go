// Package message builds and parses the payloads mqtarget publishes.
//
// A payload starts with a 37-byte ASCII header and is padded to the requested size:
//
//	<id: 16 lowercase hex digits> ' ' <send time: 19 decimal digits, Unix nanoseconds> ' ' <padding 'x'...>
//
// for example "00c0ffee00000001 1796083200000000000 xxxx…". The id is unique per process run (a random
// 24-bit run prefix and a 40-bit counter), so a consumer can detect loss and duplicates and measure
// end-to-end latency from the timestamp. A payload shorter than the header carries a truncated header.
//
// Ids of one Source are consecutive: Run(id) names the producer run (one Source, i.e. one mqtarget
// process) and Seq(id) counts 1, 2, 3, … in the order ids were handed out, so a gap in the sequence numbers
// of one run is a message that was never delivered (or never acknowledged: an id is taken before the
// publish, whatever its outcome).
//
// The package imports nothing of mqtarget's, so other programs can import it to read what mqtarget sent.
package message

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"strconv"
	"sync/atomic"
	"time"
)

// HeaderLen is the length of the id and timestamp header; payloads of at least this size can be parsed.
const HeaderLen = 16 + 1 + 19 + 1

const padByte = 'x'

// Source hands out unique ids and builds payloads. It is safe for concurrent use.
type Source struct {
	prefix  uint64 // random 24 bits, shifted into the top of the id
	counter atomic.Uint64
	now     func() time.Time
}

// NewSource returns a Source with a random instance prefix.
func NewSource() *Source {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return &Source{prefix: (binary.LittleEndian.Uint64(b[:]) & 0xffffff) << seqBits, now: time.Now}
}

// NextID returns a new unique id.
func (s *Source) NextID() uint64 {
	return s.prefix | (s.counter.Add(1) & (1<<seqBits - 1))
}

// Build returns a new payload of size bytes carrying id and the current time.
func (s *Source) Build(id uint64, size int) []byte {
	b := make([]byte, size)
	var hdr [HeaderLen]byte
	writeHex(hdr[:16], id)
	hdr[16] = ' '
	writeDec(hdr[17:36], uint64(s.now().UnixNano()))
	hdr[36] = ' '
	n := copy(b, hdr[:])
	for i := n; i < size; i++ {
		b[i] = padByte
	}
	return b
}

// FormatID renders an id the way it appears in payloads and replies.
func FormatID(id uint64) string {
	var b [16]byte
	writeHex(b[:], id)
	return string(b[:])
}

// AppendID appends the id as FormatID renders it, without allocating a string.
func AppendID(dst []byte, id uint64) []byte {
	var b [16]byte
	writeHex(b[:], id)
	return append(dst, b[:]...)
}

// writeDec writes v as zero-padded decimal digits filling dst.
func writeDec(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

func writeHex(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
}

// seqBits is the width of the counter part of an id; the run prefix takes the 24 bits above it.
const seqBits = 40

// Run returns the producer run of id: the random prefix shared by every id of one Source.
func Run(id uint64) uint32 { return uint32(id >> seqBits) }

// Seq returns the sequence number of id within its run: 1 for a Source's first id, then 2, 3, ….
func Seq(id uint64) uint64 { return id & (1<<seqBits - 1) }

// ParseID parses an id rendered by FormatID (16 lowercase hex digits).
func ParseID(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, errors.New("message: malformed id")
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, errors.New("message: malformed id")
	}
	return v, nil
}

// ErrShort is returned by Parse for payloads shorter than HeaderLen.
var ErrShort = errors.New("message: payload shorter than header")

// Parse extracts the id and send time from a payload built by Source.Build.
func Parse(b []byte) (id string, sent time.Time, err error) {
	if len(b) < HeaderLen {
		return "", time.Time{}, ErrShort
	}
	if b[16] != ' ' || b[36] != ' ' {
		return "", time.Time{}, errors.New("message: malformed header")
	}
	if _, err := strconv.ParseUint(string(b[:16]), 16, 64); err != nil {
		return "", time.Time{}, errors.New("message: malformed id")
	}
	ns, err := strconv.ParseInt(string(b[17:36]), 10, 64)
	if err != nil {
		return "", time.Time{}, errors.New("message: malformed timestamp")
	}
	return string(b[:16]), time.Unix(0, ns), nil
}
