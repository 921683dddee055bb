package contract

import (
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compareWithOracle asserts that our schema-layer verdict equals the oracle's on every case
// that is not a documented divergence, and returns how many valid and invalid cases it saw.
func compareWithOracle(t *testing.T, kind string, sch *jsonschema.Schema, cases []genCase) (valid, invalid, skipped int) {
	t.Helper()
	fails := 0
	for _, c := range cases {
		if why := knownDivergence(kind, c.data); why != "" {
			skipped++
			continue
		}
		want, oerr := oracleValid(sch, c.data)
		got, err := schemaValid(kind, c.data)
		if got != want {
			fails++
			if fails <= 40 {
				t.Errorf("%s: ours valid=%v, oracle valid=%v\n doc: %s\n ours: %v\n oracle: %v", c.name, got, want, truncate(string(c.data), 600), err, oerr)
			}
			continue
		}
		if want {
			valid++
		} else {
			invalid++
		}
	}
	if fails > 40 {
		t.Errorf("... and %d more disagreements", fails-40)
	}
	return
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestDifferentialEvents compares our validator with the oracle on the generated event corpus.
func TestDifferentialEvents(t *testing.T) {
	ev, _ := oracles(t)
	cases := generateEvents(t, 1, 3000)
	valid, invalid, skipped := compareWithOracle(t, KindEvent, ev, cases)
	t.Logf("%d cases: %d valid, %d invalid, %d documented divergences skipped", len(cases), valid, invalid, skipped)
	// The corpus must exercise both verdicts heavily, or the comparison proves little.
	if valid < 2000 || invalid < 5000 {
		t.Errorf("corpus too one-sided: %d valid, %d invalid", valid, invalid)
	}
}

// TestDifferentialSessions compares our validator with the oracle (draft-07, format asserted)
// on the generated session record corpus.
func TestDifferentialSessions(t *testing.T) {
	_, ss := oracles(t)
	cases := generateSessions(t, 2, 500)
	valid, invalid, skipped := compareWithOracle(t, KindSession, ss, cases)
	t.Logf("%d cases: %d valid, %d invalid, %d documented divergences skipped", len(cases), valid, invalid, skipped)
	if valid < 100 || invalid < 300 {
		t.Errorf("corpus too one-sided: %d valid, %d invalid", valid, invalid)
	}
}

// TestDifferentialSample runs the shared labelled sample through the oracle too.
func TestDifferentialSample(t *testing.T) {
	ev, _ := oracles(t)
	var cases []genCase
	for _, s := range loadSample(t) {
		cases = append(cases, genCase{s.ID + " " + s.Why, s.Event})
	}
	compareWithOracle(t, KindEvent, ev, cases)
}

// TestGeneratorBasesValid checks that each generated base event passes every layer (schema
// and rules), so that mutations start from a truly valid document.
func TestGeneratorBasesValid(t *testing.T) {
	_, bases := eventBases(t)
	if len(bases) != 2*len(EventTypes) {
		t.Fatalf("%d bases, want %d", len(bases), 2*len(EventTypes))
	}
	seen := map[string]bool{}
	for _, b := range bases {
		seen[b.eventType] = true
		if err := Validate(KindEvent, encode(b.doc), Limits{}); err != nil {
			t.Errorf("%s: %v\n%s", b.name, err, encode(b.doc))
		}
	}
	for _, et := range EventTypes {
		if !seen[et] {
			t.Errorf("no base for %s", et)
		}
	}
}

// TestGeneratorCoverage checks that the generator reaches what the brief asks for: every kind,
// every enum value, the length bounds in several scripts, and the integer notations.
func TestGeneratorCoverage(t *testing.T) {
	cases := generateEvents(t, 1, 0)
	all := make([]string, len(cases))
	for i, c := range cases {
		all[i] = string(c.data)
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{
		`"eventType":"workspace-file"`, `"waiting_approval"`, `"COMMAND_EXECUTION_FAILED"`,
		strings.Repeat("😀", 257), strings.Repeat("中", 256), `"size":1e2`, `"exitCode":-9007199254740992`,
		`"contextWindow":0`, `"durationMs":-1e-400`, `"durationMs":-0`, `"occurredAt":"1900-02-29T00:00:00Z"`,
		`"zzExtra":1`, `"sequence":9007199254740992`, `"sequence":1.0`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("corpus lacks %s", want)
		}
	}
}

// TestIsTimestampMatchesPattern holds IsTimestamp to the schema's own regular expression (Go's
// RE2, like ECMA-262 here: \d is ASCII, $ is the end of input) on every generated sample and
// on systematic variations of a valid timestamp.
func TestIsTimestampMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(TimestampPattern)
	check := func(s string) {
		if got, want := IsTimestamp(s), re.MatchString(s); got != want {
			t.Errorf("IsTimestamp(%q) = %v, pattern says %v", s, got, want)
		}
	}
	for _, v := range timestampSamples {
		check(v.(string))
	}
	for _, v := range dateTimeSamples {
		check(v.(string))
	}
	// every year of a 400-year cycle on Feb 29 and every day of every month in two years
	for y := 1600; y <= 2400; y++ {
		check(strings.Replace("YYYY-02-29T00:00Z", "YYYY", pad4(y), 1))
	}
	for _, y := range []string{"2023", "2024"} {
		for m := 0; m <= 13; m++ {
			for d := 0; d <= 32; d++ {
				check(y + "-" + pad2(m) + "-" + pad2(d) + "T12:34Z")
			}
		}
	}
	// every byte at every position of a full timestamp
	base := "2024-02-29T23:59:59.999+23:59"
	for i := 0; i <= len(base); i++ {
		for c := 0; c < 256; c++ {
			check(base[:i] + string(rune(c)) + base[i:])
			if i < len(base) {
				check(base[:i] + string(rune(c)) + base[i+1:])
			}
		}
		check(base[:i])
	}
}

func pad2(n int) string {
	if n < 10 {
		return "0" + string(rune('0'+n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}

func pad4(n int) string { return pad2(n/100) + pad2(n%100) }

// FuzzIsTimestamp checks IsTimestamp against the pattern on arbitrary strings.
func FuzzIsTimestamp(f *testing.F) {
	for _, v := range timestampSamples {
		f.Add(v.(string))
	}
	re := regexp.MustCompile(TimestampPattern)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsTimestamp(s), re.MatchString(s); got != want {
			t.Fatalf("IsTimestamp(%q) = %v, pattern says %v", s, got, want)
		}
	})
}
