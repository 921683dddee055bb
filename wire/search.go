package wire

// SearchHit is one result of a full-text search (GET /v1/search): the event it found, where
// it is, and a snippet of the text that matched.
type SearchHit struct {
	// SessionID, RunID ("" when the event names no run), Sequence and Kind (the event's
	// eventType) locate the event: the transcript of SessionID at Sequence.
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId,omitempty"`
	Sequence  int64  `json:"sequence"`
	Kind      string `json:"kind"`
	// OccurredAt is the event's occurredAt, to the millisecond (RFC 3339, UTC).
	OccurredAt string `json:"occurredAt"`
	// Field names the searchable field the snippet comes from (text, title, tool, input,
	// output, path, terminal, test, error); "" when the hit was found by filters alone.
	Field string `json:"field"`
	// Snippet is the matching text around the match, cut into segments: a segment with Mark
	// set is a matching term. The text is plain text, never markup: show each segment as text
	// (a user interface must not interpret it as HTML).
	Snippet []SnippetSegment `json:"snippet"`
	// Score is the relevance (higher is better) when the results are ordered by relevance;
	// 0 in recency order.
	Score float64 `json:"score,omitempty"`
}

// SnippetSegment is one piece of a snippet: plain text, marked when it matched the query.
type SnippetSegment struct {
	Text string `json:"text"`
	Mark bool   `json:"mark,omitempty"`
}
