package wasmop

import "fmt"

// Level is the severity of a log line.
type Level uint32

// The log levels, in the contract's order.
const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// Log writes a structured log line into the host's log, inside the reconcile's span; fields
// are key, value pairs.
func Log(level Level, message string, fields ...string) {
	hostLog(level, message, fields)
}

// Info logs at level info; the message is formatted as by fmt.Sprintf.
func (c *Context) Info(format string, args ...any) { Log(LevelInfo, fmt.Sprintf(format, args...)) }

// Warn logs at level warn; the message is formatted as by fmt.Sprintf.
func (c *Context) Warn(format string, args ...any) { Log(LevelWarn, fmt.Sprintf(format, args...)) }
