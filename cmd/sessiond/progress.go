package main

import (
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"io"
	"os"
	"strings"

	"github.com/sessiond/sessiond/session"
)

// isTerminal reports whether w is a terminal: an *os.File on a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressDrawer draws a long operation's progress on one line of a terminal, redrawn with
// \r: "archiving S: reading 41234/100000 events".
type progressDrawer struct {
	w     io.Writer
	what  string // "archiving S"
	width int    // of the line drawn last, to blank it
}

// progressFor returns the drawer for an operation, or nil (quiet) when the output is for a
// program (--json) or stderr is not a terminal.
func progressFor(stderr io.Writer, jsonOut bool, what string) *progressDrawer {
	if jsonOut || !isTerminal(stderr) {
		return nil
	}
	return &progressDrawer{w: stderr, what: what}
}

// phaseWord says what a phase does. A counted phase is reported event by event and shows
// done/total; the others are reported at their start and end and show the total only.
type phaseWord struct {
	verb    string
	counted bool
}

// phaseWords are the words of each phase of wire.Progress.
var phaseWords = map[string]phaseWord{
	session.PhaseRead:    {"reading", true},
	session.PhaseWrite:   {"writing the archive of", false},
	session.PhaseCompact: {"compacting", false},
	session.PhaseVerify:  {"verifying", true},
	session.PhaseImport:  {"importing", false},
}

// line is the text drawn for p.
func (d *progressDrawer) line(p wire.Progress) string {
	w, ok := phaseWords[p.Phase]
	if !ok {
		w = phaseWord{p.Phase, true} // a phase this client does not know yet
	}
	if w.counted {
		return fmt.Sprintf("%s: %s %d/%d events", d.what, w.verb, p.Done, p.Total)
	}
	return fmt.Sprintf("%s: %s %d events", d.what, w.verb, p.Total)
}

// callback is the client's progress callback: nil for a nil drawer.
func (d *progressDrawer) callback() func(wire.Progress) {
	if d == nil {
		return nil
	}
	return d.draw
}

// draw redraws the line.
func (d *progressDrawer) draw(p wire.Progress) { d.drawLine(d.line(p)) }

// clear blanks the line, if one was drawn, so that what follows starts on a clean line.
func (d *progressDrawer) clear() {
	if d == nil || d.width == 0 {
		return
	}
	fmt.Fprintf(d.w, "\r%s\r", strings.Repeat(" ", d.width))
	d.width = 0
}

// drawLine redraws the line with s, for operations that are not phases of wire.Progress.
func (d *progressDrawer) drawLine(s string) {
	pad := ""
	if n := d.width - len(s); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(d.w, "\r%s%s", s, pad)
	d.width = len(s)
}
