package wasmop

import (
	"encoding/json"
	"time"

	"wasmop.dev/guest/abi"
)

// Webhook is an admission webhook the plugin serves through the host (kubebuilder's
// `create webhook`), for its primary's creates and updates.
type Webhook struct {
	mutating bool
	ignore   bool
	timeout  *time.Duration
}

// ValidatingWebhook calls the reconciler's Validate (it must be a Validator): the API server
// admits or refuses each create and update of a primary as it answers.
func ValidatingWebhook() Webhook { return Webhook{} }

// MutatingWebhook calls the reconciler's Default (it must be a Defaulter): each create and update
// of a primary is stored with the plugin's defaults filled in.
func MutatingWebhook() Webhook { return Webhook{mutating: true} }

// IgnoreFailures admits the request when a call of the webhook fails (default: refuse it).
func (w Webhook) IgnoreFailures() Webhook {
	w.ignore = true
	return w
}

// Timeout is how long the API server waits for an answer, 1-30 s (default 10 s); the plugin's
// call gets a deadline below it.
func (w Webhook) Timeout(timeout time.Duration) Webhook {
	w.timeout = &timeout
	return w
}

func (w Webhook) lower() any {
	policy := uint32(0)
	if w.ignore {
		policy = 1
	}
	var timeout any
	if w.timeout != nil {
		timeout = uint32(w.timeout.Milliseconds())
	}
	kind := uint32(0)
	if w.mutating {
		kind = 1
	}
	return []any{abi.Case{Index: kind}, []any{}, []any{}, abi.Case{Index: policy}, timeout}
}

// Validator is a Reconciler that serves a validating webhook (see ValidatingWebhook).
type Validator[S any] interface {
	// Validate admits or refuses a create, update or delete.
	Validate(request AdmissionRequest[S], ctx *Context) Verdict
}

// Defaulter is a Reconciler that serves a mutating webhook (see MutatingWebhook).
type Defaulter[S any] interface {
	// Default fills in the defaults of the primary's spec; an error refuses the request with its
	// message. The rest of the object is stored as the request has it.
	Default(primary *Resource[S], ctx *Context) error
}

// Operation is what an admission request does to its object.
type Operation uint32

// The operations, in the contract's order.
const (
	OperationCreate Operation = iota
	OperationUpdate
	OperationDelete
	OperationConnect
)

// AdmissionRequest is one object's admission, as the API server asks for it.
type AdmissionRequest[S any] struct {
	// UID is the request's UID.
	UID string
	// Operation is what the request does.
	Operation Operation
	// Namespace is the object's namespace; empty: none.
	Namespace string
	// Name is the object's name (empty on a create that asks the server to generate it).
	Name string
	// Object is the object as it would be stored; nil for a delete.
	Object *Resource[S]
	// OldObject is the object as it is stored, for an update or a delete; nil otherwise.
	OldObject *Resource[S]
	// Username is who makes the request.
	Username string
	// DryRun is true when the request changes nothing: the webhook must have no side effects.
	DryRun bool
}

// Verdict is a validating webhook's answer.
type Verdict struct {
	allowed  bool
	message  string
	field    string
	warnings []string
}

// Allow admits the request.
func Allow() Verdict { return Verdict{allowed: true} }

// Deny refuses the request, saying why in the user's words (kubectl shows it).
func Deny(message string) Verdict { return Verdict{message: message} }

// At names the field a denial is about (`spec.html`), shown in front of the message.
func (v Verdict) At(field string) Verdict {
	v.field = field
	return v
}

// Warn returns a warning to the client either way (kubectl prints it).
func (v Verdict) Warn(warning string) Verdict {
	v.warnings = append(v.warnings, warning)
	return v
}

// Allowed says whether the verdict admits the request, and its message and field.
func (v Verdict) Allowed() (allowed bool, message, field string) {
	return v.allowed, v.message, v.field
}

func (v Verdict) lower() any {
	return []any{v.allowed, optional(v.message), optional(v.field), strings(v.warnings)}
}

// Webhook adds an admission webhook the plugin serves.
func (c Config) Webhook(w Webhook) Config {
	c.webhooks = append(c.webhooks, w)
	return c
}

func liftAdmission[S any](v any) (AdmissionRequest[S], error) {
	f := v.([]any)
	r := AdmissionRequest[S]{UID: f[0].(string), Operation: Operation(f[2].(abi.Case).Index), Name: f[4].(string),
		Username: f[7].(string), DryRun: f[9].(bool)}
	if ns, ok := f[3].(string); ok {
		r.Namespace = ns
	}
	for i, into := range []**Resource[S]{&r.Object, &r.OldObject} {
		if text, ok := f[5+i].(string); ok {
			object, err := ParseResource[S](text)
			if err != nil {
				return r, err
			}
			*into = &object
		}
	}
	return r, nil
}

// withDefaults is the object (JSON) with the spec d gives it; every other field as it is.
func withDefaults[S any](d Defaulter[S], object string, ctx *Context) (string, error) {
	var whole map[string]any
	if err := json.Unmarshal([]byte(object), &whole); err != nil {
		return "", err
	}
	primary, err := ParseResource[S](object)
	if err != nil {
		return "", err
	}
	if err := d.Default(&primary, ctx); err != nil {
		return "", err
	}
	spec, err := json.Marshal(primary.Spec)
	if err != nil {
		return "", err
	}
	whole["spec"] = json.RawMessage(spec)
	out, err := json.Marshal(whole)
	return string(out), err
}
