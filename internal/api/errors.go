package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/weir-dev/weir/internal/query"
)

// Error is the body of every error answer: {"error": {...}}.
type Error struct {
	Status  int    `json:"status"`          // the HTTP status, repeated
	Code    string `json:"code"`            // stable, machine-readable: bad_condition, busy, timeout, ...
	Message string `json:"message"`         // what is wrong and what to do, for people
	Param   string `json:"param,omitempty"` // the request parameter at fault
	// For a mistake in the group-by or the condition: the text, the byte
	// offsets of the offending token in it, and the CLI's rendering with
	// carets under the token.
	Input *string `json:"input,omitempty"`
	Pos   *int    `json:"pos,omitempty"`
	End   *int    `json:"end,omitempty"`
	Caret string  `json:"caret,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Error codes.
const (
	CodeBadRequest   = "bad_request"   // a parameter is missing, unknown or malformed
	CodeBadGroup     = "bad_group"     // the group-by does not parse
	CodeBadCondition = "bad_condition" // the condition does not parse
	CodeNotFound     = "not_found"     // no such route
	CodeNoLive       = "no_live"       // the backend has no live flows
	CodeMethod       = "method_not_allowed"
	CodeBusy         = "busy"      // every query slot is taken: retry after Retry-After seconds
	CodeTimeout      = "timeout"   // the query ran past the time limit
	CodeTooLarge     = "too_large" // the answer has more rows than the server returns
	CodeUnavailable  = "unavailable"
	CodeInternal     = "internal"
)

func badParam(param, format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Param: param, Message: sprintf(format, a...)}
}

// syntaxError turns a query-string mistake into an Error with the caret
// the CLI prints.
func syntaxError(param, code string, err error) *Error {
	var se *query.SyntaxError
	if !errors.As(err, &se) {
		return &Error{Status: http.StatusBadRequest, Code: code, Param: param, Message: param + ": " + err.Error()}
	}
	pos, end := se.Pos, max(se.End, se.Pos)
	return &Error{Status: http.StatusBadRequest, Code: code, Param: param, Message: param + ": " + se.Msg,
		Input: &se.Input, Pos: &pos, End: &end, Caret: se.Caret()}
}

// writeError sends e as JSON; Retry-After for busy.
func writeError(rw http.ResponseWriter, e *Error) {
	h := rw.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if e.Code == CodeBusy {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	rw.WriteHeader(e.Status)
	b, _ := json.MarshalIndent(struct {
		Error *Error `json:"error"`
	}{e}, "", "  ") // cannot fail: strings and ints
	_, _ = rw.Write(append(b, '\n'))
}

// retryAfterSeconds is what a busy answer tells the client to wait.
const retryAfterSeconds = 1
