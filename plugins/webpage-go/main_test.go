package main

import (
	"testing"

	"wasmop.dev/guest"
)

func page(html string) wasmop.Resource[Spec] {
	return wasmop.Resource[Spec]{Metadata: wasmop.Metadata{Name: "site", Namespace: "default"}, Spec: Spec{HTML: html}}
}

func TestDesiresTheFourDependentsNamedAfterThePage(t *testing.T) {
	desired, err := WebPage{}.Desired(page("<h1>hi</h1>"), &wasmop.Context{})
	if err != nil || len(desired) != 4 {
		t.Fatalf("desired %v, %v", desired, err)
	}
	data := desired[0].Object.(M)["data"].(M)
	if desired[0].Dependent != "configmap" || data["index.html"] != "<h1>hi</h1>" {
		t.Errorf("the ConfigMap %v", desired[0])
	}
}

func TestIsNotReadyWhileADependentWaits(t *testing.T) {
	ctx := &wasmop.Context{Dependents: []wasmop.DependentState{{Name: "ingress", Phase: wasmop.PhaseSkipped}}}
	outcome, err := WebPage{}.Reconcile(page("<h1>hi</h1>"), ctx)
	if ready, _, set := outcome.Readiness(); err != nil || ready || !set {
		t.Errorf("readiness %v %v", ready, err)
	}
}

func TestRefusesAnEmptyHTMLAndDefaultsExposed(t *testing.T) {
	empty := page("")
	if allowed, message, field := (WebPage{}).Validate(wasmop.AdmissionRequest[Spec]{Object: &empty}, nil).Allowed(); allowed ||
		message != "html must not be empty" || field != "spec.html" {
		t.Errorf("verdict %v %q %q", allowed, message, field)
	}
	full := page("<h1>hi</h1>")
	if err := (WebPage{}).Default(&full, nil); err != nil || full.Spec.Exposed == nil || *full.Spec.Exposed {
		t.Errorf("exposed %v, %v", full.Spec.Exposed, err)
	}
}
