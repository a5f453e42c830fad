//go:build wasip1

package wasmop

import (
	"runtime"

	"wasmop.dev/guest/abi"
)

//go:wasmimport wasmop:plugin/host@0.8.1 log
func importLog(level, message, messageLen, fields, fieldsLen uint32)

var logField = abi.Record(abi.String, abi.String)

// hostLog is the host's `log` import.
func hostLog(level Level, message string, fields []string) {
	pairs := make([]any, 0, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		pairs = append(pairs, []any{fields[i], fields[i+1]})
	}
	list, n := abi.LowerList(logField, pairs)
	importLog(uint32(level), abi.Address(message), uint32(len(message)), list, n)
	runtime.KeepAlive(message)
	abi.CallDone()
}
