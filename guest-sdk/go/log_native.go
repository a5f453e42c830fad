//go:build !wasip1

package wasmop

import (
	"fmt"
	"os"
)

// hostLog writes a log line to standard error: natively (a plugin's unit tests) there is no host.
func hostLog(level Level, message string, fields []string) {
	fmt.Fprintln(os.Stderr, append([]any{level, message}, toAny(fields)...)...)
}

func toAny(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}
