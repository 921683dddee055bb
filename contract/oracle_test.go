package contract

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The oracle: github.com/santhosh-tekuri/jsonschema/v6 with the published schemas, used in
// tests only. The event schema is draft 2020-12, where "format" is an annotation; the session
// record schema is draft-07, where the library asserts "format" by default.

const (
	eventSchemaFile   = "testdata/agent-session-event.schema.json"
	sessionSchemaFile = "testdata/cortex-session.schema.json"
)

var (
	oracleOnce                 sync.Once
	oracleEvent, oracleSession *jsonschema.Schema
	oracleErr                  error
)

func compileOracle(file string) (*jsonschema.Schema, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(file, doc); err != nil {
		return nil, err
	}
	return c.Compile(file)
}

// oracles returns the compiled event and session record schemas.
func oracles(tb testing.TB) (event, session *jsonschema.Schema) {
	tb.Helper()
	oracleOnce.Do(func() {
		oracleEvent, oracleErr = compileOracle(eventSchemaFile)
		if oracleErr == nil {
			oracleSession, oracleErr = compileOracle(sessionSchemaFile)
		}
	})
	if oracleErr != nil {
		tb.Fatalf("compile oracle: %v", oracleErr)
	}
	return oracleEvent, oracleSession
}

// oracleValid reports whether the oracle accepts data: it decodes like the library does
// (encoding/json with UseNumber) and validates.
func oracleValid(sch *jsonschema.Schema, data []byte) (bool, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return false, nil
	}
	verr := sch.Validate(doc)
	return verr == nil, verr
}

// schemaValid reports whether our validator finds data valid at the schema layer: either no
// problem at all, or only problems of the rules layer (which the oracle cannot know about).
func schemaValid(kind string, data []byte) (bool, error) {
	err := Validate(kind, data, Limits{})
	if err == nil {
		return true, nil
	}
	ve, ok := err.(*ValidationError)
	if !ok {
		return false, err
	}
	for _, p := range ve.Problems {
		if p.Layer != LayerRule {
			return false, err
		}
	}
	return true, err
}

// knownDivergence returns why data is a documented, intended divergence from the oracle for
// the given kind ("" when none). Such inputs are left out of the differential comparison and
// tested on their own in TestKnownDivergences.
func knownDivergence(kind string, data []byte) string {
	v, err := Parse(data, Limits{})
	if err != nil {
		se := err.(*SyntaxError)
		switch se.Rule {
		case "utf8", "duplicateKey", "maxDepth", "numberRange", "maxBytes":
			// encoding/json, the oracle's decoder, accepts these; we reject them by design.
			return "parser:" + se.Rule
		}
		return ""
	}
	if kind == KindEvent && v.Kind == KindObject {
		// artifact.payload.url must be an absolute URI (the source contract asserts it); the oracle treats
		// "format" as an annotation in draft 2020-12.
		if et := v.Get("eventType"); et != nil && et.Kind == KindString && et.Str == "artifact" {
			if pl := v.Get("payload"); pl != nil && pl.Kind == KindObject {
				if u := pl.Get("url"); u != nil && u.Kind == KindString && !isAbsoluteURI(u.Str) {
					return "artifact url not an absolute URI"
				}
			}
		}
	}
	if kind == KindSession && v.Kind == KindObject {
		for _, m := range v.Members {
			if m.Value.Kind == KindString && dateTimeDivergence(m.Value.Str) {
				return "date-time leap second or signed field"
			}
		}
	}
	return ""
}

// dateTimeDivergence reports a date-time string on which the oracle's "date-time" format
// checker knowingly differs from RFC 3339 as we apply it: it accepts a leap second (:60, when
// the time is 23:59 in UTC) and, because it reads each field with strconv.Atoi, a sign inside
// the hour, minute, second or offset fields ("+1:00:00Z").
func dateTimeDivergence(s string) bool {
	if len(s) < 20 || (s[10] != 'T' && s[10] != 't') {
		return false
	}
	t := s[11:]
	if len(t) >= 8 && t[6:8] == "60" {
		return true
	}
	if strings.ContainsAny(t[:min(8, len(t))], "+-") {
		return true
	}
	// the offset's hour and minute fields
	if len(t) > 8 {
		if i := strings.IndexAny(t[8:], "+-"); i >= 0 {
			if strings.ContainsAny(t[8+i+1:], "+-") {
				return true
			}
		}
	}
	return false
}

// sampleLine is one labelled line of testdata/events.sample.jsonl.
type sampleLine struct {
	ID    string          `json:"id"`
	Valid bool            `json:"valid"`
	Why   string          `json:"why"`
	Event json.RawMessage `json:"event"`
}

func loadSample(tb testing.TB) []sampleLine {
	tb.Helper()
	data, err := os.ReadFile("testdata/events.sample.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	var out []sampleLine
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var s sampleLine
		if err := json.Unmarshal(line, &s); err != nil {
			tb.Fatal(err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		tb.Fatal("empty sample")
	}
	return out
}
