package abi

import "testing"

// The canonical ABI's sizes and alignments of the contract's types, worked out by hand from the
// component model's rules.
func TestSizesAndAlignmentsFollowTheCanonicalABI(t *testing.T) {
	for _, c := range []struct {
		name        string
		t           *Type
		size, align uint32
	}{
		{"option<string>", Option(String), 12, 4},
		{"option<u64>", Option(U64), 16, 8},
		{"option<u16>", Option(U16), 4, 2},
		{"kind-ref", KindRef, 40, 4},
		{"event-filters", EventFilters, 5, 1},
		{"retry-policy", RetryPolicy, 40, 8},
		{"enum of 4", EventKind, 1, 1},
		{"reconcile-error", ReconcileError, 12, 4},
		{"result<_, reconcile-error>", Result(nil, ReconcileError), 16, 4},
		{"readiness", Readiness, 12, 4},
		{"outcome", Outcome, 72, 8},
		{"result<outcome, reconcile-error>", Result(Outcome, ReconcileError), 80, 8},
	} {
		if size, align := c.t.Size(), c.t.Align(); size != c.size || align != c.align {
			t.Errorf("%s: size %d align %d, want %d %d", c.name, size, align, c.size, c.align)
		}
	}
}

func TestArgumentsFlattenToTheirCount(t *testing.T) {
	if n := Request.FlatCount(); n != 11 {
		t.Errorf("reconcile-request: %d", n)
	}
	if n := Record(String, ExternalObject, Option(ExternalObject)).FlatCount(); n <= 16 {
		t.Errorf("apply-external's arguments flatten to %d, fewer than 17: not passed in memory", n)
	}
}
