package contract

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

// TestHostileParse checks that hostile documents get a clear error with the right rule, and
// that their harmless neighbours are accepted.
func TestHostileParse(t *testing.T) {
	cases := []struct {
		name string
		in   string
		lim  Limits
		rule string // "" = accepted
		path string
	}{
		{"empty", ``, Limits{}, "json", ""},
		{"only whitespace", " \n\t", Limits{}, "json", ""},
		{"invalid UTF-8 in string", "\"a\xffb\"", Limits{}, "utf8", ""},
		{"invalid UTF-8 in key", "{\"a\xc3\":1}", Limits{}, "utf8", ""},
		{"invalid UTF-8 nested", "{\"a\":[\"ok\",\"\xe2\x82\"]}", Limits{}, "utf8", "/a/1"},
		{"overlong encoding", "\"\xc0\xaf\"", Limits{}, "utf8", ""},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", Limits{}, "utf8", ""},
		{"invalid byte outside strings", "\xff", Limits{}, "json", ""},
		{"valid multi-byte", `"é中😀"`, Limits{}, "", ""},
		{"duplicate key", `{"a":1,"a":2}`, Limits{}, "duplicateKey", ""},
		{"duplicate key nested", `{"p":{"x":[{"k":1,"k":1}]}}`, Limits{}, "duplicateKey", "/p/x/0"},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`, Limits{}, "duplicateKey", ""},
		{"duplicate key in a large object", `{` + manyKeys(100) + `,"k7":0}`, Limits{}, "duplicateKey", ""},
		{"same key in sibling objects", `[{"a":1},{"a":1}]`, Limits{}, "", ""},
		{"keys differing by escape content", `{"a\u0000":1,"a":2}`, Limits{}, "", ""},
		{"depth 128 arrays", nested("[", "]", 128), Limits{}, "", ""},
		{"depth 129 arrays", nested("[", "]", 129), Limits{}, "maxDepth", strings.Repeat("/0", 128)},
		{"depth 128 objects", nested(`{"a":`, "}", 127) + "", Limits{}, "json", ""},
		{"depth 128 objects ok", nested(`{"a":`, "", 127) + "{}" + strings.Repeat("}", 127), Limits{}, "", ""},
		{"depth 129 objects", nested(`{"a":`, "", 128) + "{}" + strings.Repeat("}", 128), Limits{}, "maxDepth", strings.Repeat("/a", 128)},
		{"depth limit configurable", nested("[", "]", 4), Limits{MaxDepth: 3}, "maxDepth", "/0/0/0"},
		{"very deep", nested("[", "]", 100000), Limits{}, "maxDepth", ""},
		{"1e400", `1e400`, Limits{}, "numberRange", ""},
		{"-1e400", `[-1e400]`, Limits{}, "numberRange", "/0"},
		{"1e308 fits", `1e308`, Limits{}, "", ""},
		{"1e-400 underflows to zero, accepted", `1e-400`, Limits{}, "", ""},
		{"huge exponent", `1e99999999999999999999`, Limits{}, "numberRange", ""},
		{"leading zero", `01`, Limits{}, "json", ""},
		{"NaN", `NaN`, Limits{}, "json", ""},
		{"size at the limit", `"` + strings.Repeat("a", 98) + `"`, Limits{MaxBytes: 100}, "", ""},
		{"size over the limit", `"` + strings.Repeat("a", 99) + `"`, Limits{MaxBytes: 100}, "maxBytes", ""},
		{"default size limit", `"` + strings.Repeat("a", DefaultMaxBytes-1) + `"`, Limits{}, "maxBytes", ""},
		{"trailing garbage", `{} x`, Limits{}, "json", ""},
		{"two documents", `{}{}`, Limits{}, "json", ""},
		{"trailing bracket", `{}]`, Limits{}, "json", ""},
		{"trailing whitespace ok", "{} \r\n", Limits{}, "", ""},
		{"lone high surrogate", `"\ud800"`, Limits{}, "utf8", ""},
		{"lone low surrogate", `"\udc00"`, Limits{}, "utf8", ""},
		{"high surrogate then letter", `"\ud800\u0041"`, Limits{}, "utf8", ""},
		{"two high surrogates", `"\ud800\ud800"`, Limits{}, "utf8", ""},
		{"lone surrogate in key", `{"\udfff":1}`, Limits{}, "utf8", ""},
		{"surrogate pair ok", `"\ud83d\ude00"`, Limits{}, "", ""},
		{"control character", "\"a\x01\"", Limits{}, "json", ""},
		{"bad escape", `"\x"`, Limits{}, "json", ""},
		{"unterminated", `{"a":"b`, Limits{}, "json", "/a"},
		{"trailing comma", `[1,]`, Limits{}, "json", "/1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in), c.lim)
			if c.rule == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse = %v, want a *SyntaxError with rule %s", err, c.rule)
			}
			if se.Rule != c.rule || (c.path != "" && se.Path != c.path) {
				t.Errorf("rule %s at %q, want %s at %q (%v)", se.Rule, se.Path, c.rule, c.path, err)
			}
			if se.Msg == "" || !strings.Contains(err.Error(), se.Rule) {
				t.Errorf("unclear error: %q", err)
			}
			// Validate reports it as one problem of the json layer.
			verr := Validate(KindEvent, []byte(c.in), c.lim)
			var ve *ValidationError
			if !errors.As(verr, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Layer != LayerJSON || ve.Problems[0].Rule != c.rule {
				t.Errorf("Validate = %v, want one json-layer problem %s", verr, c.rule)
			}
		})
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	return b.String()
}

// TestHostileWorkIsBounded checks that the largest documents the default limit lets through
// are handled in bounded time: a 1 MiB object of unique keys (duplicate detection must not be
// quadratic), an event with tens of thousands of unknown fields, and a very deep document.
func TestHostileWorkIsBounded(t *testing.T) {
	var keys strings.Builder
	keys.WriteString(`{"contract":"AgentSessionEvent","eventId":"e","sessionId":"s","sequence":1,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00Z","eventType":"usage","payload":{`)
	for i := 0; keys.Len() < DefaultMaxBytes-64; i++ {
		if i > 0 {
			keys.WriteByte(',')
		}
		fmt.Fprintf(&keys, `"f%d":%d`, i, i)
	}
	keys.WriteString(`}}`)
	docs := map[string][]byte{
		"1 MiB of unknown payload fields": []byte(keys.String()),
		"1 MiB of nesting":                []byte(nested("[", "]", DefaultMaxBytes/2-1)),
		"1 MiB free object":               []byte(`{"contract":"AgentSessionEvent","eventId":"e","sessionId":"s","sequence":1,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00Z","eventType":"tool","payload":{"toolCallId":"t","toolName":"n","status":"running","input":{` + manyKeysUpTo(DefaultMaxBytes-300) + `}}}`),
	}
	for name, d := range docs {
		if len(d) > DefaultMaxBytes {
			t.Fatalf("%s: %d bytes, over the limit", name, len(d))
		}
		start := time.Now()
		err := Validate(KindEvent, d, Limits{})
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%s: took %v", name, el)
		}
		t.Logf("%s: %v", name, truncate(fmt.Sprint(err), 120))
	}
}

func manyKeysUpTo(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n-32; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"key-%d":[%d]`, i, i)
	}
	return b.String()
}

// TestNeverPanics feeds every prefix of valid documents and random corruptions of them to
// every entry point; none may panic, and every prefix short of the whole is rejected.
func TestNeverPanics(t *testing.T) {
	docs := benchEvents(t)
	docs = append(docs, []byte(evSteer), []byte(result), []byte(runDoc))
	r := rand.New(rand.NewPCG(3, 4))
	for _, d := range docs {
		for i := 0; i < len(d); i++ {
			if err := Validate(KindEvent, d[:i], Limits{}); err == nil && len(bytes.TrimSpace(d[i:])) > 0 {
				t.Errorf("prefix %q accepted", d[:i])
			}
		}
		for n := 0; n < 300; n++ {
			c := bytes.Clone(d)
			for k := 1 + r.IntN(4); k > 0; k-- {
				c[r.IntN(len(c))] = byte(r.IntN(256))
			}
			for _, kind := range DocumentKinds {
				Validate(kind, c, Limits{})
			}
			CheckEvent(c, Limits{})
			var e Event
			Decode(KindEvent, c, Limits{}, &e)
			DecodeCommand(c, Limits{})
		}
	}
	if err := Validate("nope", []byte(`{}`), Limits{}); err == nil {
		t.Error("unknown kind accepted")
	} else if _, ok := err.(*ValidationError); ok {
		t.Error("unknown kind should be a plain error, not a ValidationError")
	}
}

// TestMaxProblems checks that a document with more problems than MaxProblems lists the first
// MaxProblems and then one notice saying how many were left out.
func TestMaxProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"contract":"AgentSessionEvent","eventId":"e","sessionId":"s","sequence":1,"idempotencyKey":"k","occurredAt":"2026-03-01T12:00Z","eventType":"usage","payload":{`)
	const n = MaxProblems + 250
	b.WriteString(manyKeys(n))
	b.WriteString(`}}`)
	err := Validate(KindEvent, []byte(b.String()), Limits{})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v", err)
	}
	if len(ve.Problems) != MaxProblems+1 {
		t.Fatalf("%d problems, want %d", len(ve.Problems), MaxProblems+1)
	}
	last := ve.Problems[MaxProblems]
	if last.Rule != "maxProblems" || !strings.Contains(last.Message, "250 more") {
		t.Errorf("last problem %+v", last)
	}
	if p := ve.Problems[0]; p.Path != "/payload/k0" || p.Rule != "additionalProperties" {
		t.Errorf("first problem %+v", p)
	}
}
