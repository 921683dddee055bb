package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sessiond/sessiond/contract"
)

// DefaultOutputLimit is the output a hosted terminal keeps when the agent sets no
// outputByteLimit: 1 MiB (the oldest output is dropped first).
const DefaultOutputLimit = 1 << 20

// Workspace serves the client-side methods an agent calls to touch the machine
// (fs/read_text_file, fs/write_text_file, terminal/*) inside Root, and refuses any path
// outside it (after following symbolic links). Record hears what changed, as contract events:
// a file written (workspace-file), a terminal's input, output and exit (terminal). Reading a
// file changes nothing and is not recorded.
type Workspace struct {
	Root   string
	Record func(...Out)

	mu    sync.Mutex
	n     int
	terms map[string]*terminal
}

// NewWorkspace returns a workspace rooted at root (made absolute, links resolved).
func NewWorkspace(root string, record func(...Out)) (*Workspace, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("root %q: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("root %q: %w", root, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("root %q is not a directory", root)
	}
	if record == nil {
		record = func(...Out) {}
	}
	return &Workspace{Root: real, Record: record, terms: map[string]*terminal{}}, nil
}

// resolve returns the real path of p, which must be absolute and, links followed, inside the
// root. A path that does not exist yet is resolved through its nearest existing ancestor.
func (w *Workspace) resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", Errorf(CodeInvalidParams, "path %q is not absolute (ACP paths are absolute)", p)
	}
	clean := filepath.Clean(p)
	rest := ""
	cur := clean
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			full := filepath.Join(real, rest)
			if !w.inside(full) {
				return "", Errorf(CodeInvalidParams, "path %q is outside the workspace root %s", p, w.Root)
			}
			return full, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", Errorf(CodeInternalError, "path %q: %v", p, err)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", Errorf(CodeInvalidParams, "path %q is outside the workspace root %s", p, w.Root)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func (w *Workspace) inside(p string) bool {
	rel, err := filepath.Rel(w.Root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// rel is p relative to the root, with slashes ("." for the root).
func (w *Workspace) rel(p string) string {
	r, err := filepath.Rel(w.Root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// ReadTextFile serves fs/read_text_file: the file's text, from line (1-based) for limit lines
// when given.
func (w *Workspace) ReadTextFile(req ReadTextFileRequest) (*ReadTextFileResponse, error) {
	p, err := w.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, Errorf(CodeResourceNotFound, "%s does not exist", req.Path)
		}
		return nil, Errorf(CodeInternalError, "read %s: %v", req.Path, err)
	}
	if !utf8.Valid(b) {
		return nil, Errorf(CodeInvalidParams, "%s is not UTF-8 text", req.Path)
	}
	text := string(b)
	if req.Line != nil || req.Limit != nil {
		lines := strings.SplitAfter(text, "\n")
		from := 0
		if req.Line != nil && *req.Line > 0 {
			from = min(int(*req.Line)-1, len(lines))
		}
		to := len(lines)
		if req.Limit != nil {
			to = min(from+int(*req.Limit), len(lines))
		}
		text = strings.Join(lines[from:to], "")
	}
	return &ReadTextFileResponse{Content: text}, nil
}

// WriteTextFile serves fs/write_text_file: it creates or replaces the file (and its missing
// directories) and records a workspace-file upsert.
func (w *Workspace) WriteTextFile(req WriteTextFileRequest) error {
	p, err := w.resolve(req.Path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return Errorf(CodeInternalError, "write %s: %v", req.Path, err)
	}
	if err := os.WriteFile(p, []byte(req.Content), 0o644); err != nil {
		return Errorf(CodeInternalError, "write %s: %v", req.Path, err)
	}
	size := int64(len(req.Content))
	mime := "text/plain; charset=utf-8"
	w.Record(Out{"workspace-file", &contract.WorkspaceFilePayload{Path: w.rel(p), Operation: "upsert", MimeType: &mime, Size: &size}})
	return nil
}

// terminal is a command the workspace runs for the agent.
type terminal struct {
	id    string
	cmd   *exec.Cmd
	limit int
	done  chan struct{}

	mu        sync.Mutex
	out       []byte
	truncated bool
	exit      *TerminalExitStatus
}

// CreateTerminal serves terminal/create: it starts the command (cwd inside the root, the root
// by default) and records its command line (stdin), output (stdout, stderr) and end (status,
// with the exit code) as terminal events.
func (w *Workspace) CreateTerminal(req CreateTerminalRequest) (*CreateTerminalResponse, error) {
	if req.Command == "" {
		return nil, Errorf(CodeInvalidParams, "command is empty")
	}
	dir := w.Root
	if req.Cwd != nil && *req.Cwd != "" {
		p, err := w.resolve(*req.Cwd)
		if err != nil {
			return nil, err
		}
		dir = p
	}
	cmd := exec.Command(req.Command, req.Args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for _, e := range req.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	limit := DefaultOutputLimit
	if req.OutputByteLimit != nil {
		limit = int(min(*req.OutputByteLimit, uint64(1<<40)))
	}
	w.mu.Lock()
	w.n++
	id := "term-" + strconv.Itoa(w.n)
	w.mu.Unlock()
	t := &terminal{id: id, cmd: cmd, limit: limit, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, Errorf(CodeInternalError, "terminal: %v", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, Errorf(CodeInternalError, "terminal: %v", err)
	}
	line := strings.Join(append([]string{req.Command}, req.Args...), " ")
	if err := cmd.Start(); err != nil {
		return nil, Errorf(CodeInternalError, "start %q: %v", line, err)
	}
	w.Record(Out{"terminal", &contract.TerminalPayload{TerminalID: id, Stream: "stdin", Chunk: "$ " + line + "\n"}})
	w.mu.Lock()
	w.terms[id] = t
	w.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go w.pump(t, "stdout", stdout, &wg)
	go w.pump(t, "stderr", stderr, &wg)
	go func() {
		wg.Wait()
		err := cmd.Wait()
		st := &TerminalExitStatus{}
		var code *int64
		if cmd.ProcessState != nil {
			if c := cmd.ProcessState.ExitCode(); c >= 0 {
				u := uint32(c)
				st.ExitCode = &u
				c64 := int64(c)
				code = &c64
			} else {
				s := signalName(cmd.ProcessState)
				st.Signal = &s
			}
		} else if err != nil {
			s := err.Error()
			st.Signal = &s
		}
		t.mu.Lock()
		t.exit = st
		t.mu.Unlock()
		chunk := "exited"
		if st.Signal != nil {
			chunk = "killed: " + *st.Signal
		} else if code != nil {
			chunk = "exit status " + strconv.FormatInt(*code, 10)
		}
		w.Record(Out{"terminal", &contract.TerminalPayload{TerminalID: id, Stream: "status", Chunk: chunk + "\n", ExitCode: code}})
		close(t.done)
	}()
	return &CreateTerminalResponse{TerminalID: id}, nil
}

// pump copies one of the command's outputs into its buffer and the log.
func (w *Workspace) pump(t *terminal, stream string, r io.Reader, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	var carry []byte // an incomplete UTF-8 sequence at the end of the last read
	for {
		n, err := r.Read(buf)
		if n > 0 {
			data := append(carry, buf[:n]...)
			cut := validPrefix(data)
			carry = append([]byte(nil), data[cut:]...)
			if cut > 0 {
				chunk := strings.ToValidUTF8(string(data[:cut]), "\uFFFD")
				t.add(chunk)
				w.Record(Out{"terminal", &contract.TerminalPayload{TerminalID: t.id, Stream: stream, Chunk: chunk}})
			}
		}
		if err != nil {
			if len(carry) > 0 {
				chunk := strings.ToValidUTF8(string(carry), "\uFFFD")
				t.add(chunk)
				w.Record(Out{"terminal", &contract.TerminalPayload{TerminalID: t.id, Stream: stream, Chunk: chunk}})
			}
			return
		}
	}
}

// validPrefix is the length of data without an incomplete UTF-8 sequence at its end.
func validPrefix(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return i
			}
			break
		}
	}
	return len(data)
}

// add appends output, dropping the oldest beyond the limit at a character boundary.
func (t *terminal) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.out = append(t.out, s...)
	if len(t.out) > t.limit {
		cut := len(t.out) - t.limit
		for cut < len(t.out) && !utf8.RuneStart(t.out[cut]) {
			cut++
		}
		t.out = append(t.out[:0], t.out[cut:]...)
		t.truncated = true
	}
}

