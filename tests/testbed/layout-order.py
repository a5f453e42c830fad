#!/usr/bin/env python3
"""Writes a symbol ordering file for lld (`--symbol-ordering-file`): the functions a profile saw
run, hottest first, named as the objects the binary is linked from define them.

usage: layout-order.py PROFILE.txt OUT OBJECTS...
       layout-order.py --rename ORDER OUT OBJECTS...
       layout-order.py --functions MAP

`--functions` prints the functions of an lld link map (`-Map`), "<address> <name>" a line:
those of the output section `.text`, where a stripped binary keeps no names.

OBJECTS are the linked binary (when it keeps its symbols) or the archives it was linked from
(the rlibs of a stripped build).

PROFILE.txt is `llvm-profdata show --all-functions --counts` of the merged profile. A function
ran when one of its counters is not zero. Names match exactly, but for the `.llvm.N` suffix that
ThinLTO gives promoted local symbols, which differs from build to build.
"""

import collections
import re
import subprocess
import sys

LLVM_SUFFIX = re.compile(r"\.llvm\.\d+$")


def ran(profile):
    """Each function that ran, by name, with its highest counter."""
    counts = collections.Counter()
    name = None
    with open(profile) as lines:
        for line in lines:
            text = line.strip()
            if line.startswith("  ") and not line.startswith("    ") and text.endswith(":"):
                # Local functions are `<module>;<symbol>`.
                name = LLVM_SUFFIX.sub("", text[:-1].rsplit(";", 1)[-1])
            elif text.startswith("Block counts:") and name:
                values = [int(v) for v in text.split(":", 1)[1].strip(" []").split(",") if v.strip()]
                if max(values, default=0) > 0:
                    counts[name] = max(counts[name], max(values))
    return counts


def defined(objects):
    """The function symbols of `objects`, each name once, by name without the `.llvm.N` suffix."""
    symbols = collections.defaultdict(list)
    for path in objects:
        # An rlib also holds its metadata, which nm reports as no object: skipped, not fatal.
        out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in "tTwW":
                names = symbols[LLVM_SUFFIX.sub("", fields[2])]
                if fields[2] not in names:
                    names.append(fields[2])
    if not symbols:
        sys.exit(f"no function symbols in {' '.join(objects)}")
    return symbols


def ordered(order):
    """The functions of an ORDER written before, in its order, each once, without suffixes."""
    names = {}
    with open(order) as lines:
        for line in lines:
            names.setdefault(LLVM_SUFFIX.sub("", line.strip()), None)
    names.pop("", None)
    return list(names)


def text_functions(link_map):
    """The functions of an lld link map's `.text`: (address, name). Its rows are `VMA LMA Size
    Align` and then an output section (`.text`), an input section (`file:(section)`) or a
    symbol of the input section above it."""
    section = None
    with open(link_map) as lines:
        for line in lines:
            fields = line.split(None, 4)
            if len(fields) != 5 or not fields[0].isalnum():
                continue
            name = fields[4].strip()
            if ":(" in name:
                continue
            if name.startswith("."):
                section = name
            elif section == ".text":
                yield fields[0], name


def main():
    if sys.argv[1:2] == ["--functions"] and len(sys.argv) == 3:
        for address, name in text_functions(sys.argv[2]):
            print(address, name)
        return
    rename = sys.argv[1:2] == ["--rename"]
    args = sys.argv[2:] if rename else sys.argv[1:]
    if len(args) < 3:
        sys.exit("usage: layout-order.py PROFILE.txt OUT OBJECTS...\n       layout-order.py --rename ORDER OUT OBJECTS...")
    source, out, objects = args[0], args[1], args[2:]
    symbols = defined(objects)
    if rename:
        functions = ordered(source)
        what = "were in the order"
    else:
        counts = ran(source)
        functions = sorted(counts, key=lambda n: -counts[n])
        what = "ran"
    kept = [n for n in functions if n in symbols]
    order = [s for n in kept for s in symbols[n]]
    with open(out, "w") as f:
        f.writelines(n + "\n" for n in order)
    print(f"{len(functions)} functions {what}; {len(kept)} of them are defined in the objects ({len(order)} written)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
