module wasmop.dev/guest

go 1.24
