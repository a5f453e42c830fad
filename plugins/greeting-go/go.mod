module wasmop.dev/plugins/greeting-go

go 1.24

require wasmop.dev/guest v0.0.0

replace wasmop.dev/guest => ../../guest-sdk/go
