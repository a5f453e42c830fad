package abi

import (
	"math"
	"unsafe"
)

// Linear memory is the Go heap: an address is a Go pointer. Blocks handed to the host stay
// referenced here (the collector must not free them) until the host is done with them.
var outgoing [][]byte

// alloc returns a zeroed block of size bytes at an address aligned to align, kept in *keep.
func alloc(keep *[][]byte, size, align uint32) uint32 {
	if size == 0 {
		return align
	}
	b := make([]byte, size+align)
	addr := uint32(uintptr(unsafe.Pointer(&b[0])))
	*keep = append(*keep, b)
	return alignTo(addr, align)
}

// argumentArena holds the arguments of a call while the host writes them, until the call lifted
// them into Go values. The host writes them through cabi_realloc, where a component may call no
// import, and a Go allocation may (the runtime reads the clock when its heap grows): so they
// come from this static block, never from the Go heap. It bounds the arguments of one call
// (the objects of a reconcile request, JSON) to its size.
var (
	argumentArena [4 << 20]byte
	argumentsUsed uint32
)

// Realloc is `cabi_realloc`, with which the host allocates the blocks of a call's arguments; 0
// (the host traps) when they pass the argument arena.
func Realloc(old, oldSize, align, newSize uint32) uint32 {
	base := uint32(uintptr(unsafe.Pointer(&argumentArena[0])))
	addr := alignTo(base+argumentsUsed, align)
	end := addr + newSize - base
	if end > uint32(len(argumentArena)) {
		return 0
	}
	argumentsUsed = end
	if old != 0 {
		copy(bytesAt(addr, min(oldSize, newSize)), bytesAt(old, min(oldSize, newSize)))
	}
	return addr
}

// adapterArena is the memory of the WASI adapter: it allocates its stack and state on its first
// call, while the Go runtime is still starting (no Go allocation can serve it then), and never
// frees them.
var (
	adapterArena [256 << 10]byte
	adapterUsed  uint32
)

// AdapterRealloc is `cabi_realloc_adapter`, with which the WASI adapter allocates its memory.
func AdapterRealloc(old, oldSize, align, newSize uint32) uint32 {
	base := uint32(uintptr(unsafe.Pointer(&adapterArena[0])))
	addr := alignTo(base+adapterUsed, align)
	end := addr + newSize - base
	if old != 0 || end > uint32(len(adapterArena)) {
		return 0
	}
	adapterUsed = end
	return addr
}

// ArgumentsLifted frees the argument arena once a call lifted its arguments into Go values.
func ArgumentsLifted() { argumentsUsed = 0 }

// ResultTaken releases the blocks of the last call's result (its post-return function).
func ResultTaken() { outgoing = nil }

// at is the Go pointer of a linear memory address (the one conversion vet cannot check).
func at(addr uint32) unsafe.Pointer { return unsafe.Pointer(uintptr(addr)) }

func bytesAt(addr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(at(addr)), n)
}

func load8(addr uint32) uint8 { return *(*uint8)(at(addr)) }
func load16(addr uint32) uint16 {
	return *(*uint16)(at(addr))
}
func load32(addr uint32) uint32 { return *(*uint32)(at(addr)) }
func load64(addr uint32) uint64 { return *(*uint64)(at(addr)) }
func store8(addr uint32, v uint8) {
	*(*uint8)(at(addr)) = v
}
func store16(addr uint32, v uint16) {
	*(*uint16)(at(addr)) = v
}
func store32(addr uint32, v uint32) {
	*(*uint32)(at(addr)) = v
}
func store64(addr uint32, v uint64) {
	*(*uint64)(at(addr)) = v
}

// Load lifts a value of type t from linear memory at addr.
func Load(t *Type, addr uint32) any {
	switch t.kind {
	case KindBool:
		return load8(addr) != 0
	case KindU16:
		return load16(addr)
	case KindU32:
		return load32(addr)
	case KindU64:
		return load64(addr)
	case KindF64:
		return math.Float64frombits(load64(addr))
	case KindString:
		return string(bytesAt(load32(addr), load32(addr+4)))
	case KindList:
		return loadList(t.elem, load32(addr), load32(addr+4))
	case KindRecord:
		values := make([]any, len(t.fields))
		var offset uint32
		for i, f := range t.fields {
			offset = alignTo(offset, f.Align())
			values[i] = Load(f, addr+offset)
			offset += f.Size()
		}
		return values
	default:
		var index uint32
		switch discriminantSize(len(t.variantCases())) {
		case 1:
			index = uint32(load8(addr))
		case 2:
			index = uint32(load16(addr))
		default:
			index = load32(addr)
		}
		payload := t.variantCases()[index]
		var value any
		if payload != nil {
			value = Load(payload, addr+t.payloadOffset())
		}
		if t.kind == KindOption {
			return value
		}
		return Case{Index: index, Value: value}
	}
}

