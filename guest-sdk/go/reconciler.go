package wasmop

import "time"

// Reconciler is a plugin: its configuration, and how it brings the world in line with a primary
// of spec type S.
type Reconciler[S any] interface {
	// Config is the plugin's configuration; the host reads it once, when it loads the plugin.
	Config() Config
	// Reconcile brings the world in line with the primary; it returns what the host should write.
	Reconcile(primary Resource[S], ctx *Context) (Outcome, error)
}

// Desirer is a Reconciler with dependents: the objects they should hold for a primary, asked
// before each reconcile.
type Desirer[S any] interface {
	// Desired is the objects of the plugin's dependents the primary wants.
	Desired(primary Resource[S], ctx *Context) ([]Desired, error)
}

// Cleaner is a Reconciler that releases what the garbage collector will not when a primary is
// deleted (JOSDK's Cleaner): its primaries get a finalizer, removed once Cleanup succeeds.
type Cleaner[S any] interface {
	// Cleanup releases what the primary holds outside its owned dependents.
	Cleanup(primary Resource[S], ctx *Context) (Cleanup, error)
}

// Cleanup is what the host should do after a successful cleanup.
type Cleanup struct {
	keep       bool
	reschedule *time.Duration
	events     []Event
}

// CleanupDone lets the host remove the finalizer: the primary goes.
func CleanupDone() Cleanup { return Cleanup{} }

// KeepFinalizer keeps the finalizer (the deletion waits) until cleanup runs again after delay.
func KeepFinalizer(delay time.Duration) Cleanup { return Cleanup{keep: true, reschedule: &delay} }

// Event records an event on the primary.
func (c Cleanup) Event(event Event) Cleanup {
	c.events = append(c.events, event)
	return c
}

func (c Cleanup) lower() any { return []any{c.keep, millis(c.reschedule), lowerEvents(c.events)} }

// plugin is the exported reconciler, without its spec type.
type plugin interface {
	config() Config
	cleans() bool
	desired(object string, ctx *Context) ([]Desired, error)
	reconcile(object string, ctx *Context) (Outcome, error)
	cleanup(object string, ctx *Context) (Cleanup, error)
	validate(request any, ctx *Context) (Verdict, error)
	defaults(object string, ctx *Context) (string, error)
}

// typed is a Reconciler of spec type S as a plugin.
type typed[S any] struct{ r Reconciler[S] }

func (t typed[S]) config() Config { return t.r.Config() }

func (t typed[S]) cleans() bool {
	_, ok := t.r.(Cleaner[S])
	return ok
}

func (t typed[S]) cleanup(object string, ctx *Context) (Cleanup, error) {
	c, ok := t.r.(Cleaner[S])
	if !ok {
		return CleanupDone(), nil
	}
	primary, err := ParseResource[S](object)
	if err != nil {
		return Cleanup{}, err
	}
	return c.Cleanup(primary, ctx)
}

func (t typed[S]) validate(request any, ctx *Context) (Verdict, error) {
	v, ok := t.r.(Validator[S])
	if !ok {
		return Allow(), nil
	}
	r, err := liftAdmission[S](request)
	if err != nil {
		return Verdict{}, err
	}
	return v.Validate(r, ctx), nil
}

func (t typed[S]) defaults(object string, ctx *Context) (string, error) {
	d, ok := t.r.(Defaulter[S])
	if !ok {
		return object, nil
	}
	return withDefaults(d, object, ctx)
}

func (t typed[S]) desired(object string, ctx *Context) ([]Desired, error) {
	d, ok := t.r.(Desirer[S])
	if !ok {
		return nil, nil
	}
	primary, err := ParseResource[S](object)
	if err != nil {
		return nil, err
	}
	return d.Desired(primary, ctx)
}

func (t typed[S]) reconcile(object string, ctx *Context) (Outcome, error) {
	primary, err := ParseResource[S](object)
	if err != nil {
		return Outcome{}, err
	}
	return t.r.Reconcile(primary, ctx)
}

var exported plugin

// Export makes r the plugin's reconciler; call it from the main package's init function.
func Export[S any](r Reconciler[S]) { exported = typed[S]{r} }
