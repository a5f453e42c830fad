// A status-only plugin: greets spec.name in status.message; the host keeps Ready.
package main

import "wasmop.dev/guest"

// Spec says whom to greet.
type Spec struct {
	Name *string `json:"name"`
}

// Greeter is the plugin.
type Greeter struct{}

// Config caches only what the plugin reads: the spec (and the status the host keeps).
func (Greeter) Config() wasmop.Config {
	return wasmop.NewConfig("greeting", wasmop.Namespaced("example.wasmop.dev", "v1", "Greeting")).Project("spec")
}

// Reconcile greets the name.
func (Greeter) Reconcile(greeting wasmop.Resource[Spec], _ *wasmop.Context) (wasmop.Outcome, error) {
	if greeting.Spec.Name == nil {
		return wasmop.Outcome{}, wasmop.InvalidError("spec: missing field `name`")
	}
	status := map[string]string{"message": "Hello, " + *greeting.Spec.Name + "!"}
	return wasmop.Ready("greeted").Status(status), nil
}

func init() { wasmop.Export[Spec](Greeter{}) }

func main() {}
