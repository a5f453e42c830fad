package wasmop

import (
	"time"

	"wasmop.dev/guest/abi"
)

// Filters says which changes of a primary lead to a reconcile (controller-runtime's predicates).
type Filters struct {
	// OnCreate reconciles objects when first seen: created, or listed at start.
	OnCreate bool
	// OnUpdate reconciles updates that pass generation-aware filtering.
	OnUpdate bool
	// OnDelete reconciles when an object is marked for deletion.
	OnDelete bool
	// OnAnnotationChange also reconciles when annotations change, even without a new generation.
	OnAnnotationChange bool
	// OnLabelChange also reconciles when labels change, even without a new generation.
	OnLabelChange bool
}

// Config is the plugin's name, its primary kind, and how the host should schedule it. The host
// keeps the primary's `Ready`, `Reconciling` and `Degraded` conditions for a custom resource (a
// kind with a group) unless OwnConditions says otherwise.
type Config struct {
	name            string
	primary         Kind
	labelSelector   string
	fieldSelector   string
	filters         Filters
	generationAware bool
	maxConcurrent   *uint32
	resync          *time.Duration
	finalizer       string
	conditions      bool
	projection      []string
	dependents      []Dependent
	webhooks        []Webhook
}

// NewConfig is the configuration of the plugin `name` reconciling objects of `primary`.
func NewConfig(name string, primary Kind) Config {
	return Config{
		name:            name,
		primary:         primary,
		filters:         Filters{OnCreate: true, OnUpdate: true, OnDelete: true},
		generationAware: true,
		conditions:      primary.Group != "",
	}
}

// Name is the plugin's name.
func (c Config) Name() string { return c.name }

// Projection is the paths of the primary the plugin reads; nil: whole objects.
func (c Config) Projection() []string { return c.projection }

// Project names the paths of the primary the plugin reads: the host caches those, `status` and
// the metadata only, and gives the plugin those and the metadata only.
func (c Config) Project(paths ...string) Config {
	c.projection = append([]string{}, paths...)
	return c
}

// OwnConditions says the plugin keeps the primary's conditions itself; the host writes none.
func (c Config) OwnConditions() Config {
	c.conditions = false
	return c
}

// LabelSelector reconciles only primaries matching this label selector.
func (c Config) LabelSelector(selector string) Config {
	c.labelSelector = selector
	return c
}

// FieldSelector reconciles only primaries matching this field selector.
func (c Config) FieldSelector(selector string) Config {
	c.fieldSelector = selector
	return c
}

// Filters sets which changes lead to a reconcile.
func (c Config) Filters(filters Filters) Config {
	c.filters = filters
	return c
}

// GenerationAware skips updates that do not change `metadata.generation` (on by default).
func (c Config) GenerationAware(on bool) Config {
	c.generationAware = on
	return c
}

// MaxConcurrentReconciles bounds the plugin's reconciles running at once.
func (c Config) MaxConcurrentReconciles(n uint32) Config {
	c.maxConcurrent = &n
	return c
}

// ResyncPeriod reconciles every cached primary this often, at background priority.
func (c Config) ResyncPeriod(period time.Duration) Config {
	c.resync = &period
	return c
}

// Finalizer names the primary's finalizer (used only when the plugin needs one); default
// `wasmop.dev/<name>`.
func (c Config) Finalizer(name string) Config {
	c.finalizer = name
	return c
}

// Dependent adds a kind of object the plugin's reconciles create and keep in shape.
func (c Config) Dependent(d Dependent) Config {
	c.dependents = append(c.dependents, d)
	return c
}

func millis(d *time.Duration) any {
	if d == nil {
		return nil
	}
	return uint64(d.Milliseconds())
}

func (c Config) lower(cleanup bool) any {
	f := c.filters
	finalizer := abi.Case{Index: 0}
	if c.finalizer != "" {
		finalizer = abi.Case{Index: 1, Value: c.finalizer}
	}
	var maxConcurrent, projection any
	if c.maxConcurrent != nil {
		maxConcurrent = *c.maxConcurrent
	}
	if c.projection != nil {
		projection = strings(c.projection)
	}
	dependents := make([]any, len(c.dependents))
	for i, d := range c.dependents {
		dependents[i] = d.lower()
	}
	webhooks := make([]any, len(c.webhooks))
	for i, w := range c.webhooks {
		webhooks[i] = w.lower()
	}
	return []any{
		c.name, c.primary.lower(), optional(c.labelSelector), optional(c.fieldSelector),
		[]any{f.OnCreate, f.OnUpdate, f.OnDelete, f.OnAnnotationChange, f.OnLabelChange},
		c.generationAware, nil, nil, nil, maxConcurrent, []any{}, millis(c.resync), finalizer, cleanup,
		dependents, c.conditions, projection, nil, nil, nil, nil, []any{}, nil, webhooks,
	}
}
