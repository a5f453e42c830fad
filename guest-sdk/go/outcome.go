package wasmop

import (
	"encoding/json"
	"time"

	"wasmop.dev/guest/abi"
)

// Outcome is what the host should do after a successful reconcile.
type Outcome struct {
	ready       *bool
	message     string
	status      any
	labels      []any
	annotations []any
	reschedule  *time.Duration
	events      []Event
}

// Done is an outcome without readiness: the host leaves the primary's conditions as they are.
func Done() Outcome { return Outcome{} }

// Ready is an outcome of a primary that is ready (its `Ready` condition True), with this message.
func Ready(message string) Outcome {
	ready := true
	return Outcome{ready: &ready, message: message}
}

// NotReady is an outcome of a primary still progressing (`Ready` False, `Reconciling` True).
func NotReady(message string) Outcome {
	ready := false
	return Outcome{ready: &ready, message: message}
}

// Status merges status, a value encoding as a JSON object, into the primary's `.status`.
func (o Outcome) Status(status any) Outcome {
	o.status = status
	return o
}

// RescheduleAfter reconciles again after delay unless an event comes first.
func (o Outcome) RescheduleAfter(delay time.Duration) Outcome {
	o.reschedule = &delay
	return o
}

// Event records an event on the primary.
func (o Outcome) Event(event Event) Outcome {
	o.events = append(o.events, event)
	return o
}

// Label sets a label of the primary.
func (o Outcome) Label(key, value string) Outcome {
	o.labels = append(o.labels, []any{key, value})
	return o
}

// RemoveLabel removes a label of the primary.
func (o Outcome) RemoveLabel(key string) Outcome {
	o.labels = append(o.labels, []any{key, nil})
	return o
}

// Annotation sets an annotation of the primary.
func (o Outcome) Annotation(key, value string) Outcome {
	o.annotations = append(o.annotations, []any{key, value})
	return o
}

// RemoveAnnotation removes an annotation of the primary.
func (o Outcome) RemoveAnnotation(key string) Outcome {
	o.annotations = append(o.annotations, []any{key, nil})
	return o
}

func (o Outcome) lower() (any, error) {
	var readiness, status, reschedule any
	if o.ready != nil {
		readiness = []any{*o.ready, o.message}
	}
	if o.status != nil {
		text, err := json.Marshal(o.status)
		if err != nil {
			return nil, err
		}
		status = string(text)
	}
	if o.reschedule != nil {
		reschedule = uint64(o.reschedule.Milliseconds())
	}
	return []any{readiness, status, list(o.labels), list(o.annotations), reschedule, lowerEvents(o.events)}, nil
}

func list(values []any) []any {
	if values == nil {
		return []any{}
	}
	return values
}

// Event is a Kubernetes Event to record on the primary.
type Event struct {
	// Warning is true for a Warning event, false for a Normal one.
	Warning bool
	// Reason is a short CamelCase reason, e.g. `Reconciled`.
	Reason string
	// Action is what was done, e.g. `Reconcile`.
	Action string
	// Note is a human readable detail; empty: none.
	Note string
}

// NormalEvent is a Normal event with this reason and action.
func NormalEvent(reason, action string) Event { return Event{Reason: reason, Action: action} }

// WarningEvent is a Warning event with this reason and action.
func WarningEvent(reason, action string) Event {
	return Event{Warning: true, Reason: reason, Action: action}
}

// WithNote adds a human readable detail to the event.
func (e Event) WithNote(note string) Event {
	e.Note = note
	return e
}

func lowerEvents(events []Event) []any {
	out := make([]any, len(events))
	for i, e := range events {
		var t uint32
		if e.Warning {
			t = 1
		}
		out[i] = []any{abi.Case{Index: t}, e.Reason, e.Action, optional(e.Note)}
	}
	return out
}

func caseOf(index uint32, value any) abi.Case { return abi.Case{Index: index, Value: value} }

// Readiness is whether the outcome says the primary is ready, and the message; set is false
// for an outcome without readiness (Done).
func (o Outcome) Readiness() (ready bool, message string, set bool) {
	if o.ready == nil {
		return false, "", false
	}
	return *o.ready, o.message, true
}

// StatusValue is the value merged into the primary's status; nil: none.
func (o Outcome) StatusValue() any { return o.status }
