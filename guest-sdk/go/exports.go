//go:build wasip1

package wasmop

// The functions the component exports (the `reconciler` interface of wit/plugin.wit), with the
// canonical ABI's core signatures: arguments flattened to i32s, a result that does not fit one
// core value returned as the address of a block, which the host frees with the function's
// `cabi_post_` export.

import "wasmop.dev/guest/abi"

//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	return abi.Realloc(old, oldSize, align, newSize)
}

//go:wasmexport cabi_realloc_adapter
func cabiReallocAdapter(old, oldSize, align, newSize uint32) uint32 {
	return abi.AdapterRealloc(old, oldSize, align, newSize)
}

func lift(types []*abi.Type, flat ...uint32) []any {
	values := abi.Flat(types, flat)
	abi.ArgumentsLifted()
	return values
}

var (
	describeResult  = abi.PluginConfig
	desiredResult   = abi.Result(abi.List(abi.DesiredObject), abi.ReconcileError)
	reconcileResult = abi.Result(abi.Outcome, abi.ReconcileError)
	cleanupResult   = abi.Result(abi.CleanupOutcome, abi.ReconcileError)
	refsResult      = abi.Result(abi.List(abi.ObjectRef), abi.String)
	secondaryResult = abi.Result(abi.List(abi.SecondaryRef), abi.String)
	fetchResult     = abi.Result(abi.List(abi.ExternalObject), abi.String)
	fetchAllResult  = abi.Result(abi.List(abi.PrimaryState), abi.String)
	applyResult     = abi.Result(abi.ExternalObject, abi.ReconcileError)
	deleteResult    = abi.Result(nil, abi.ReconcileError)
	optionalString  = abi.Option(abi.String)
	externalArgs    = abi.Record(abi.String, abi.ExternalObject, abi.Option(abi.ExternalObject))
)

func ok(v any) abi.Case { return abi.Case{Index: 0, Value: v} }

func failed(err error) abi.Case { return abi.Case{Index: 1, Value: asError(err).lower()} }

