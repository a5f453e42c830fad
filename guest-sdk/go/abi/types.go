// Package abi lifts and lowers values of WIT types through the component model's canonical ABI
// (strings in UTF-8), for a Go core module that a component wraps. A value of a WIT type is held
// as a Go value of one shape per type:
//
//	bool, u16, u32, u64, f64, string   bool, uint16, uint32, uint64, float64, string
//	list<T>                            []any
//	record, tuple                      []any, one element per field
//	option<T>                          nil (none) or the value (some)
//	variant, result, enum              Case (result: case 0 is ok, 1 is err)
package abi

// Kind is the shape of a WIT type.
type Kind uint8

// The shapes of WIT types the plugin contract uses.
const (
	KindBool Kind = iota
	KindU16
	KindU32
	KindU64
	KindF64
	KindString
	KindList
	KindRecord
	KindVariant
	KindOption
)

// Type is a WIT type: its shape and the types it is made of.
type Type struct {
	kind Kind
	// elem is the element of a list and the value of an option.
	elem *Type
	// fields are a record's fields; cases a variant's payloads (nil: a case without one).
	fields []*Type
	cases  []*Type
}

// Case is a value of a variant, a result or an enum: which case, and its payload (nil: none).
type Case struct {
	// Index is the case's position in the type (a result's ok is 0, its err 1).
	Index uint32
	// Value is the payload, nil for a case without one.
	Value any
}

// Primitive types.
var (
	Bool   = &Type{kind: KindBool}
	U16    = &Type{kind: KindU16}
	U32    = &Type{kind: KindU32}
	U64    = &Type{kind: KindU64}
	F64    = &Type{kind: KindF64}
	String = &Type{kind: KindString}
)

// List is `list<elem>`.
func List(elem *Type) *Type { return &Type{kind: KindList, elem: elem} }

// Option is `option<elem>`.
func Option(elem *Type) *Type { return &Type{kind: KindOption, elem: elem} }

// Record is a record (or a tuple) of these fields, in order.
func Record(fields ...*Type) *Type { return &Type{kind: KindRecord, fields: fields} }

// Variant is a variant of these cases' payloads, in order; nil for a case without one.
func Variant(cases ...*Type) *Type { return &Type{kind: KindVariant, cases: cases} }

// Result is `result<ok, err>`; nil for `_`.
func Result(ok, err *Type) *Type { return Variant(ok, err) }

// Enum is an enum of n cases.
func Enum(n int) *Type { return Variant(make([]*Type, n)...) }

// cases of a variant or an option (none, some).
func (t *Type) variantCases() []*Type {
	if t.kind == KindOption {
		return []*Type{nil, t.elem}
	}
	return t.cases
}

// discriminantSize is the size of a variant's discriminant, in bytes.
func discriminantSize(n int) uint32 {
	switch {
	case n <= 1<<8:
		return 1
	case n <= 1<<16:
		return 2
	default:
		return 4
	}
}

func alignTo(n, align uint32) uint32 { return (n + align - 1) / align * align }

// Align is the type's alignment in linear memory.
func (t *Type) Align() uint32 {
	switch t.kind {
	case KindBool:
		return 1
	case KindU16:
		return 2
	case KindU32, KindString, KindList:
		return 4
	case KindU64, KindF64:
		return 8
	case KindRecord:
		a := uint32(1)
		for _, f := range t.fields {
			a = max(a, f.Align())
		}
		return a
	default:
		cases := t.variantCases()
		a := discriminantSize(len(cases))
		for _, c := range cases {
			if c != nil {
				a = max(a, c.Align())
			}
		}
		return a
	}
}

// Size is the type's size in linear memory.
func (t *Type) Size() uint32 {
	switch t.kind {
	case KindBool:
		return 1
	case KindU16:
		return 2
	case KindU32:
		return 4
	case KindU64, KindF64, KindString, KindList:
		return 8
	case KindRecord:
		var s uint32
		for _, f := range t.fields {
			s = alignTo(s, f.Align()) + f.Size()
		}
		return alignTo(s, t.Align())
	default:
		return alignTo(t.payloadOffset()+t.maxPayloadSize(), t.Align())
	}
}

// payloadOffset is where a variant's payload starts.
func (t *Type) payloadOffset() uint32 {
	cases := t.variantCases()
	a := uint32(1)
	for _, c := range cases {
		if c != nil {
			a = max(a, c.Align())
		}
	}
	return alignTo(discriminantSize(len(cases)), a)
}

func (t *Type) maxPayloadSize() uint32 {
	var s uint32
	for _, c := range t.variantCases() {
		if c != nil {
			s = max(s, c.Size())
		}
	}
	return s
}

// FlatCount is how many core values the type flattens to as a parameter.
func (t *Type) FlatCount() int {
	switch t.kind {
	case KindString, KindList:
		return 2
	case KindRecord:
		n := 0
		for _, f := range t.fields {
			n += f.FlatCount()
		}
		return n
	case KindVariant, KindOption:
		n := 0
		for _, c := range t.variantCases() {
			if c != nil {
				n = max(n, c.FlatCount())
			}
		}
		return 1 + n
	default:
		return 1
	}
}
