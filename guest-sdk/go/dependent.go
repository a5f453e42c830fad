package wasmop

import (
	"encoding/json"

	"wasmop.dev/guest/abi"
)

// Check is a condition the host evaluates on an object (JOSDK's workflow conditions).
type Check struct {
	index uint32
	value any
}

// FieldEquals holds when the value at path (dot-separated, e.g. `spec.exposed`) equals value.
func FieldEquals(path string, value any) Check {
	text, _ := json.Marshal(value)
	return Check{0, []any{path, string(text)}}
}

// FieldsEqual holds when the values at both paths are equal (and present).
func FieldsEqual(left, right string) Check { return Check{1, []any{left, right}} }

// ConditionTrue holds when `status.conditions` has an entry of this type with status "True".
func ConditionTrue(conditionType string) Check { return Check{2, conditionType} }

func (c *Check) lower() any {
	if c == nil {
		return nil
	}
	return abi.Case{Index: c.index, Value: c.value}
}

// Dependent is a kind of object the plugin's reconciles want to exist (JOSDK's managed dependent
// resources): the host applies the desired objects, owned by the primary, watches them, and
// deletes those no longer desired.
type Dependent struct {
	name          string
	kind          Kind
	dependsOn     []string
	readyWhen     *Check
	reconcileWhen *Check
}

// NewDependent is the dependent `name` of objects of kind.
func NewDependent(name string, kind Kind) Dependent { return Dependent{name: name, kind: kind} }

// DependsOn names dependents that must be ready before this one is reconciled.
func (d Dependent) DependsOn(names ...string) Dependent {
	d.dependsOn = append(append([]string{}, d.dependsOn...), names...)
	return d
}

// ReadyWhen says when the objects count as ready; default: as soon as they exist.
func (d Dependent) ReadyWhen(c Check) Dependent {
	d.readyWhen = &c
	return d
}

// ReconcileWhen is evaluated on the primary: while it is false the objects are deleted.
func (d Dependent) ReconcileWhen(c Check) Dependent {
	d.reconcileWhen = &c
	return d
}

func (d Dependent) lower() any {
	return []any{d.name, d.kind.lower(), false, strings(d.dependsOn), d.readyWhen.lower(), d.reconcileWhen.lower(),
		abi.Case{Index: 0}, false, nil, false}
}

// Desired is one desired object of a dependent.
type Desired struct {
	// Dependent is the dependent's name.
	Dependent string
	// Object is the object: `apiVersion`, `kind`, `metadata.name` and the fields the plugin manages.
	Object any
}

func lowerDesired(desired []Desired) (any, error) {
	out := make([]any, len(desired))
	for i, d := range desired {
		text, err := json.Marshal(d.Object)
		if err != nil {
			return nil, err
		}
		out[i] = []any{d.Dependent, string(text), false, nil}
	}
	return out, nil
}
