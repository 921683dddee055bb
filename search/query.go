package search

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Query limits.
const (
	// MaxQueryBytes is the longest q accepted.
	MaxQueryBytes = 512
	// MaxTerms is the most terms (words, phrases, prefixes) one q may hold.
	MaxTerms = 16
	// MinContains and MaxContains bound the length of a substring search, in characters: the
	// trigram indexes need three.
	MinContains = 3
	MaxContains = 256
	// MinPrefix is the fewest characters a prefix term (word*) must have.
	MinPrefix = 2
	// DefaultLimit and MaxLimit bound a page of results.
	DefaultLimit = 20
	MaxLimit     = 100
	// Candidates is the size of the candidate set relevance order ranks: the newest
	// Candidates matches of the query (at the time of its first page), best first.
	Candidates = 1000
)

// Orders of results.
const (
	// OrderRecent is newest first by the event's occurredAt (the default): the first page of a
	// common term costs what a rare term's does, as the index is walked from the newest end.
	OrderRecent = "recent"
	// OrderRelevance ranks the newest Candidates matches best first (BM25 on SQLite,
	// ts_rank_cd on PostgreSQL; the newer of two equal scores first).
	OrderRelevance = "relevance"
)

// Orders lists the orders, default first.
var Orders = []string{OrderRecent, OrderRelevance}

// Term is one term of a query: a word (one token), a phrase (its tokens in a row), or either
// with its last token taken as a prefix.
type Term struct {
	Tokens []string
	Prefix bool
}

// Query is a search: the terms and the substring to match, the filters, the order, the page
// size and the cursor. Every filter left empty matches everything; all given must hold.
type Query struct {
	Terms    []Term
	Contains string // a substring of a path or a tool input (the trigram indexes), lower-cased

	Project   string // the session's project; the server sets the caller's
	Agent     string // the session's agent_id
	Role      string // the session record's role
	Status    string // the session's status now
	Kind      string // the event's eventType
	RunStatus string // the status now of the run the event names
	Tool      string // the tool name of a tool event
	Code      string // the error code of an error event or a steering error
	From, To  time.Time

	Order string // OrderRecent (default) or OrderRelevance
	Limit int
	// After is the decoded cursor of the previous page; nil for the first page.
	After *Cursor
}

// Result is one match a backend returns: the document's key in the index's order and where
// the event is.
type Result struct {
	Key       int64 // the document's key: its occurredAt in milliseconds << 20 plus a tie-breaker
	SessionID string
	Sequence  int64
	RunID     string
	Kind      string
	Score     float64
	// Anchor is, in relevance order, the highest key of the candidate set the result was
	// ranked in (the next page ranks the same set); 0 in recency order.
	Anchor int64
}

// Cursor is the position after a page. It is sent to clients as an opaque string (Encode).
type Cursor struct {
	// Key is the key of the last result of the page (recency order).
	Key int64 `json:"k,omitempty"`
	// Anchor is the highest key of the candidate set and Offset the results already given
	// (relevance order).
	Anchor int64 `json:"a,omitempty"`
	Offset int   `json:"o,omitempty"`
	// Query is a hash of the query the cursor belongs to.
	Query uint64 `json:"q"`
}

// Encode returns the cursor as an opaque URL-safe string.
func (c *Cursor) Encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor parses a cursor made by Encode for the query q, refusing one that does not
// parse or that belongs to another query.
func DecodeCursor(s string, q *Query) (*Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("is not a cursor this server made; pass the next value of the previous page as it came")
	}
	var c Cursor
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Offset < 0 || dec.More() || dec.InputOffset() != int64(len(b)) {
		return nil, fmt.Errorf("is not a cursor this server made; pass the next value of the previous page as it came")
	}
	if c.Query != q.Hash() {
		return nil, fmt.Errorf("belongs to another query; a cursor continues the query it came with (same q, filters and order)")
	}
	return &c, nil
}

// Hash returns a hash of everything that selects and orders the results (not the page size
// or the cursor), so that a cursor can be tied to its query.
func (q *Query) Hash() uint64 {
	h := fnv.New64a()
	order := q.Order
	if order == "" {
		order = OrderRecent
	}
	for _, t := range q.Terms {
		fmt.Fprintf(h, "%q%v;", t.Tokens, t.Prefix)
	}
	fmt.Fprintf(h, "|%q|%q|%q|%q|%q|%q|%q|%q|%q|%d|%d|%q", q.Contains, q.Project, q.Agent, q.Role, q.Status, q.Kind,
		q.RunStatus, q.Tool, q.Code, millis(q.From), millis(q.To), order)
	return h.Sum64()
}

// KeyOf returns the lowest key a document of time t may have: keys order documents by time.
func KeyOf(t time.Time) int64 { return millis(t) << KeyShift }

// KeyShift is how far a document's occurredAt in milliseconds is shifted in its key; the low
// bits tell apart the documents of one millisecond.
const KeyShift = 20

// TimeOfKey returns the occurredAt in milliseconds of the document with key k.
func TimeOfKey(k int64) int64 { return k >> KeyShift }

// FormatKeyTime formats the occurredAt of the document with key k.
func FormatKeyTime(k int64) string { return formatMillis(TimeOfKey(k)) }

