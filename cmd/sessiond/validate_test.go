package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

const (
	valOKEvent  = `{"contract":"AgentSessionEvent","eventId":"e1","sessionId":"S-1","sequence":1,"idempotencyKey":"k1","occurredAt":"2026-03-01T12:00:00Z","eventType":"reasoning","payload":{"reasoningId":"r","text":"thinking","status":"completed"}}`
	valBadEvent = `{"contract":"AgentSessionEvent","eventId":"e2","sessionId":"S-1","sequence":-1,"idempotencyKey":"k2","occurredAt":"2026-03-01T12:00:00Z","eventType":"reasoning","payload":{"reasoningId":"r","text":"t","status":"done"}}`
	valOKCmd    = `{"contract":"AgentSessionCommand","commandId":"c1","sessionId":"S-1","runId":"r1","idempotencyKey":"k1","expectedSequence":-1,"issuedAt":"2026-03-01T12:00:00Z","commandType":"stop","payload":{}}`
)

func runValidateCLI(stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(append([]string{"validate"}, args...), stdin, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateHuman(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		in       string
		code     int
		stdout   string
		inStderr string
	}{
		{"all valid", nil, valOKEvent + "\n" + valOKEvent + "\n", 0, "line 1: ok\nline 2: ok\n2 valid, 0 invalid\n", ""},
		{"blank lines skipped but counted", nil, "\n" + valOKEvent + "\n  \n\n" + valBadEvent + "\n", 1,
			"line 2: ok\nline 5: invalid\n  /sequence: is -1; must be at least 0 (minimum)\n  /payload/status: \"done\" is not one of: streaming, completed (enum)\n1 valid, 1 invalid\n", ""},
		{"not JSON", nil, "{nope\n", 1, "line 1: invalid\n  /: expected a string object key (at byte 1) (json)\n0 valid, 1 invalid\n", ""},
		{"rule problem", nil, strings.Replace(valOKEvent, `"eventType":"reasoning","payload":{"reasoningId":"r","text":"thinking","status":"completed"}`, `"runId":"r1","eventType":"summary","payload":{"summaryId":"s","runId":"r2","text":"","highlights":[],"pendingItems":[],"status":"completed"}`, 1) + "\n", 1,
			"line 1: invalid\n  /runId: a summary event's runId must equal payload.runId (\"r2\") (summary-run-id)\n0 valid, 1 invalid\n", ""},
		{"CRLF and no final newline", nil, valOKEvent + "\r\n" + valOKEvent, 0, "line 1: ok\nline 2: ok\n2 valid, 0 invalid\n", ""},
		{"empty input", nil, "", 0, "0 valid, 0 invalid\n", ""},
		{"dash is stdin", []string{"-"}, valOKEvent + "\n", 0, "line 1: ok\n1 valid, 0 invalid\n", ""},
		{"kind command", []string{"--kind", "command"}, valOKCmd + "\n" + valOKEvent + "\n", 1, "", ""},
		{"kind session", []string{"--kind=session"}, `{"schema_version":1,"session_id":"X","agent_id":"a","role":"user","status":"running","started_at":"2026-03-01T12:00:00Z"}` + "\n", 1,
			"line 1: invalid\n  /session_id: session_id \"X\" must start with \"S-\" (session-id-prefix)\n0 valid, 1 invalid\n", ""},
		{"kind run", []string{"--kind", "run"}, `{"runId":"r1","sessionId":"S-1","sourceMessageId":"m1","status":"completed","startedAt":"2026-03-01T12:00:00Z"}` + "\n", 1,
			"line 1: invalid\n  /completedAt: a completed run needs completedAt (run-invariant)\n  /durationMs: a completed run needs durationMs (run-invariant)\n0 valid, 1 invalid\n", ""},
		{"kind command-result", []string{"--kind", "command-result"}, `{"contract":"AgentSessionCommandResult","commandId":"c1","sessionId":"S-1","idempotencyKey":"k1","outcome":"accepted","sessionStatus":"running","resultEventIds":[],"occurredAt":"2026-03-01T12:00:00Z"}` + "\n", 0,
			"line 1: ok\n1 valid, 0 invalid\n", ""},
		{"kind view", []string{"--kind", "view"}, `{"sessionId":"S-1","snapshot":{"mode":"chat","modelId":"m","capabilities":{}},"status":"running","events":[` + valOKEvent + `],"lastSequence":1}` + "\n", 0,
			"line 1: ok\n1 valid, 0 invalid\n", ""},
		{"unknown kind", []string{"--kind", "snapshot"}, "", 2, "", "hint:"},
		{"unknown flag", []string{"--strict"}, "", 2, "", "sessiond validate: flag provided but not defined: -strict\nusage: sessiond validate [file|-] [flags]"},
		{"flag after the file", []string{"-", "--json"}, valOKEvent + "\n", 0, `{"line":1,"valid":true}` + "\n", ""},
		{"two files", []string{"a.jsonl", "b.jsonl"}, "", 2, "", `sessiond validate: unexpected argument "b.jsonl": it takes only [file|-]`},
		{"missing file", []string{"/nonexistent/events.jsonl"}, "", 2, "", "hint:"},
		{"bad max-bytes", []string{"--max-bytes", "0"}, "", 2, "", "hint:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runValidateCLI(strings.NewReader(tc.in), tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if tc.stdout != "" && out != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, tc.stdout)
			}
			if tc.inStderr != "" && !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("stderr %q lacks %q", errOut, tc.inStderr)
			}
			if tc.code == 2 && out != "" {
				t.Errorf("usage error wrote to stdout: %q", out)
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	in := valOKEvent + "\n\n" + valBadEvent + "\n" + "[1,\n" + valOKEvent
	code, out, errOut := runValidateCLI(strings.NewReader(in), "--json")
	if code != 1 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d output lines, want 4 (one per document):\n%s", len(lines), out)
	}
	type problem struct{ Path, Rule, Layer, Message string }
	type result struct {
		Line   int
		Valid  bool
		Errors []problem
	}
	want := []struct {
		line  int
		valid bool
		rules []string
	}{{1, true, nil}, {3, false, []string{"minimum", "enum"}}, {4, false, []string{"json"}}, {5, true, nil}}
	for i, l := range lines {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		var r result
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if r.Line != want[i].line || r.Valid != want[i].valid || len(r.Errors) != len(want[i].rules) {
			t.Errorf("got %s, want line %d valid %v rules %v", l, want[i].line, want[i].valid, want[i].rules)
			continue
		}
		for j, p := range r.Errors {
			if p.Rule != want[i].rules[j] || p.Message == "" || p.Layer == "" {
				t.Errorf("line %d problem %d: %+v", r.Line, j, p)
			}
		}
	}
	if lines[0] != `{"line":1,"valid":true}` {
		t.Errorf("valid line printed as %s", lines[0])
	}
	if !strings.HasPrefix(lines[1], `{"line":3,"valid":false,"errors":[{"path":"/sequence","rule":"minimum","layer":"schema","message":`) {
		t.Errorf("invalid line printed as %s", lines[1])
	}
}

func TestValidateFileAndLongLines(t *testing.T) {
	dir := t.TempDir()
	long := strings.Replace(valOKEvent, `"text":"thinking"`, `"text":"`+strings.Repeat("ü", 300_000)+`"`, 1) // 600 KB, > bufio's 64K
	huge := strings.Replace(valOKEvent, `"text":"thinking"`, `"text":"`+strings.Repeat("x", 2<<20)+`"`, 1)   // over the 1 MiB default
	file := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(file, []byte(long+"\n"+huge+"\n"+valOKEvent+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runValidateCLI(nil, file)
	wantOut := "line 1: ok\nline 2: invalid\n  /: line is longer than the limit of 1048576 bytes (--max-bytes) (maxBytes)\nline 3: ok\n2 valid, 1 invalid\n"
	if code != 1 || out != wantOut {
		t.Errorf("exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", code, out, wantOut, errOut)
	}
	// a smaller limit, and a line exactly at it
	exact := valOKEvent
	code, out, _ = runValidateCLI(strings.NewReader(exact+"\r\n"+exact+" \n"), "--max-bytes", validateItoa(len(exact)), "--json")
	if code != 1 || out != `{"line":1,"valid":true}`+"\n"+`{"line":2,"valid":false,"errors":[{"path":"","rule":"maxBytes","layer":"json","message":"line is longer than the limit of `+validateItoa(len(exact))+` bytes (--max-bytes)"}]}`+"\n" {
		t.Errorf("exit %d, stdout:\n%s", code, out)
	}
}

func validateItoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestValidateReadError(t *testing.T) {
	in := io.MultiReader(strings.NewReader(valOKEvent+"\n"), iotest.ErrReader(errors.New("disk on fire")))
	code, out, errOut := runValidateCLI(in)
	if code != 2 || !strings.Contains(errOut, "disk on fire") || !strings.Contains(errOut, "hint:") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if out != "line 1: ok\n" {
		t.Errorf("stdout %q: the lines before the error should be reported", out)
	}
}

func TestValidateHelp(t *testing.T) {
	code, out, errOut := runValidateCLI(nil, "-h")
	if code != 0 || !strings.Contains(out, "usage: sessiond validate") || !strings.Contains(out, "-kind") || errOut != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var list bytes.Buffer
	run([]string{"help"}, nil, &list, io.Discard)
	if !strings.Contains(list.String(), "validate") {
		t.Errorf("help does not list validate:\n%s", list.String())
	}
}
