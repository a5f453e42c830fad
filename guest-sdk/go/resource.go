package wasmop

import "encoding/json"

// Metadata is the part of an object's metadata plugins read most.
type Metadata struct {
	// Name is the object's name.
	Name string `json:"name"`
	// Namespace is the object's namespace; empty for cluster-scoped objects.
	Namespace string `json:"namespace,omitempty"`
	// UID is the object's unique ID.
	UID string `json:"uid,omitempty"`
	// Generation is the generation of the object's spec.
	Generation int64 `json:"generation,omitempty"`
	// Labels are the object's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are the object's annotations.
	Annotations map[string]string `json:"annotations,omitempty"`
	// DeletionTimestamp is set once the object is marked for deletion.
	DeletionTimestamp string `json:"deletionTimestamp,omitempty"`
}

// Resource is a custom resource with a spec of type S: a reconciler's primary.
type Resource[S any] struct {
	// APIVersion is the object's `apiVersion`.
	APIVersion string `json:"apiVersion"`
	// Kind is the object's kind.
	Kind string `json:"kind"`
	// Metadata is the object's metadata.
	Metadata Metadata `json:"metadata"`
	// Spec is the object's spec.
	Spec S `json:"spec"`
	// Status is the object's status as the host's cache holds it, as JSON; nil: none.
	Status json.RawMessage `json:"status,omitempty"`
}

// ParseResource decodes a primary from the JSON the host gives a reconciler; a primary that
// does not decode is an Invalid error.
func ParseResource[S any](object string) (Resource[S], error) {
	var r Resource[S]
	if err := json.Unmarshal([]byte(object), &r); err != nil {
		return r, InvalidError("%v", err)
	}
	return r, nil
}
