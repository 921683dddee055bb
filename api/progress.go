package api

import "github.com/sessiond/sessiond/wire"

// ProgressMediaType is the media type a client lists in Accept to have archive and restore
// stream their progress (docs/api.md, "Progress of archive and restore"). The answer is then
// either the ordinary JSON answer (Content-Type application/json: the operation was quick, or
// failed before it started) or, once the operation has run for the progress interval, a stream
// of this type: progress lines, then one final line that is exactly the ordinary answer body
// (the result, or {"error":{...}}).
const ProgressMediaType = "application/x-ndjson"

// ProgressLine is one progress line of a progress stream: {"progress":{"phase":…,"done":N,
// "total":M}}. The final line of the stream has no "progress" member.
type ProgressLine struct {
	Progress *wire.Progress `json:"progress"`
}
