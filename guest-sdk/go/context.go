package wasmop

import "wasmop.dev/guest/abi"

// Context is what a reconcile knows besides its primary.
type Context struct {
	// Attempt is 0 on the first attempt, incremented on each retry.
	Attempt uint32
	// LastAttempt is true when no retry will follow if this attempt fails.
	LastAttempt bool
	// Dependents are the states of the plugin's dependents after the host reconciled them.
	Dependents []DependentState
	// Inbound is the last inbound payload mapped to the primary; empty: none.
	Inbound string
}

// Phase is where a dependent stands after the host reconciled it.
type Phase uint32

// The phases of a dependent, in the contract's order.
const (
	// PhaseReady: applied (or observed) and its ready condition holds.
	PhaseReady Phase = iota
	// PhaseNotReady: applied (or observed), its ready condition does not hold yet.
	PhaseNotReady
	// PhaseSkipped: not reconciled (a dependency is not ready, or its condition is false).
	PhaseSkipped
	// PhaseDeleted: its reconcile condition is false and its objects were deleted.
	PhaseDeleted
)

// DependentState is a dependent's state, given to a reconcile.
type DependentState struct {
	// Name is the dependent's name.
	Name string
	// Phase is where it stands.
	Phase Phase
	// Objects are its objects as the cluster holds them now, as JSON.
	Objects []string
}

// Dependent is the state of the dependent `name`, and whether the plugin declares one of that name.
func (c *Context) Dependent(name string) (DependentState, bool) {
	for _, d := range c.Dependents {
		if d.Name == name {
			return d, true
		}
	}
	return DependentState{}, false
}

// request is the contract's reconcile-request, lifted.
type request struct {
	object  string
	context Context
}

func liftRequest(v any) request {
	fields := v.([]any)
	r := request{object: fields[0].(string)}
	r.context.Attempt = fields[1].(uint32)
	r.context.LastAttempt = fields[2].(bool)
	for _, d := range fields[3].([]any) {
		state := d.([]any)
		var objects []string
		for _, o := range state[2].([]any) {
			objects = append(objects, o.(string))
		}
		phase := Phase(state[1].(abi.Case).Index)
		r.context.Dependents = append(r.context.Dependents, DependentState{state[0].(string), phase, objects})
	}
	if inbound, ok := fields[5].(string); ok {
		r.context.Inbound = inbound
	}
	return r
}
