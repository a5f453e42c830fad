#!/usr/bin/env python3
"""Where a controller's anonymous memory goes, for `make bench`'s accounting.

  memory-account.py smaps PID
      The process's anonymous resident memory (`Anonymous:` of /proc/PID/smaps) by mapping: the
      malloc heap and arenas, the binary's relocated constants (.data.rel.ro, written once by the
      loader), thread stacks, the wasm pooling allocator's slots (memories, tables, fiber stacks).

  memory-account.py heap FLAMEGRAPH
      A heaptrack profile's heap at its peak by component. Make the file with
        heaptrack -o PROFILE wasmop run ...
        heaptrack_print -f PROFILE.zst -F FLAMEGRAPH --flamegraph-cost-type peak
      Each allocation stack goes to the first component whose marker a frame carries, from the
      allocation up (see RULES).
"""

import collections
import re
import sys

MIB = 1024 * 1024

# (component, markers): the first frame from the allocation upwards that carries a marker decides.
RULES = [
    ("overlay: the host's writes the watch has not delivered", ["(writer.rs)", "(subresource.rs)", "wrote (cache.rs)", "record (cache.rs)"]),
    ("scheduler: per-key entries, ready queues, timers", ["(state.rs)", "(delay_queue.rs)", "scheduler::run"]),
    ("change filter: per-key fingerprints", ["(filter.rs)", "ChangeFilter"]),
    ("own-write records", ["(own_writes.rs)"]),
    ("cache index: keys and tables", ["apply_watcher_event", "(whole.rs)", "(object_ref.rs)"]),
    ("cached objects: decoded, trimmed, projected", ["(watch.rs)", "(projection.rs)", "(meta.rs)", "(dynamic.rs)", "(event_decode.rs)"]),
    ("watch fan-out ring", ["(broadcast.rs)"]),
    ("wasm engine, compiled code, instances", ["wasmtime", "cranelift", "(module_artifacts.rs)", "(index_allocator.rs)",
                                               "(memory_pool.rs)", "(string_pool.rs)", "(type_registry.rs)", "(instance.rs)",
                                               "(component.rs)", "(linker.rs)", "(types.rs)", "(info.rs)", "(detail.rs)"]),
    ("plugin file, read to load it", ["std2fs4read"]),
    ("HTTP, TLS and watch buffers", ["(io.rs)", "(buffers.rs)", "(conn.rs)", "rustls", "hyper", "(client_conn.rs)",
                                     "(limited_cache.rs)", "(framed_impl.rs)"]),
    ("tokio: runtime, channels, tasks", ["(worker.rs)", "(driver.rs)", "(chan.rs)", "(list.rs)", "(spawn.rs)", "(join_set.rs)",
                                         "(events.rs)", "(sharded.rs)", "(shard.rs)"]),
]


def component(frames):
    for frame in reversed(frames):
        for name, markers in RULES:
            if any(m in frame for m in markers):
                return name
    return "other"


def heap(path):
    total = collections.Counter()
    with open(path) as lines:
        for line in lines:
            stack, cost = line.rstrip("\n").rsplit(" ", 1)
            total[component(stack.split(";"))] += int(cost)
    for name, cost in total.most_common():
        print(f"{cost / MIB:8.2f} MiB  {name}")
    print(f"{sum(total.values()) / MIB:8.2f} MiB  heap at its peak")


def smaps(pid):
    total, maps = collections.Counter(), collections.Counter()
    binary = open(f"/proc/{pid}/cmdline").read().split("\0")[0]
    mapping = None
    with open(f"/proc/{pid}/smaps") as lines:
        for line in lines:
            head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
            if head:
                start, end, perms, name = head.groups()
                mapping = (int(start, 16), int(end, 16) - int(start, 16), perms, name)
            elif line.startswith("Anonymous:") and mapping:
                kib = int(line.split()[1])
                start, size, perms, name = mapping
                if name == "[heap]":
                    kind = "malloc: main arena ([heap])"
                elif name == "[stack]":
                    kind = "main thread stack"
                elif name.endswith(binary.rsplit("/", 1)[-1]):
                    kind = "binary: relocated constants (.data.rel.ro, .got, .data)"
                elif name:
                    kind = "shared libraries and other files"
                elif start % (64 * MIB) == 0 and perms == "rw-p":
                    # glibc's thread arenas are 64 MiB reservations aligned to their size.
                    kind = "malloc: thread arenas"
                elif size in (2 * MIB, 2 * MIB + 4096, 8 * MIB, 8 * MIB + 4096):
                    kind = "thread stacks, wasm fiber stacks (2 or 8 MiB mappings)"
                else:
                    kind = "other anonymous mappings (wasm pool slots, malloc's mmapped blocks)"
                total[kind] += kib
                maps[kind] += 1
    for kind, kib in total.most_common():
        if kib:
            print(f"{kib / 1024:8.2f} MiB  {kind} ({maps[kind]} mappings)")
    print(f"{sum(total.values()) / 1024:8.2f} MiB  anonymous in all")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("smaps", "heap"):
        sys.exit(__doc__)
    smaps(sys.argv[2]) if sys.argv[1] == "smaps" else heap(sys.argv[2])
