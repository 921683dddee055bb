package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// addEventSeeds seeds a fuzz target with the shared sample's events and a slice of the
// generated corpus (every base, and a spread of mutations).
func addEventSeeds(f *testing.F) {
	for _, s := range loadSample(f) {
		f.Add([]byte(s.Event))
	}
	for i, c := range generateEvents(f, 7, 200) {
		if strings.HasSuffix(c.name, "/base") || i%97 == 0 {
			f.Add(c.data)
		}
	}
}

// hugeExponent reports a number with an exponent of more than three digits anywhere in v. The
// oracle computes such numbers exactly with math/big (1e-99999999 takes a very long time);
// with at most three digits both sides are still exercised on underflow and overflow.
func hugeExponent(v *Value) bool {
	switch v.Kind {
	case KindNumber:
		if i := bytes.IndexAny(v.Raw, "eE"); i >= 0 {
			e := bytes.TrimLeft(v.Raw[i+1:], "+-0")
			return len(e) > 3
		}
	case KindArray:
		for i := range v.Elems {
			if hugeExponent(&v.Elems[i]) {
				return true
			}
		}
	case KindObject:
		for i := range v.Members {
			if hugeExponent(&v.Members[i].Value) {
				return true
			}
		}
	}
	return false
}

// FuzzEventAgainstOracle mutates valid events and asserts that our schema-layer verdict agrees
// with the oracle's, except on the documented divergences (see knownDivergence).
func FuzzEventAgainstOracle(f *testing.F) {
	addEventSeeds(f)
	ev, _ := oracles(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if knownDivergence(KindEvent, data) != "" {
			t.Skip("documented divergence")
		}
		if v, err := Parse(data, Limits{}); err == nil && hugeExponent(&v) {
			t.Skip("exponent too large for the oracle's big.Rat")
		}
		want, oerr := oracleValid(ev, data)
		got, err := schemaValid(KindEvent, data)
		if got != want {
			t.Fatalf("ours valid=%v, oracle valid=%v\n doc: %q\n ours: %v\n oracle: %v", got, want, data, err, oerr)
		}
	})
}

// reference is what an independent reading of data with encoding/json says about it.
type reference struct {
	ok        bool // encoding/json accepts it and none of our extra rules applies
	ambiguous bool // a string holds U+FFFD that may come from a lone surrogate escape
	why       string
}

// referenceParse reads data with encoding/json's tokenizer and applies our extra rules on top:
// valid UTF-8, no duplicate keys, depth at most DefaultMaxDepth, finite numbers.
func referenceParse(data []byte) reference {
	if !utf8.Valid(data) {
		return reference{why: "invalid UTF-8"}
	}
	if !json.Valid(data) {
		return reference{why: "encoding/json rejects it"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		obj     bool
		keys    map[string]bool
		wantKey bool // in an object: the next token is a key or '}'
	}
	var stack []*frame
	r := reference{ok: true}
	hasEscape := bytes.Contains(data, []byte(`\u`))
	fail := func(why string) {
		if r.ok {
			r.ok, r.why = false, why
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return reference{why: "token: " + err.Error()}
		}
		if s, ok := tok.(string); ok && hasEscape && strings.ContainsRune(s, utf8.RuneError) {
			r.ambiguous = true
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			key := tok.(string)
			if top.keys[key] {
				fail("duplicate key " + strconv.Quote(key))
			}
			top.keys[key] = true
			top.wantKey = false
			continue
		}
		if top != nil && top.obj {
			top.wantKey = true // after this value comes a key or '}'
		}
		switch x := tok.(type) {
		case json.Delim:
			switch x {
			case '{', '[':
				stack = append(stack, &frame{obj: x == '{', keys: map[string]bool{}, wantKey: x == '{'})
				if len(stack) > DefaultMaxDepth {
					fail("too deep")
				}
			case ']':
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			if f, err := strconv.ParseFloat(string(x), 64); err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
				fail("number out of range")
			}
		}
	}
	return r
}

// FuzzParse checks that Parse never panics and accepts exactly what encoding/json accepts,
// minus what our extra rules reject (invalid UTF-8, duplicate keys, lone surrogate escapes,
// nesting over the limit, numbers beyond float64). Lone surrogates cannot be told apart from a
// literal U+FFFD after encoding/json's decoding, so such inputs only require a "utf8" verdict.
// An accepted document must also read the same as encoding/json reads it.
func FuzzParse(f *testing.F) {
	addEventSeeds(f)
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `"\ud800"`, `"\ud800\udc00"`,
		`"\udc00"`, `1e400`, `-1e400`, `1e-400`, `[1,]`, `{"a":1}x`, "\xff", `"\u0000"`,
		strings.Repeat("[", 128) + strings.Repeat("]", 128), strings.Repeat("[", 129) + strings.Repeat("]", 129),
		`{"a\u0000b":1,"a\u0000c":2}`, `{"\u0061":1,"a":2}`, `0.1E+2`, `-0`, `01`, `"\/"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, Limits{})
		ref := referenceParse(data)
		if err == nil {
			if !ref.ok && !ref.ambiguous {
				t.Fatalf("Parse accepted %q; reference rejects it: %s", data, ref.why)
			}
			var want any
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			if err := dec.Decode(&want); err != nil {
				t.Fatalf("Parse accepted %q; encoding/json: %v", data, err)
			}
			if got := toAny(&v); !sameAny(got, want) {
				t.Fatalf("Parse(%q) reads %#v; encoding/json reads %#v", data, got, want)
			}
			if !bytes.Equal(v.Raw, bytes.TrimSpace(data)) && !bytes.Equal(v.Raw, bytes.Trim(data, " \t\r\n")) {
				t.Fatalf("Raw %q is not the document %q", v.Raw, data)
			}
			return
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("Parse(%q) returned %T, want *SyntaxError", data, err)
		}
		if ref.ok && !(ref.ambiguous && se.Rule == "utf8") {
			t.Fatalf("Parse rejected %q (%v); reference accepts it", data, err)
		}
	})
}

// toAny converts a parsed value to what encoding/json with UseNumber produces.
func toAny(v *Value) any {
	switch v.Kind {
	case KindNull:
		return nil
	case KindBool:
		return v.Bool
	case KindNumber:
		return json.Number(v.Raw)
	case KindString:
		return v.Str
	case KindArray:
		out := make([]any, len(v.Elems))
		for i := range v.Elems {
			out[i] = toAny(&v.Elems[i])
		}
		return out
	}
	out := make(map[string]any, len(v.Members))
	for i := range v.Members {
		out[v.Members[i].Key] = toAny(&v.Members[i].Value)
	}
	return out
}

func sameAny(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
