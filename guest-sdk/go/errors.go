package wasmop

import "fmt"

// ErrorKind says whether and how a failed reconcile is retried.
type ErrorKind uint32

// The kinds of failure, in the contract's order.
const (
	// Transient: something that may succeed later, retried with backoff.
	Transient ErrorKind = iota
	// Permanent: retrying will not help; no retry until the object changes.
	Permanent
	// Invalid: the primary itself is invalid (it does not match the plugin's type); not retried.
	Invalid
)

// Error is a failed reconcile. Any other error a reconciler returns is transient.
type Error struct {
	// Kind says whether the host retries.
	Kind ErrorKind
	// Message says what went wrong.
	Message string
}

func (e *Error) Error() string { return e.Message }

// TransientError is a failure that may go away: the host retries with backoff.
func TransientError(format string, args ...any) *Error {
	return &Error{Transient, fmt.Sprintf(format, args...)}
}

// PermanentError is a failure retrying will not fix: no retry until the object changes.
func PermanentError(format string, args ...any) *Error {
	return &Error{Permanent, fmt.Sprintf(format, args...)}
}

// InvalidError says the primary itself is invalid: not retried.
func InvalidError(format string, args ...any) *Error {
	return &Error{Invalid, fmt.Sprintf(format, args...)}
}

// asError is err as an Error: its own, or a transient one with its message.
func asError(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return &Error{Transient, err.Error()}
}

func (e *Error) lower() any { return caseOf(uint32(e.Kind), e.Message) }
