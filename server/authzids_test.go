package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/search"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// idSlot is a place in a request that names a session, thread, run or message: a path or
// query parameter, or a field of the body.
type idSlot struct {
	pattern string // the route, as the route table has it
	in      string // "path", "query" or "body"
	name    string // the parameter, or the body field's JSON Pointer ("/payload/sourceThreadId")
	when    string // the body variant the field belongs to ("commandType=fork"); "" for all
	kind    string // "session", "run" or "message"
}

func (s idSlot) String() string {
	w := ""
	if s.when != "" {
		w = " (" + s.when + ")"
	}
	return s.pattern + " " + s.in + " " + s.name + w
}

// base is the key of the base request a slot is tried in: its route and body variant.
func (s idSlot) base() string { return s.pattern + "|" + s.when }

// idName matches the names of parameters and fields that name a session (thread, chat), a
// run or a message: sessionId, session_id, sourceThreadId, chatId, runId, current_run_id,
// targetRunId, parentRunId, sourceMessageId, …
var idName = regexp.MustCompile(`(?i)(session|thread|chat|run|message)_?id$`)

func idKind(name string) string {
	switch m := strings.ToLower(idName.FindStringSubmatch(name)[1]); m {
	case "run", "message":
		return m
	}
	return "session"
}

// idSlots derives from the OpenAPI document (api/openapi.json, generated from the Go types of
// api/, wire/ and contract/) every parameter and body field of every route of the table that
// names a session, thread, run or message, following $ref, allOf (with if/then variants),
// oneOf, anyOf and array items. A body's top-level "id" is the session's too (useChat's chat
// id).
func idSlots(t *testing.T, table []server.RouteSpec) []idSlot {
	t.Helper()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var out []idSlot
	for _, rt := range table {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = strings.NewReplacer("{$}", "", "...}", "}").Replace(path)
		raw, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("route %s has no operation in the OpenAPI document", rt.Pattern)
			continue
		}
		var op struct {
			Parameters []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
			RequestBody struct {
				Content map[string]struct {
					Schema any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		for _, p := range op.Parameters {
			if (p.In == "path" || p.In == "query") && idName.MatchString(p.Name) || p.In == "path" && p.Name == "id" {
				kind := "session"
				if p.Name != "id" {
					kind = idKind(p.Name)
				}
				out = append(out, idSlot{pattern: rt.Pattern, in: p.In, name: p.Name, kind: kind})
			}
		}
		if c, ok := op.RequestBody.Content["application/json"]; ok {
			seen := map[string]bool{}
			var walk func(s any, ptr, when string, refs map[string]bool)
			walk = func(s any, ptr, when string, refs map[string]bool) {
				m, ok := s.(map[string]any)
				if !ok {
					return
				}
				if ref, ok := m["$ref"].(string); ok {
					name := ref[strings.LastIndex(ref, "/")+1:]
					if refs[name] {
						return
					}
					walk(doc.Components.Schemas[name], ptr, when, mapsWith(refs, name))
					return
				}
				props, _ := m["properties"].(map[string]any)
				for k, v := range props {
					if idName.MatchString(k) || ptr == "" && k == "id" {
						kind := "session"
						if k != "id" {
							kind = idKind(k)
						}
						sl := idSlot{pattern: rt.Pattern, in: "body", name: ptr + "/" + k, when: when, kind: kind}
						if !seen[sl.String()] {
							seen[sl.String()] = true
							out = append(out, sl)
						}
					}
					walk(v, ptr+"/"+k, when, refs)
				}
				for _, x := range anyList(m["allOf"]) {
					xm, _ := x.(map[string]any)
					cond, ok := xm["if"].(map[string]any)
					if !ok {
						walk(x, ptr, when, refs)
						continue
					}
					w := when
					cp, _ := cond["properties"].(map[string]any)
					for k, v := range cp {
						if c, ok := v.(map[string]any)["const"]; ok {
							w = fmt.Sprintf("%s=%v", k, c)
						}
					}
					walk(xm["then"], ptr, w, refs)
				}
				for _, x := range append(anyList(m["oneOf"]), anyList(m["anyOf"])...) {
					walk(x, ptr, when, refs)
				}
				if items, ok := m["items"]; ok {
					walk(items, ptr+"/0", when, refs)
				}
			}
			walk(c.Schema, "", "", map[string]bool{})
		}
	}
	return out
}

func anyList(v any) []any { l, _ := v.([]any); return l }

func mapsWith(m map[string]bool, k string) map[string]bool {
	out := map[string]bool{k: true}
	for x := range m {
		out[x] = true
	}
	return out
}

// idExempt lists the slots where an id of another project may answer otherwise than a
// missing one, and why. Nothing else may be added here without a line in docs/security.md.
var idExempt = map[string]string{
	"POST /v1/sessions body /session_id": "a client that picks its own session_id learns from SESSION_EXISTS that the id is taken (docs/security.md, threat model)",
}

// command is an AgentSessionCommand to the session @self, of commandType with the envelope
// fields extra and payload.
func command(commandType, extra, payload string) string {
	return fmt.Sprintf(`{"contract":"AgentSessionCommand","commandId":"c-@new","sessionId":"@self",%s"idempotencyKey":"k-@new","expectedSequence":@seq,"issuedAt":"2026-03-01T12:05:00Z","commandType":%q,"payload":%s}`,
		extra, commandType, payload)
}

// runtimeEventOf is an AgentSessionEvent of session @self.
func runtimeEventOf(eventType, extra, payload string) string {
	return fmt.Sprintf(`{"contract":"AgentSessionEvent","eventId":"e-@new","sessionId":"@self","sequence":0,"idempotencyKey":"e-@new","occurredAt":"2026-03-01T12:00:00Z","eventType":%q,%s"payload":%s}`,
		eventType, extra, payload)
}

// idBases are the base requests the slots are tried in, by route and body variant: bodies
// that a key of the fixture session's project could send, naming the fixture's own session
// (@self), message m1 and run r1. @new is a fresh id for each request, @seq the session's
// last sequence. A slot with no base here fails the test: a new field that names an id is
// tried as soon as it is in the API document. A route whose id is in its path only, and
// whose body is optional, is tried without a body.
var idBases = map[string]string{
	"POST /v1/sessions|":                                         `{"session_id":"S-@new","project":"alpha","agent_id":"a","role":"implementer","current_run_id":"r1","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`,
	"PATCH /v1/sessions/{id}|":                                   `{"current_run_id":"r1","updated_by_gate":"owner"}`,
	"POST /v1/sessions/{id}/agui|":                               `{"threadId":"@self","runId":"ag-@new","parentRunId":"r1","messages":[{"id":"u-@new","role":"user","content":"hi"}]}`,
	"POST /v1/sessions/{id}/chat|":                               `{"id":"@self","messageId":"m1","trigger":"submit-message","messages":[{"id":"u-@new","role":"user","parts":[{"type":"text","text":"hi"}]}]}`,
	"POST /v1/sessions/{id}/commands|":                           command("stop", `"runId":"r1",`, `{}`),
	"POST /v1/sessions/{id}/commands|commandType=retry-summary":  command("retry-summary", `"runId":"r1",`, `{"sourceEventId":"ev-3","sourceRunId":"r1"}`),
	"POST /v1/sessions/{id}/commands|commandType=fork":           command("fork", "", `{"sourceThreadId":"@self","sourceMessageId":"m1","sourceRunId":"r1","inheritance":`+excludeAll+`}`),
	"POST /v1/sessions/{id}/commands|commandType=edit-and-rerun": command("edit-and-rerun", "", `{"sourceThreadId":"@self","sourceMessageId":"m1","sourceRunId":"r1","replacementParts":["fix it differently"],"inheritance":`+excludeAll+`}`),
	"POST /v1/sessions/{id}/commands|commandType=steer":          command("steer", `"runId":"r1",`, `{"targetRunId":"r1","text":"go on"}`),
	"POST /v1/sessions/{id}/continuations|":                      `{"idempotencyKey":"k-@new","sourceMessageId":"m1","sourceRunId":"r1","inheritance":` + excludeAll + `}`,
	"POST /v1/sessions/{id}/events|":                             runtimeEventOf("status", `"runId":"r2","sourceMessageId":"m1",`, `{"status":"queued"}`),
	"POST /v1/sessions/{id}/events|eventType=message":            runtimeEventOf("message", "", `{"messageId":"m2","role":"user","operation":"append","parts":["and the tests"]}`),
	"POST /v1/sessions/{id}/events|eventType=steer":              runtimeEventOf("steer", `"runId":"r1",`, `{"commandId":"c-@new","targetRunId":"r1","text":"go on","status":"accepted"}`),
	"POST /v1/sessions/{id}/events|eventType=summary":            runtimeEventOf("summary", `"runId":"r1",`, `{"summaryId":"s-@new","runId":"r1","text":"done","highlights":[],"pendingItems":[],"status":"completed"}`),
	"POST /v1/sessions/{id}/runs/{runId}/lease|":                 `{"leaseId":"l-1","token":1}`,
	"POST /v1/sessions/{id}/runs/{runId}/lease/release|":         `{"leaseId":"l-1","token":1}`,
}

// setPointer sets the field at ptr (a JSON Pointer whose segments all exist) of v to val; it
// reports whether the field was there.
func setPointer(v any, ptr, val string) bool {
	segs := strings.Split(ptr, "/")[1:]
	for i, seg := range segs {
		last := i == len(segs)-1
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x[seg]; !ok {
				return false
			}
			if last {
				x[seg] = val
				return true
			}
			v = x[seg]
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n >= len(x) {
				return false
			}
			if last {
				x[n] = val
				return true
			}
			v = x[n]
		default:
			return false
		}
	}
	return false
}

// fixtureEvents are the events of a fixture session: user message m1 starts run r1, which
// completes with assistant message a1. Event ids are ev-0…
func fixtureEvents(sid string, extra ...string) string {
	evs := []string{
		`"eventType":"message","payload":{"messageId":"m1","role":"user","operation":"append","parts":["fix the build"]}`,
		`"eventType":"status","runId":"r1","sourceMessageId":"m1","payload":{"status":"running","startedAt":"2026-03-01T12:01:00Z"}`,
		`"eventType":"message","runId":"r1","payload":{"messageId":"a1","role":"assistant","operation":"append","parts":["fixed"],"status":"completed"}`,
		`"eventType":"status","runId":"r1","sourceMessageId":"m1","payload":{"status":"completed","completedAt":"2026-03-01T12:02:00Z","durationMs":1500}`,
	}
	evs = append(evs, extra...)
	var b strings.Builder
	b.WriteString("[")
	for i, e := range evs {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"contract":"AgentSessionEvent","eventId":"ev-%d","sessionId":%q,"sequence":0,"idempotencyKey":"ev-%d","occurredAt":"2026-03-01T12:00:%02dZ",%s}`, i, sid, i, i, e)
	}
	b.WriteString("]")
	return b.String()
}

// TestEveryIDIsAuthorized is the property behind docs/security.md's "every id is authorized
// where it is used": for every slot of the API that names a session, thread, run or message
// (derived from the API document, [idSlots]), every key of one project (each single scope, and
// every scope), it sends the route's base request with the slot set to an id of another
// project and, separately, to an id that exists nowhere, and checks that the two answers are
// the same (status and body, the id itself aside) and that nothing of the other project
// changed. It ends with a claim, which must not hand out the other project's queued run.
func TestEveryIDIsAuthorized(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		e := newAuthEnv(t, st, server.Options{}, true)
		ctx := context.Background()
		root := bearer(e.key(t, "root", store.AllProjects, "read,append,command,admin", 0))
		keys := []string{"alpha-all"}
		e.key(t, "alpha-all", "alpha", "read,append,command,admin", 0)
		for _, sc := range auth.Scopes {
			e.key(t, "alpha-"+string(sc), "alpha", string(sc), 0)
			keys = append(keys, "alpha-"+string(sc))
		}
		mk := func(sid, project string, extra ...string) {
			t.Helper()
			body := fmt.Sprintf(`{"session_id":%q,"project":%q,"agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":%s}}`, sid, project, allCaps)
			if r := e.call(t, "POST", "/v1/sessions", root, body); r.status != 201 {
				t.Fatalf("create %s: %d %s", sid, r.status, r.body)
			}
			if r := e.call(t, "POST", "/v1/sessions/"+sid+"/events", root, fixtureEvents(sid, extra...)); r.status != 201 {
				t.Fatalf("fixture events of %s: %d %s", sid, r.status, r.body)
			}
		}
		// The other project's session has the same message and run ids as every fixture of
		// alpha (so a fork that reached it would succeed), a run and message of its own, and
		// a queued run.
		mk("S-b", "beta",
			`"eventType":"message","payload":{"messageId":"m-b","role":"user","operation":"append","parts":["beta's secret"]}`,
			`"eventType":"status","runId":"r-b","sourceMessageId":"m-b","payload":{"status":"queued"}`)
		mk("S-a", "alpha")
		other := map[string]string{"session": "S-b", "run": "r-b", "message": "m-b"}
		missing := map[string]string{"session": "S-zz", "run": "r-zz", "message": "m-zz"}

		beta := func() string {
			t.Helper()
			list, _, err := st.ListSessions(ctx, store.ListFilter{Project: "beta", Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, s := range list {
				last, err := st.LastSequence(ctx, s.Record.SessionID)
				if err != nil {
					t.Fatal(err)
				}
				runs, err := st.Runs(ctx, s.Record.SessionID)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "%s %d %d\n", s.Record.SessionID, last, len(runs))
			}
			return b.String()
		}
		untouched := beta()

		table := e.srv.RouteTable()
		scopeOf := map[string]string{}
		for _, rt := range table {
			scopeOf[rt.Pattern] = rt.Scope
		}
		slots := idSlots(t, table)
		if len(slots) < 20 {
			t.Fatalf("only %d id slots derived from the API document: the derivation is broken", len(slots))
		}
		// send sends slot sl's base request tmpl with key to fixture session self, the slot
		// set to v; it returns the answer and the fresh id it used for @new.
		n := 0
		send := func(sl idSlot, tmpl, key, self, v string) (authResp, string) {
			t.Helper()
			n++
			fresh := fmt.Sprintf("n%d", n)
			seq, err := st.LastSequence(ctx, self)
			if err != nil {
				t.Fatal(err)
			}
			method, path, _ := strings.Cut(sl.pattern, " ")
			if sl.in == "path" {
				path = strings.ReplaceAll(path, "{"+sl.name+"}", v)
			}
			path = strings.NewReplacer("{id}", self, "{runId}", "r1", "{chatId}", self).Replace(path)
			if sl.in == "query" {
				path += "?" + url.Values{sl.name: {v}}.Encode()
			}
			body := strings.NewReplacer("@self", self, "@new", fresh, "@seq", strconv.FormatInt(seq, 10)).Replace(tmpl)
			if sl.in == "body" {
				var doc any
				if err := json.Unmarshal([]byte(body), &doc); err != nil {
					t.Fatalf("%s: base: %v", sl, err)
				}
				if strings.HasPrefix(sl.name, "/0/") {
					doc = []any{doc} // the field of an event in a batch
				}
				if !setPointer(doc, sl.name, v) {
					t.Fatalf("%s: the base request has no field %s: add it", sl, sl.name)
				}
				b, _ := json.Marshal(doc)
				body = string(b)
			}
			return e.call(t, method, path, bearer(e.keys[key]), body), fresh
		}
		own := func(kind, self string) string {
			return map[string]string{"session": self, "run": "r1", "message": "m1"}[kind]
		}
		stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
		fixtures := 0
		for _, sl := range slots {
			if why, ok := idExempt[sl.pattern+" "+sl.in+" "+sl.name]; ok {
				t.Logf("%s: exempt: %s", sl, why)
				continue
			}
			tmpl, hasBase := idBases[sl.base()]
			if !hasBase && sl.in == "body" {
				t.Errorf("%s: no base request in idBases: add one naming the fixture's own ids", sl)
				continue
			}
			// The base request with the fixture's own id must get past the checks of its
			// shape, so that the comparisons below are of requests that reach the id.
			fixtures++
			self := fmt.Sprintf("S-x%d", fixtures)
			mk(self, "alpha")
			if r, _ := send(sl, tmpl, "alpha-all", self, own(sl.kind, self)); r.status == 401 || r.status == 403 || r.status == 415 ||
				r.status >= 400 && slices.Contains([]string{string(contract.CodeMalformed), string(contract.CodeContractViolation)}, string(errorBody(t, r.body).Code)) {
				t.Errorf("%s: the base request with the session's own ids is refused: %d %s", sl, r.status, r.body)
			}
			for _, key := range keys {
				passes := key == "alpha-all" || key == "alpha-"+scopeOf[sl.pattern]
				var answers [2]string
				for i, v := range []string{other[sl.kind], missing[sl.kind]} {
					self := "S-a"
					if passes {
						// A fresh session for each request, so that the two answers compared
						// start from the same state.
						fixtures++
						self = fmt.Sprintf("S-x%d", fixtures)
						mk(self, "alpha")
					}
					r, fresh := send(sl, tmpl, key, self, v)
					answers[i] = fmt.Sprintf("%d %s", r.status, stamp.ReplaceAllString(strings.NewReplacer(v, "<ID>", self, "<SELF>", fresh, "<NEW>").Replace(r.body), "<T>"))
					if now := beta(); now != untouched {
						t.Fatalf("%s, key %s, id %s: the request changed project beta:\nbefore %s\nafter %s\nanswer %d %s", sl, key, v, untouched, now, r.status, r.body)
					}
				}
				if answers[0] != answers[1] {
					t.Errorf("%s, key %s: another project's id answers\n  %s\na missing one\n  %s", sl, key, answers[0], answers[1])
				}
			}
		}
		t.Logf("%d slots, %d requests, %d fixture sessions", len(slots), n, fixtures)
		for _, key := range keys {
			if !slices.Contains([]string{"alpha-all", "alpha-append"}, key) {
				continue
			}
			if r := e.call(t, "POST", "/v1/runs/claim", bearer(e.keys[key]), `{}`); r.status == 200 && strings.Contains(r.body, `"S-b"`) {
				t.Errorf("a claim with key %s took the other project's run: %s", key, r.body)
			}
		}
		if now := beta(); now != untouched {
			t.Errorf("project beta changed: before %s after %s", untouched, now)
		}
	})
}

// TestArchiveListFollowsTheProjectRule checks that the list of archives shows a key exactly
// the archives of the sessions it may see: a key of project "-" sees project "-"'s, not those
// of the sessions without a project (which "?project=-" asks for, with a key of every
// project).
func TestArchiveListFollowsTheProjectRule(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		e := newAuthEnv(t, open(t), server.Options{}, true, session.Options{ArchiveDir: t.TempDir()})
		root := bearer(e.key(t, "root", store.AllProjects, "read,append,admin", 0))
		dash := bearer(e.key(t, "dash", "-", "read", 0))
		alpha := bearer(e.key(t, "alpha", "alpha", "read", 0))
		for sid, project := range map[string]string{"S-none": "", "S-dash": `"project":"-",`, "S-al": `"project":"alpha",`} {
			body := fmt.Sprintf(`{"session_id":%q,%s"agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":{}}}`, sid, project)
			if r := e.call(t, "POST", "/v1/sessions", root, body); r.status != 201 {
				t.Fatalf("create %s: %d %s", sid, r.status, r.body)
			}
			if r := e.call(t, "POST", "/v1/sessions/"+sid+"/archive", root, ""); r.status >= 300 {
				t.Fatalf("archive %s: %d %s", sid, r.status, r.body)
			}
		}
		for _, c := range []struct {
			name, authz, query string
			want               []string
		}{
			{"key of -", dash, "", []string{"S-dash"}},
			{"key of -, ?project=-", dash, "?project=-", []string{"S-dash"}},
			{"key of alpha", alpha, "", []string{"S-al"}},
			{"key of *, ?project=-", root, "?project=-", []string{"S-none"}},
			{"key of *", root, "", []string{"S-al", "S-dash", "S-none"}},
		} {
			r := e.call(t, "GET", "/v1/archives"+c.query, c.authz, "")
			var list api.ArchiveList
			if err := json.Unmarshal([]byte(r.body), &list); r.status != 200 || err != nil {
				t.Fatalf("%s: %d %s", c.name, r.status, r.body)
			}
			var got []string
			for _, a := range list.Archives {
				got = append(got, a.SessionID)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: archives of %v, want %v", c.name, got, c.want)
			}
		}
	})
}

// TestLineageHidesOtherProjects checks that a lineage drawn for a key of one project shows a
// session of another project exactly as a missing one: an ancestor by its id only, where the
// chain stops, and no descendant. (Forks stay in their source's project, so such a lineage
// is written into the store here directly.)
func TestLineageHidesOtherProjects(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		e := newAuthEnv(t, st, server.Options{}, true)
		alpha := bearer(e.key(t, "alpha", "alpha", "read", 0))
		for _, s := range []struct{ id, project, parent string }{
			{"S-root", "beta", "S-gone2"}, // another project's ancestor, with an ancestor of its own
			{"S-m1", "alpha", "S-root"},
			{"S-cb", "beta", "S-m1"}, // another project's descendant
			{"S-m2", "alpha", "S-gone"},
		} {
			sess := storetest.NewSession(s.id, storetest.SessionSpec{Project: s.project})
			sess.Lineage = &contract.Lineage{ForkedFromThreadID: s.parent, ForkedFromMessageID: "m1", SourceRunID: "r1"}
			if err := st.CreateSession(context.Background(), sess); err != nil {
				t.Fatal(err)
			}
		}
		norm := func(body, self, parent string) string {
			return strings.NewReplacer(self, "<SELF>", parent, "<PARENT>").Replace(body)
		}
		other := e.call(t, "GET", "/v1/sessions/S-m1/lineage", alpha, "")
		missing := e.call(t, "GET", "/v1/sessions/S-m2/lineage", alpha, "")
		if other.status != 200 || norm(other.body, "S-m1", "S-root") != norm(missing.body, "S-m2", "S-gone") {
			t.Errorf("a lineage through another project's sessions:\n  %d %s\nthrough missing ones:\n  %d %s", other.status, other.body, missing.status, missing.body)
		}
	})
}

// searchBackend returns the search index of a store of either driver.
func searchBackend(t *testing.T, st store.Store) search.Backend {
	t.Helper()
	var (
		b   search.Backend
		err error
	)
	switch s := st.(type) {
	case *sqlite.Store:
		b, err = s.Search(context.Background())
	case *postgres.Store:
		b, err = s.Search(context.Background())
	default:
		t.Fatalf("no search index for %T", st)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSearchKeepsToTheProject checks that GET /v1/search answers a key of one project with
// that project's events only, whatever the query and filters, refuses to search another
// project by name, and that a key of every project sees both.
func TestSearchKeepsToTheProject(t *testing.T) {
	drivers(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		e := newAuthEnv(t, st, server.Options{Search: searchBackend(t, st)}, true)
		root := bearer(e.key(t, "root", store.AllProjects, "read,append,admin", 0))
		alpha := bearer(e.key(t, "alpha", "alpha", "read", 0))
		for _, s := range []struct{ id, project string }{{"S-a", "alpha"}, {"S-b", "beta"}, {"S-b2", "beta"}} {
			body := fmt.Sprintf(`{"session_id":%q,"project":%q,"agent_id":"a","role":"implementer","snapshot":{"mode":"work","modelId":"m","capabilities":%s}}`, s.id, s.project, allCaps)
			if r := e.call(t, "POST", "/v1/sessions", root, body); r.status != 201 {
				t.Fatalf("create %s: %d %s", s.id, r.status, r.body)
			}
			secret := `"eventType":"terminal","payload":{"terminalId":"t","stream":"stdout","chunk":"secretword of ` + s.project + ` in billing/invoice.go"}`
			tool := `"eventType":"tool","payload":{"toolCallId":"tc","toolName":"shell","status":"completed","input":{"command":"cat billing/invoice.go"}}`
			if r := e.call(t, "POST", "/v1/sessions/"+s.id+"/events", root, fixtureEvents(s.id, secret, tool)); r.status != 201 {
				t.Fatalf("events of %s: %d %s", s.id, r.status, r.body)
			}
		}
		if _, err := e.srv.SearchIndexer().CatchUp(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		sessionsOf := func(authz, query string) (int, map[string]bool) {
			r := e.call(t, "GET", "/v1/search?"+query, authz, "")
			var resp api.SearchResponse
			if r.status == 200 {
				if err := json.Unmarshal([]byte(r.body), &resp); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]bool{}
			for _, h := range resp.Results {
				got[h.SessionID] = true
			}
			return r.status, got
		}
		for _, q := range []string{"q=secretword", "q=fixed", "q=secret*", "contains=invoice.go", "kind=terminal", "kind=status&runStatus=completed",
			"q=secretword&agent=a", "q=secretword&order=relevance", "q=secretword&status=running", "q=beta", "q=secretword&limit=1"} {
			status, got := sessionsOf(alpha, q)
			if status != 200 || (len(got) == 0) != (q == "q=beta") || got["S-b"] || got["S-b2"] {
				t.Errorf("key of alpha, %s: %d, sessions %v; want 200 and S-a only", q, status, got)
			}
			if status, got := sessionsOf(root, q); q != "q=secretword&limit=1" && q != "q=beta" && (status != 200 || !got["S-a"] || !got["S-b"]) {
				t.Errorf("key of every project, %s: %d, sessions %v; want both projects", q, status, got)
			}
		}
		if status, _ := sessionsOf(alpha, "q=secretword&project=beta"); status != 403 {
			t.Errorf("key of alpha, project=beta: %d, want 403", status)
		}
		if status, got := sessionsOf(root, "q=secretword&project=beta"); status != 200 || got["S-a"] || !got["S-b"] {
			t.Errorf("key of every project, project=beta: %d %v", status, got)
		}
	})
}
