package message

import (
	"testing"
	"time"
)

func TestBuildParseRoundTrip(t *testing.T) {
	s := NewSource()
	fixed := time.Unix(1796083200, 123456789)
	s.now = func() time.Time { return fixed }
	for _, size := range []int{HeaderLen, 100, 4096} {
		id := s.NextID()
		b := s.Build(id, size)
		if len(b) != size {
			t.Fatalf("size %d: got %d bytes", size, len(b))
		}
		gotID, sent, err := Parse(b)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if gotID != FormatID(id) {
			t.Errorf("size %d: id %q, want %q", size, gotID, FormatID(id))
		}
		if !sent.Equal(fixed) {
			t.Errorf("size %d: sent %v, want %v", size, sent, fixed)
		}
		pad := HeaderLen
		if size >= RunHeaderLen {
			pad = RunHeaderLen
			if run, ok := ParseRun(b); !ok || run != s.Run() {
				t.Errorf("size %d: ParseRun = %x, %v, want %x", size, run, ok, s.Run())
			}
		}
		for i := pad; i < size; i++ {
			if b[i] != padByte {
				t.Fatalf("size %d: byte %d is %q, want padding", size, i, b[i])
			}
		}
	}
}

func TestShortPayloadIsTruncatedHeader(t *testing.T) {
	s := NewSource()
	id := s.NextID()
	b := s.Build(id, 5)
	if string(b) != FormatID(id)[:5] {
		t.Fatalf("got %q, want the first 5 bytes of the id", b)
	}
	if _, _, err := Parse(b); err != ErrShort {
		t.Fatalf("Parse: err %v, want ErrShort", err)
	}
}

func TestIDsAreUnique(t *testing.T) {
	s := NewSource()
	seen := make(map[uint64]bool)
	for i := 0; i < 10000; i++ {
		id := s.NextID()
		if seen[id] {
			t.Fatalf("duplicate id %x after %d ids", id, i)
		}
		seen[id] = true
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	cases := map[string]string{
		"bad id":        "zzzzzzzzzzzzzzzz 1796083200000000000 xx",
		"bad timestamp": "00c0ffee00000001 17960832000000000z0 xx",
		"no separators": "00c0ffee00000001x1796083200000000000xxx",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Parse([]byte(in)); err == nil {
				t.Fatal("Parse accepted garbage")
			}
		})
	}
}

func TestAppendIDIsFormatID(t *testing.T) {
	for _, id := range []uint64{0, 1, 0xc0ffee, 1<<64 - 1} {
		if got := string(AppendID([]byte("x"), id)); got != "x"+FormatID(id) {
			t.Errorf("AppendID(%#x) = %q, want x%s", id, got, FormatID(id))
		}
	}
}

func TestRunAndSeq(t *testing.T) {
	a, b := NewSource(), NewSource()
	a.prefix, b.prefix = 0xabcdef<<seqBits, 0x000001<<seqBits // distinct runs, whatever the random draw
	for want := uint64(1); want <= 3; want++ {
		id := a.NextID()
		if Run(id) != 0xabcdef || Seq(id) != want {
			t.Fatalf("id %s: run %x seq %d, want run abcdef seq %d", FormatID(id), Run(id), Seq(id), want)
		}
	}
	if id := b.NextID(); Run(id) != 1 || Seq(id) != 1 {
		t.Fatalf("second source: id %s: run %x seq %d, want run 1 seq 1", FormatID(id), Run(id), Seq(id))
	}
}

func TestParseID(t *testing.T) {
	for _, id := range []uint64{0, 1, 0xc0ffee, 1<<64 - 1} {
		got, err := ParseID(FormatID(id))
		if err != nil || got != id {
			t.Errorf("ParseID(%s) = %#x, %v; want %#x", FormatID(id), got, err, id)
		}
	}
	for name, in := range map[string]string{
		"short":   "00c0ffee",
		"long":    "00c0ffee000000010",
		"not hex": "00c0ffee0000000g",
		"signed":  "+0c0ffee00000001",
		"empty":   "",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseID(in); err == nil {
				t.Fatalf("ParseID(%q) accepted it", in)
			}
		})
	}
}

// TestRunsTellSourcesApart: two Sources whose ids share the 24-bit prefix (11-17 of 20 000 processes
// did) still name different runs in their payloads.
func TestRunsTellSourcesApart(t *testing.T) {
	a, b := newSource(0x00c0ffee5eed0001), newSource(0x00c0ffee5eed0002)
	ia, ib := a.NextID(), b.NextID()
	if Run(ia) != Run(ib) || ia != ib {
		t.Fatalf("ids %x and %x: the test wants two Sources whose ids collide", ia, ib)
	}
	ra, oka := ParseRun(a.Build(ia, 100))
	rb, okb := ParseRun(b.Build(ib, 100))
	if !oka || !okb || ra == rb {
		t.Errorf("runs %x (%v) and %x (%v), want two different runs", ra, oka, rb, okb)
	}
}

// TestRunsAreWide: 10 000 Sources, as many sidecars writing one topic, get 10 000 runs (a collision is
// a chance of about 3·10⁻¹²; with 24 bits it is expected about three times).
func TestRunsAreWide(t *testing.T) {
	seen := map[uint64]bool{}
	for range 10000 {
		r := NewSource().Run()
		if seen[r] {
			t.Fatalf("run %x twice in 10 000 Sources", r)
		}
		seen[r] = true
	}
}

// TestParseRun: payloads of today's and of the former format (no run) both parse; only those with a
// well-formed run that matches their id give one.
func TestParseRun(t *testing.T) {
	const old = "00c0ffee00000001 1796083200000000000 " // the header before the run field
	for _, tc := range []struct {
		name    string
		payload string
		run     uint64
		ok      bool
	}{
		{"with its run", old + "00c0ffee5eed1234 xxxxxxxx", 0x00c0ffee5eed1234, true},
		{"former format, padded", old + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 0, false},
		{"former format, header only", old, 0, false},
		{"too short for a run", old + "00c0ffee5eed", 0, false},
		{"run not hex", old + "00c0ffee5eedxxxx xxxx", 0, false},
		{"run without its space", old + "00c0ffee5eed1234xxxxx", 0, false},
		{"run not the id's", old + "0000000000001234 xxxx", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, sent, err := Parse([]byte(tc.payload))
			if err != nil || id != "00c0ffee00000001" || sent.UnixNano() != 1796083200000000000 {
				t.Errorf("Parse = %q, %v, %v; want the id and time of either format", id, sent, err)
			}
			run, ok := ParseRun([]byte(tc.payload))
			if run != tc.run || ok != tc.ok {
				t.Errorf("ParseRun = %x, %v, want %x, %v", run, ok, tc.run, tc.ok)
			}
		})
	}
}
