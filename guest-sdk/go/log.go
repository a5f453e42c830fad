package wasmop

import (
	"fmt"
	"runtime"

	"wasmop.dev/guest/abi"
)

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

//go:wasmimport wasmop:plugin/host@0.8.0 log
func hostLog(level, message, messageLen, fields, fieldsLen uint32)

var logField = abi.Record(abi.String, abi.String)

// Log writes a structured log line into the host's log, inside the reconcile's span; fields
// are key, value pairs.
func Log(level Level, message string, fields ...string) {
	pairs := make([]any, 0, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		pairs = append(pairs, []any{fields[i], fields[i+1]})
	}
	list, n := abi.LowerList(logField, pairs)
	hostLog(uint32(level), abi.Address(message), uint32(len(message)), list, n)
	runtime.KeepAlive(message)
	abi.CallDone()
}

// Info logs at level info; the message is formatted as by fmt.Sprintf.
func (c *Context) Info(format string, args ...any) { Log(LevelInfo, fmt.Sprintf(format, args...)) }

// Warn logs at level warn; the message is formatted as by fmt.Sprintf.
func (c *Context) Warn(format string, args ...any) { Log(LevelWarn, fmt.Sprintf(format, args...)) }