// isTokenRune reports whether r is part of a token: letters, numbers and private-use
// characters, as SQLite's unicode61 tokenizer takes them; everything else separates tokens.
func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r)
}

// span is a token of a text: its lower-cased form and its byte range.
type span struct {
	tok        string
	start, end int
}

// tokenize splits s into tokens.
func tokenize(s string) []span {
	var out []span
	start := -1
	for i, r := range s {
		if isTokenRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, span{strings.ToLower(s[start:i]), start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, span{strings.ToLower(s[start:]), start, len(s)})
	}
	return out
}

// Tokens returns the tokens of s, lower-cased, as the indexes take them.
func Tokens(s string) []string {
	sp := tokenize(s)
	out := make([]string, len(sp))
	for i, t := range sp {
		out[i] = t.tok
	}
	return out
}

// Normalize returns s as its tokens separated by single spaces: the text the PostgreSQL backend
// gives to_tsvector('simple', ...), so that both drivers split words the same way (PostgreSQL's
// own parser would keep "billing/invoice.go" as one file token).
func Normalize(s string) string { return strings.Join(Tokens(s), " ") }

// ParseTerms parses q, the query's text: words (every one must match), "quoted phrases"
// (the words in a row), and word* or "a phrase"* for a prefix of the last word. A word with
// punctuation inside (billing/invoice.go, TOOL_TIMEOUT, rm -rf in quotes) is the phrase of
// its words. An error says what to change.
func ParseTerms(q string) ([]Term, error) {
	if len(q) > MaxQueryBytes {
		return nil, fmt.Errorf("is %d bytes; at most %d are allowed", len(q), MaxQueryBytes)
	}
	if !utf8.ValidString(q) {
		return nil, fmt.Errorf("is not valid UTF-8")
	}
	var terms []Term
	add := func(text string, prefix bool) error {
		toks := Tokens(text)
		if len(toks) == 0 {
			return nil
		}
		if prefix && utf8.RuneCountInString(toks[len(toks)-1]) < MinPrefix {
			return fmt.Errorf("has the prefix %q; a prefix needs at least %d characters before the *", toks[len(toks)-1]+"*", MinPrefix)
		}
		terms = append(terms, Term{Tokens: toks, Prefix: prefix})
		return nil
	}
	rest := q
	for {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			break
		}
		var text string
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("has an unclosed quote; close the phrase with \" (or leave the quote out)")
			}
			text, rest = rest[1:1+end], rest[2+end:]
		} else {
			end := strings.IndexFunc(rest, unicode.IsSpace)
			if end < 0 {
				end = len(rest)
			}
			text, rest = rest[:end], rest[end:]
		}
		prefix := false
		if strings.HasPrefix(rest, "*") {
			prefix, rest = true, rest[1:]
		} else if strings.HasSuffix(text, "*") {
			prefix, text = true, strings.TrimSuffix(text, "*")
		}
		if err := add(text, prefix); err != nil {
			return nil, err
		}
	}
	if len(terms) > MaxTerms {
		return nil, fmt.Errorf("has %d terms; at most %d are allowed", len(terms), MaxTerms)
	}
	return terms, nil
}

// CheckContains checks and lower-cases a substring search.
func CheckContains(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("is not valid UTF-8")
	}
	n := utf8.RuneCountInString(s)
	if n < MinContains || n > MaxContains {
		return "", fmt.Errorf("has %d characters; give %d to %d", n, MinContains, MaxContains)
	}
	if strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("holds a NUL character")
	}
	return strings.ToLower(s), nil
}

// FTS5 returns the terms as an SQLite FTS5 query: each term a quoted phrase of its tokens,
// starred when a prefix, all of them required.
func FTS5(terms []Term) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = `"` + strings.Join(t.Tokens, " ") + `"`
		if t.Prefix {
			parts[i] += "*"
		}
	}
	return strings.Join(parts, " AND ")
}

// FTS5Substring returns s as an FTS5 query of the trigram tokenizer: the string as one phrase,
// which matches the texts holding it.
func FTS5Substring(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// TSQuery returns the terms as a PostgreSQL tsquery (to_tsquery('simple', ...)): each term
// the phrase of its tokens (<->), the last with :* when a prefix, all of them required.
func TSQuery(terms []Term) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		toks := make([]string, len(t.Tokens))
		for j, tok := range t.Tokens {
			toks[j] = "'" + strings.ReplaceAll(tok, "'", "''") + "'"
		}
		if t.Prefix {
			toks[len(toks)-1] += ":*"
		}
		p := strings.Join(toks, " <-> ")
		if len(toks) > 1 {
			p = "(" + p + ")"
		}
		parts[i] = p
	}
	return strings.Join(parts, " & ")
}

// TSQueryLoose returns the terms as a tsquery of all their tokens, each required, in any
// order and place (a superset of TSQuery's matches): what the GIN index answers without
// reading a document's positions.
func TSQueryLoose(terms []Term) string {
	var parts []string
	for _, t := range terms {
		for j, tok := range t.Tokens {
			p := "'" + strings.ReplaceAll(tok, "'", "''") + "'"
			if t.Prefix && j == len(t.Tokens)-1 {
				p += ":*"
			}
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " & ")
}

// LikePattern returns s as an ILIKE pattern matching any text that holds it.
func LikePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

var _ = strconv.Itoa