//go:wasmexport wasmop:plugin/reconciler@0.8.1#describe
func describe() uint32 {
	return abi.Return(describeResult, exported.config().lower(exported.cleans()))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#desired
func desired(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 uint32) uint32 {
	r := liftRequest(lift([]*abi.Type{abi.Request}, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)[0])
	objects, err := exported.desired(r.object, &r.context)
	var lowered any
	if err == nil {
		lowered, err = lowerDesired(objects)
	}
	if err != nil {
		return abi.Return(desiredResult, failed(err))
	}
	return abi.Return(desiredResult, ok(lowered))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#reconcile
func reconcile(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 uint32) uint32 {
	r := liftRequest(lift([]*abi.Type{abi.Request}, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)[0])
	outcome, err := exported.reconcile(r.object, &r.context)
	var lowered any
	if err == nil {
		lowered, err = outcome.lower()
	}
	if err != nil {
		return abi.Return(reconcileResult, failed(err))
	}
	return abi.Return(reconcileResult, ok(lowered))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#cleanup
func cleanup(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 uint32) uint32 {
	r := liftRequest(lift([]*abi.Type{abi.Request}, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)[0])
	done, err := exported.cleanup(r.object, &r.context)
	if err != nil {
		return abi.Return(cleanupResult, failed(err))
	}
	return abi.Return(cleanupResult, ok(done.lower()))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#check
func check(a0, a1, a2, a3, a4, a5, a6 uint32) uint32 {
	lift([]*abi.Type{abi.String, abi.String, optionalString}, a0, a1, a2, a3, a4, a5, a6)
	return 0
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#update-error-status
func updateErrorStatus(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13 uint32) uint32 {
	lift([]*abi.Type{abi.Request, abi.ReconcileError}, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)
	return abi.Return(optionalString, nil)
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#map-secondary
func mapSecondary(a0, a1, a2, a3, a4 uint32) uint32 {
	lift([]*abi.Type{abi.String, optionalString}, a0, a1, a2, a3, a4)
	return abi.Return(refsResult, ok([]any{}))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#secondaries-of
func secondariesOf(a0, a1 uint32) uint32 {
	lift([]*abi.Type{abi.String}, a0, a1)
	return abi.Return(secondaryResult, ok([]any{}))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#crd
func crd() uint32 { return abi.Return(optionalString, nil) }

//go:wasmexport wasmop:plugin/reconciler@0.8.1#fetch
func fetch(a0, a1, a2, a3 uint32) uint32 {
	lift([]*abi.Type{abi.String, abi.List(abi.TrackedID)}, a0, a1, a2, a3)
	return abi.Return(fetchResult, ok([]any{}))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#fetch-all
func fetchAll() uint32 { return abi.Return(fetchAllResult, ok([]any{})) }

//go:wasmexport wasmop:plugin/reconciler@0.8.1#apply-external
func applyExternal(args uint32) uint32 {
	abi.Load(externalArgs, args)
	abi.ArgumentsLifted()
	return abi.Return(applyResult, failed(PermanentError("the plugin has no external dependents")))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#delete-external
func deleteExternal(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 uint32) uint32 {
	lift([]*abi.Type{abi.String, abi.ExternalObject}, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)
	return abi.Return(deleteResult, ok(nil))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#map-inbound
func mapInbound(a0, a1 uint32) uint32 {
	lift([]*abi.Type{abi.String}, a0, a1)
	return abi.Return(refsResult, ok([]any{}))
}

//go:wasmexport wasmop:plugin/reconciler@0.8.1#filter
func filter(a0, a1, a2, a3, a4, a5, a6, a7 uint32) uint32 {
	lift([]*abi.Type{abi.String, abi.EventKind, abi.String, optionalString}, a0, a1, a2, a3, a4, a5, a6, a7)
	return 1
}

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#describe
func postDescribe(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#desired
func postDesired(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#reconcile
func postReconcile(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#cleanup
func postCleanup(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#update-error-status
func postUpdateErrorStatus(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#map-secondary
func postMapSecondary(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#secondaries-of
func postSecondariesOf(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#crd
func postCrd(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#fetch
func postFetch(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#fetch-all
func postFetchAll(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#apply-external
func postApplyExternal(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#delete-external
func postDeleteExternal(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/reconciler@0.8.1#map-inbound
func postMapInbound(uint32) { abi.ResultTaken() }

// The `admission` interface (the `operator` world).

var (
	defaultResult = abi.Result(abi.String, abi.String)
	convertResult = abi.Result(abi.List(abi.String), abi.String)
)

//go:wasmexport wasmop:plugin/admission@0.8.1#validate
func validate(args uint32) uint32 {
	request := abi.Load(abi.AdmissionRequest, args)
	abi.ArgumentsLifted()
	verdict, err := exported.validate(request, &Context{})
	if err != nil {
		verdict = Deny(err.Error())
	}
	return abi.Return(abi.Verdict, verdict.lower())
}

//go:wasmexport wasmop:plugin/admission@0.8.1#default
func defaultObject(args uint32) uint32 {
	request := abi.Load(abi.AdmissionRequest, args).([]any)
	abi.ArgumentsLifted()
	object, _ := request[5].(string)
	defaulted, err := exported.defaults(object, &Context{})
	if err != nil {
		return abi.Return(defaultResult, abi.Case{Index: 1, Value: err.Error()})
	}
	return abi.Return(defaultResult, ok(defaulted))
}

//go:wasmexport wasmop:plugin/admission@0.8.1#convert
func convert(a0, a1, a2, a3 uint32) uint32 {
	lift([]*abi.Type{abi.List(abi.String), abi.String}, a0, a1, a2, a3)
	return abi.Return(convertResult, abi.Case{Index: 1, Value: "the plugin converts no objects"})
}

//go:wasmexport cabi_post_wasmop:plugin/admission@0.8.1#validate
func postValidate(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/admission@0.8.1#default
func postDefault(uint32) { abi.ResultTaken() }

//go:wasmexport cabi_post_wasmop:plugin/admission@0.8.1#convert
func postConvert(uint32) { abi.ResultTaken() }
