package wasmop

// Condition is an entry of an object's `status.conditions` (metav1.Condition).
type Condition struct {
	// Type is the condition's type, e.g. `Ready`.
	Type string `json:"type"`
	// Status is "True", "False" or "Unknown".
	Status string `json:"status"`
	// Reason is a CamelCase reason for the last transition.
	Reason string `json:"reason,omitempty"`
	// Message is a human readable detail.
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the condition was set for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is when the status last changed.
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// IsTrue says whether conditions hold one of this type with status "True".
func IsTrue(conditions []Condition, conditionType string) bool {
	for _, c := range conditions {
		if c.Type == conditionType {
			return c.Status == "True"
		}
	}
	return false
}