func (w *Workspace) term(id string) (*terminal, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.terms[id]
	if t == nil {
		return nil, Errorf(CodeResourceNotFound, "no terminal %q (released, or never created)", id)
	}
	return t, nil
}

// TerminalOutput serves terminal/output.
func (w *Workspace) TerminalOutput(id string) (*TerminalOutputResponse, error) {
	t, err := w.term(id)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return &TerminalOutputResponse{Output: string(t.out), Truncated: t.truncated, ExitStatus: t.exit}, nil
}

// Output returns a terminal's output so far and its exit code, for the tool content that
// embeds it ([Mapper].Terminal).
func (w *Workspace) Output(id string) (string, *int64, bool) {
	t, err := w.term(id)
	if err != nil {
		return "", nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var code *int64
	if t.exit != nil && t.exit.ExitCode != nil {
		c := int64(*t.exit.ExitCode)
		code = &c
	}
	return string(t.out), code, true
}

// WaitForExit serves terminal/wait_for_exit.
func (w *Workspace) WaitForExit(ctx context.Context, id string) (*TerminalExitStatus, error) {
	t, err := w.term(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, Errorf(CodeInternalError, "waiting for terminal %s: %v", id, ctx.Err())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exit, nil
}

// Kill serves terminal/kill: the command is killed, the terminal stays readable.
func (w *Workspace) Kill(id string) error {
	t, err := w.term(id)
	if err != nil {
		return err
	}
	select {
	case <-t.done:
	default:
		_ = t.cmd.Process.Kill()
	}
	return nil
}

// Release serves terminal/release: the command is killed if still running and the terminal
// forgotten.
func (w *Workspace) Release(id string) error {
	if err := w.Kill(id); err != nil {
		return err
	}
	w.mu.Lock()
	t := w.terms[id]
	delete(w.terms, id)
	w.mu.Unlock()
	<-t.done
	return nil
}

// Close kills every terminal still running.
func (w *Workspace) Close() {
	w.mu.Lock()
	ids := make([]string, 0, len(w.terms))
	for id := range w.terms {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	for _, id := range ids {
		_ = w.Release(id)
	}
}

// Serve answers the workspace's methods; ok is false for any other method.
func (w *Workspace) Serve(ctx context.Context, method string, params json.RawMessage) (res any, ok bool, err error) {
	decode := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(params))
		if err := d.Decode(v); err != nil {
			return Errorf(CodeInvalidParams, "%s: %v", method, err)
		}
		return nil
	}
	switch method {
	case MethodReadTextFile:
		var req ReadTextFileRequest
		if err := decode(&req); err != nil {
			return nil, true, err
		}
		r, err := w.ReadTextFile(req)
		return r, true, err
	case MethodWriteTextFile:
		var req WriteTextFileRequest
		if err := decode(&req); err != nil {
			return nil, true, err
		}
		if err := w.WriteTextFile(req); err != nil {
			return nil, true, err
		}
		return empty{}, true, nil
	case MethodTerminalCreate:
		var req CreateTerminalRequest
		if err := decode(&req); err != nil {
			return nil, true, err
		}
		r, err := w.CreateTerminal(req)
		return r, true, err
	case MethodTerminalOutput, MethodTerminalWait, MethodTerminalKill, MethodTerminalRelease:
		var req TerminalRequest
		if err := decode(&req); err != nil {
			return nil, true, err
		}
		switch method {
		case MethodTerminalOutput:
			r, err := w.TerminalOutput(req.TerminalID)
			return r, true, err
		case MethodTerminalWait:
			r, err := w.WaitForExit(ctx, req.TerminalID)
			return r, true, err
		case MethodTerminalKill:
			return empty{}, true, w.Kill(req.TerminalID)
		default:
			return empty{}, true, w.Release(req.TerminalID)
		}
	}
	return nil, false, nil
}
