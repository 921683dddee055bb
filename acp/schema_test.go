package acp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sessiond/sessiond/acp"
)

// schemaFile is the protocol's JSON Schema as the pinned npm package ships it.
const schemaFile = "node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"

// frameChecker validates JSON-RPC frames against the ACP schema: the whole frame against the
// schema's branch for its sender (Agent or Client), and the params or result against the
// definition of its method (x-method, x-side), with the method of a response found from the
// request it answers.
type frameChecker struct {
	agent, client *jsonschema.Schema
	defs          map[string]*jsonschema.Schema // "request|side|method", "response|side|method"
	mu            sync.Mutex
	methods       map[string]string // "direction id" -> method
	count         map[string]int
}

func newFrameChecker(t *testing.T, dir string) *frameChecker {
	t.Helper()
	path := filepath.Join(dir, schemaFile)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("acp.json", doc); err != nil {
		t.Fatal(err)
	}
	compile := func(ptr string) *jsonschema.Schema {
		s, err := c.Compile("acp.json" + ptr)
		if err != nil {
			t.Fatalf("compile %s: %v", ptr, err)
		}
		return s
	}
	fc := &frameChecker{defs: map[string]*jsonschema.Schema{}, methods: map[string]string{}, count: map[string]int{}}
	root := doc.(map[string]any)
	for i, branch := range root["anyOf"].([]any) {
		switch branch.(map[string]any)["title"] {
		case "Agent":
			fc.agent = compile("#/anyOf/" + itoa(i))
		case "Client":
			fc.client = compile("#/anyOf/" + itoa(i))
		}
	}
	for name, d := range root["$defs"].(map[string]any) {
		def := d.(map[string]any)
		method, _ := def["x-method"].(string)
		side, _ := def["x-side"].(string)
		if method == "" {
			continue
		}
		kind := "request"
		if strings.HasSuffix(name, "Response") {
			kind = "response"
		}
		fc.defs[kind+"|"+side+"|"+method] = compile("#/$defs/" + name)
	}
	if fc.agent == nil || fc.client == nil || len(fc.defs) < 20 {
		t.Fatalf("the schema %s does not have the expected shape", path)
	}
	return fc
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// check validates one frame; sent frames come from the client (sessiond), received ones from
// the agent.
func (fc *frameChecker) check(t *testing.T, dir acp.Direction, frame []byte) {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(frame)))
	if err != nil {
		t.Errorf("frame is not JSON: %v: %s", err, frame)
		return
	}
	whole, from, to := fc.agent, "agent", "client"
	if dir == acp.Sent {
		whole, from, to = fc.client, "client", "agent"
	}
	if err := whole.Validate(inst); err != nil {
		t.Errorf("%s frame does not match the ACP schema: %v\n%s", from, err, frame)
	}
	var f struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(frame, &f); err != nil {
		t.Errorf("frame: %v", err)
		return
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var key string
	var body json.RawMessage
	switch {
	case f.Method != "":
		// A request or notification from `from` is served by `to`: its definition is on to's side.
		key, body = "request|"+to+"|"+f.Method, f.Params
		if len(f.ID) > 0 {
			fc.methods[from+" "+string(f.ID)] = f.Method
		}
	case f.Result != nil:
		m := fc.methods[to+" "+string(f.ID)]
		key, body = "response|"+from+"|"+m, f.Result
	default:
		fc.count["error"]++
		return // an error response: the whole-frame check covers it
	}
	fc.count[key]++
	s := fc.defs[key]
	if s == nil {
		t.Errorf("no schema definition for %s", key)
		return
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(body)))
	if err == nil {
		err = s.Validate(v)
	}
	if err != nil {
		t.Errorf("%s of %s does not match its schema definition: %v\n%s", key, from, err, frame)
	}
}