func loadList(elem *Type, addr, n uint32) []any {
	values := make([]any, n)
	size := elem.Size()
	for i := range values {
		values[i] = Load(elem, addr+uint32(i)*size)
	}
	return values
}

// Store lowers v, a value of type t, into linear memory at addr; the blocks it allocates for
// strings and lists stay until the result is taken.
func Store(t *Type, addr uint32, v any) {
	switch t.kind {
	case KindBool:
		var b uint8
		if v.(bool) {
			b = 1
		}
		store8(addr, b)
	case KindU16:
		store16(addr, v.(uint16))
	case KindU32:
		store32(addr, v.(uint32))
	case KindU64:
		store64(addr, v.(uint64))
	case KindF64:
		store64(addr, math.Float64bits(v.(float64)))
	case KindString:
		s := v.(string)
		block := alloc(&outgoing, uint32(len(s)), 1)
		copy(bytesAt(block, uint32(len(s))), s)
		store32(addr, block)
		store32(addr+4, uint32(len(s)))
	case KindList:
		values := v.([]any)
		size := t.elem.Size()
		block := alloc(&outgoing, size*uint32(len(values)), t.elem.Align())
		for i, e := range values {
			Store(t.elem, block+uint32(i)*size, e)
		}
		store32(addr, block)
		store32(addr+4, uint32(len(values)))
	case KindRecord:
		values := v.([]any)
		var offset uint32
		for i, f := range t.fields {
			offset = alignTo(offset, f.Align())
			Store(f, addr+offset, values[i])
			offset += f.Size()
		}
	default:
		var c Case
		if t.kind == KindOption {
			if v != nil {
				c = Case{Index: 1, Value: v}
			}
		} else {
			c = v.(Case)
		}
		switch discriminantSize(len(t.variantCases())) {
		case 1:
			store8(addr, uint8(c.Index))
		case 2:
			store16(addr, uint16(c.Index))
		default:
			store32(addr, c.Index)
		}
		if payload := t.variantCases()[c.Index]; payload != nil {
			Store(payload, addr+t.payloadOffset(), c.Value)
		}
	}
}

// Return lowers a call's result v of type t into a block of its own and returns the block's
// address, as a function whose result does not fit one core value returns it.
func Return(t *Type, v any) uint32 {
	addr := alloc(&outgoing, t.Size(), t.Align())
	Store(t, addr, v)
	return addr
}

// Flat lifts the arguments of a call from their flattened core values (every one an i32, as
// for the plugin contract's functions), in order.
func Flat(types []*Type, flat []uint32) []any {
	values := make([]any, len(types))
	for i, t := range types {
		values[i], flat = liftFlat(t, flat)
	}
	return values
}

func liftFlat(t *Type, flat []uint32) (any, []uint32) {
	switch t.kind {
	case KindBool:
		return flat[0] != 0, flat[1:]
	case KindU16:
		return uint16(flat[0]), flat[1:]
	case KindU32:
		return flat[0], flat[1:]
	case KindString:
		return string(bytesAt(flat[0], flat[1])), flat[2:]
	case KindList:
		return loadList(t.elem, flat[0], flat[1]), flat[2:]
	case KindRecord:
		values := make([]any, len(t.fields))
		for i, f := range t.fields {
			values[i], flat = liftFlat(f, flat)
		}
		return values, flat
	case KindVariant, KindOption:
		index := flat[0]
		payload := t.variantCases()[index]
		var value any
		if payload != nil {
			value, _ = liftFlat(payload, flat[1:])
		}
		rest := flat[t.FlatCount():]
		if t.kind == KindOption {
			return value, rest
		}
		return Case{Index: index, Value: value}, rest
	default:
		panic("abi: a 64-bit argument among the flattened ones")
	}
}

// LowerList lowers values, a list of elem, for the argument of an import call: the address and
// length of its elements, which stay until CallDone. Their strings stay with the result's blocks.
func LowerList(elem *Type, values []any) (addr, n uint32) {
	size := elem.Size()
	addr = alloc(&calls, size*uint32(len(values)), elem.Align())
	for i, e := range values {
		Store(elem, addr+uint32(i)*size, e)
	}
	return addr, uint32(len(values))
}

// calls holds the blocks of an import call's arguments, until the call returned.
var calls [][]byte

// CallDone releases the blocks of an import call's arguments.
func CallDone() { calls = nil }

// Address is the linear memory address of a string's bytes, for an import call's argument;
// the caller keeps the string alive during the call.
func Address(s string) uint32 {
	if s == "" {
		return 1
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s))))
}
