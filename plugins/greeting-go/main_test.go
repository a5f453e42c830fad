package main

import (
	"errors"
	"reflect"
	"testing"

	"wasmop.dev/guest"
)

func greeting(name *string) wasmop.Resource[Spec] {
	return wasmop.Resource[Spec]{Metadata: wasmop.Metadata{Name: "hello", Namespace: "default"}, Spec: Spec{Name: name}}
}

func TestGreetsTheNameAndIsReady(t *testing.T) {
	name := "world"
	outcome, err := Greeter{}.Reconcile(greeting(&name), &wasmop.Context{})
	if err != nil {
		t.Fatal(err)
	}
	if ready, message, _ := outcome.Readiness(); !ready || message != "greeted" {
		t.Errorf("readiness %v %q", ready, message)
	}
	if status := outcome.StatusValue(); !reflect.DeepEqual(status, map[string]string{"message": "Hello, world!"}) {
		t.Errorf("status %v", status)
	}
}

func TestAGreetingWithoutANameIsInvalid(t *testing.T) {
	_, err := Greeter{}.Reconcile(greeting(nil), &wasmop.Context{})
	var e *wasmop.Error
	if !errors.As(err, &e) || e.Kind != wasmop.Invalid || e.Message != "spec: missing field `name`" {
		t.Errorf("error %v", err)
	}
}

func TestTheHostCachesOnlyTheSpec(t *testing.T) {
	config := Greeter{}.Config()
	if config.Name() != "greeting" || !reflect.DeepEqual(config.Projection(), []string{"spec"}) {
		t.Errorf("config %v %v", config.Name(), config.Projection())
	}
}
