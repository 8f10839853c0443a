package message

import (
	"strconv"
	"testing"
	"time"
)

// FuzzParse: consumers parse whatever a broker hands them; Parse must not panic, and what it accepts
// has the documented header: a 16-digit hex id and a decimal timestamp between two spaces.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "short", "00c0ffee00000001 1796083200000000000 xxxx", "00c0ffee00000001 1796083200000000000 ",
		"00c0ffee0000000g 1796083200000000000 x", "00c0ffee00000001-1796083200000000000 x",
		"00c0ffee00000001 179608320000000000x x", "00c0ffee00000001 -796083200000000000 x",
		"ffffffffffffffff 9999999999999999999 x", "00c0ffee00000001 1796083200000000000",
		"00c0ffee00000001 1796083200000000000 00c0ffee5eed1234 xx", "00c0ffee00000001 1796083200000000000 0000000000001234 x",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, sent, err := Parse(b)
		if run, ok := ParseRun(b); ok && (err != nil || len(b) < RunHeaderLen || Run(mustParseID(t, id)) != uint32(run>>seqBits)) {
			t.Fatalf("ParseRun(%q) = %x for a payload without a run matching its id", b, run)
		}
		if err != nil {
			if id != "" || !sent.IsZero() {
				t.Fatalf("Parse(%q) = %q, %v with error %v", b, id, sent, err)
			}
			return
		}
		if len(b) < HeaderLen || b[16] != ' ' || b[36] != ' ' {
			t.Fatalf("Parse(%q) accepted a payload without the header's shape", b)
		}
		if id != string(b[:16]) {
			t.Fatalf("Parse(%q) id %q, want the first 16 bytes", b, id)
		}
		if _, err := strconv.ParseUint(id, 16, 64); err != nil {
			t.Fatalf("Parse(%q) id %q is not hex: %v", b, id, err)
		}
		if ns, err := strconv.ParseInt(string(b[17:36]), 10, 64); err != nil || sent.UnixNano() != ns {
			t.Fatalf("Parse(%q) time %v, want the header's %q", b, sent, b[17:36])
		}
	})
}

// FuzzBuildParse: every payload Build makes, of any size that holds the header, parses back to its id
// and send time; shorter ones are refused with ErrShort.
func FuzzBuildParse(f *testing.F) {
	f.Add(uint64(0), 37, int64(0))
	f.Add(uint64(1)<<63|1, 100, int64(1796083200000000000))
	f.Add(^uint64(0), 36, int64(1))
	f.Add(uint64(42), 1, int64(9999999999999999))
	f.Fuzz(func(t *testing.T, id uint64, size int, ns int64) {
		if size < 0 || size > 1<<16 || ns < 0 {
			return // Build's callers never pass these: size is validated, the clock is past 1970
		}
		s := newSource(id)
		s.now = func() time.Time { return time.Unix(0, ns) }
		b := s.Build(id, size)
		if len(b) != size {
			t.Fatalf("Build(%d) is %d bytes", size, len(b))
		}
		gotID, sent, err := Parse(b)
		if size < HeaderLen {
			if err != ErrShort {
				t.Fatalf("Parse of a %d-byte payload: %v, want ErrShort", size, err)
			}
			return
		}
		if err != nil || gotID != FormatID(id) || sent.UnixNano() != ns {
			t.Fatalf("Parse(Build(%x, %d)) at %d = %q, %d, %v", id, size, ns, gotID, sent.UnixNano(), err)
		}
		if run, ok := ParseRun(b); ok != (size >= RunHeaderLen) || (ok && run != s.Run()) {
			t.Fatalf("ParseRun(Build(%x, %d)) = %x, %v, want %x from %d bytes on", id, size, run, ok, s.Run(), RunHeaderLen)
		}
	})
}

func mustParseID(t *testing.T, id string) uint64 {
	t.Helper()
	n, err := ParseID(id)
	if err != nil {
		t.Fatalf("ParseID(%q): %v", id, err)
	}
	return n
}
