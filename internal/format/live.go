package format

import (
	"bytes"
	"io"
	"strings"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/termsafe"
)

// Terminal control sequences of the in-place redraws (ECMA-48).
const (
	cursorHome = "\x1b[H" // cursor to the top left
	clearToEnd = "\x1b[J" // erase from the cursor to the end of the screen
	clearLine  = "\x1b[K" // erase from the cursor to the end of the line
)

// LiveView prints successive live tables (WriteFlows) to one writer. On a
// terminal (redraw) each table replaces the last in place, like top: the
// frame is written in one Write that starts with cursor home and clear to
// the end of the screen. Elsewhere (a pipe, a file) the tables follow one
// another exactly as WriteFlows writes them. Not safe for concurrent use.
type LiveView struct {
	w      io.Writer
	redraw bool
	frame  bytes.Buffer // reused: one Write per frame, so the screen never shows half a table
}

// NewLiveView returns a LiveView on w; redraw says w is a terminal.
func NewLiveView(w io.Writer, redraw bool) *LiveView { return &LiveView{w: w, redraw: redraw} }

// WriteFlows prints one table of recs under title (WriteFlows).
func (v *LiveView) WriteFlows(title string, recs []flow.Record) error {
	if !v.redraw {
		return WriteFlows(v.w, title, recs)
	}
	v.frame.Reset()
	v.frame.WriteString(cursorHome + clearToEnd)
	if err := WriteFlows(&v.frame, termsafe.Message(title), recs); err != nil {
		return err
	}
	_, err := v.w.Write(v.frame.Bytes())
	return err
}

// StatusLine is one line of status redrawn in place on a terminal (a
// carriage return, the text, clear to the end of the line); give it only
// a terminal. Clear removes it, so what follows starts on a clean line.
// Not safe for concurrent use.
type StatusLine struct {
	w     io.Writer
	shown bool
}

// NewStatusLine returns a StatusLine on the terminal w.
func NewStatusLine(w io.Writer) *StatusLine { return &StatusLine{w: w} }

// Set replaces the line with text, escaped (termsafe.Message) and cut at
// its first newline.
func (s *StatusLine) Set(text string) error {
	text, _, _ = strings.Cut(text, "\n")
	s.shown = true
	_, err := io.WriteString(s.w, "\r"+termsafe.Message(text)+clearLine)
	return err
}

// Clear erases the line if one was shown.
func (s *StatusLine) Clear() error {
	if !s.shown {
		return nil
	}
	s.shown = false
	_, err := io.WriteString(s.w, "\r"+clearLine)
	return err
}
