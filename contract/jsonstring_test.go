package contract

import (
	"bytes"
	"testing"
)

// FuzzAppendString: AppendString writes every string exactly as Marshal does (encoding/json
// without HTML escaping), invalid UTF-8 included.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x1f\n\t\r\b\f\x7f", "<&>", "\u2028\u2029", "\xff\xfe", "é✓", "a\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want = bytes.TrimSuffix(want, []byte("\n"))
		if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("AppendString(%q) = %s, want x%s", s, got, want)
		}
	})
}
