// Package wasmop writes wasmop reconciler plugins in Go: a type implementing Reconciler, handed
// to Export in the package's init function, built with `GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared` and made a component by wasmop-componentize.
package wasmop

// Kind is a Kubernetes resource type.
type Kind struct {
	// Group is the API group; empty for the core group.
	Group string
	// Version is the API version within the group, e.g. `v1`.
	Version string
	// Kind is the kind, e.g. `WebPage`.
	Kind string
	// Plural is the plural resource name; empty: the kind in lower case plus "s".
	Plural string
	// Cluster is true for kinds whose objects live in no namespace.
	Cluster bool
}

// Namespaced is a kind whose objects live in a namespace.
func Namespaced(group, version, kind string) Kind {
	return Kind{Group: group, Version: version, Kind: kind}
}

// ClusterScoped is a kind whose objects live in no namespace.
func ClusterScoped(group, version, kind string) Kind {
	return Kind{Group: group, Version: version, Kind: kind, Cluster: true}
}

// WithPlural names the kind's plural resource name when it is not the kind in lower case plus "s".
func (k Kind) WithPlural(plural string) Kind {
	k.Plural = plural
	return k
}

// APIVersion is the kind's `apiVersion`: `group/version`, or the version for the core group.
func (k Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

func (k Kind) lower() any {
	return []any{k.Group, k.Version, k.Kind, optional(k.Plural), !k.Cluster}
}

// optional is a string as an `option<string>`: empty is none.
func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func strings(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}
