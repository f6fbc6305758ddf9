package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error with the HTTP status and code the API answers with. The
// server turns it into an ErrorBody; the client turns an ErrorBody back into
// one.
type Error struct {
	Status  int    // HTTP status
	Code    string // machine-readable, e.g. "invalid_field"
	Message string // a sentence for people
	Field   string // the offending input field, when there is one
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

// Is lets errors.Is match an *Error against the sentinels below by status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == "" && t.Status == e.Status
}

// Sentinels for errors.Is: they match any *Error of the same status.
var (
	ErrNotFound = &Error{Status: http.StatusNotFound}
	ErrConflict = &Error{Status: http.StatusConflict}
	ErrInvalid  = &Error{Status: http.StatusUnprocessableEntity}
)

// Invalid returns a 422 naming the field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid_field", Field: field, Message: fmt.Sprintf(format, args...)}
}

// BadRequest returns a 400: the request could not be read at all.
func BadRequest(code, field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns a 404.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

// Conflict returns a 409: the request is fine but the state forbids it.
func Conflict(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error, or a 500 wrapping it.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}
