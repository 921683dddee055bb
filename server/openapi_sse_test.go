package server_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sessiond/sessiond/api"
)

// The SSE stream's connection is taken over from net/http, so [validated] never sees its
// body: the stream tests' reader checks each block's data against the document's schema of a
// stream line (x-sessiond-line of the stream's 200 answer) instead.

var (
	sseLineMu      sync.Mutex
	sseLineSchemas = map[string]*jsonschema.Schema{}
)

// Where the document keeps the schema of a stream block's data: the session stream's and the
// change feed's.
const (
	streamLinePointer = "#/paths/~1v1~1sessions~1{id}~1events~1stream/get/responses/200/content/text~1event-stream/x-sessiond-line"
	changeLinePointer = "#/paths/~1v1~1events~1stream/get/responses/200/content/text~1event-stream/x-sessiond-line"
)

// streamLine compiles (once) the schema the document keeps at pointer.
func streamLine(t testing.TB, pointer string) *jsonschema.Schema {
	t.Helper()
	sseLineMu.Lock()
	defer sseLineMu.Unlock()
	if sch, ok := sseLineSchemas[pointer]; ok {
		return sch
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPI))
	if err != nil {
		t.Fatalf("read api/openapi.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatalf("load api/openapi.json: %v", err)
	}
	sch, err := c.Compile("openapi.json" + pointer)
	if err != nil {
		t.Fatalf("compile the stream line schema %s of api/openapi.json: %v", pointer, err)
	}
	sseLineSchemas[pointer] = sch
	return sch
}

// checkStreamBlock reports what is wrong with a block of a stream by the document: its data
// must be an AgentSessionEvent (in a block named ev.<eventType>), a change (in a block named
// change.<kind>, on the change feed) or, in the final stream.error block, {"code","message"}.
func checkStreamBlock(t testing.TB, e sseEvent) string {
	if e.data == "" {
		return ""
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(e.data))
	if err != nil {
		return fmt.Sprintf("block data is not JSON: %v", err)
	}
	pointer := streamLinePointer
	if strings.HasPrefix(e.event, "change.") {
		pointer = changeLinePointer // the change feed's blocks
	}
	if err := streamLine(t, pointer).Validate(v); err != nil {
		return fmt.Sprintf("block data is not what api/openapi.json describes: %v", err)
	}
	if e.event != api.SSEStreamError && !strings.HasPrefix(e.event, api.SSEEventPrefix) && !strings.HasPrefix(e.event, "change.") {
		return fmt.Sprintf("block name %q is neither %s<eventType>, change.<kind> nor %s", e.event, api.SSEEventPrefix, api.SSEStreamError)
	}
	return ""
}

// TestStreamLineSchema: the schema the stream reader checks with accepts an event and a final
// error, and refuses an event with an undocumented field and an error with an unknown code.
func TestStreamLineSchema(t *testing.T) {
	cases := []struct {
		name, event, data string
		ok                bool
	}{
		{"event", "ev.message", event("S-1", 1), true},
		{"final error", api.SSEStreamError, `{"code":"SUBSCRIBER_TOO_SLOW","message":"reconnect with Last-Event-ID: 4"}`, true},
		{"final error in an envelope", api.SSEStreamError, `{"error":{"code":"SUBSCRIBER_TOO_SLOW","message":"m"}}`, false},
		{"undocumented field", "ev.message", strings.Replace(event("S-1", 1), `"contract"`, `"extra":1,"contract"`, 1), false},
		{"unknown stream code", api.SSEStreamError, `{"code":"NOPE","message":"m"}`, false},
		{"a payload against its type", "ev.message", strings.Replace(event("S-1", 1), `"role":"assistant"`, `"role":"robot"`, 1), false},
		{"unknown block name", "message", event("S-1", 1), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := checkStreamBlock(t, sseEvent{event: c.event, data: c.data})
			if (msg == "") != c.ok {
				t.Errorf("check = %q; want ok=%v", msg, c.ok)
			}
		})
	}
}
