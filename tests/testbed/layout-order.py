#!/usr/bin/env python3
"""Writes a symbol ordering file for lld (`--symbol-ordering-file`): the functions a profile saw
run, hottest first, named as BINARY defines them.

usage: layout-order.py PROFILE.txt BINARY OUT

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


def defined(binary):
    """The binary's function symbols, by name without the `.llvm.N` suffix."""
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    symbols = collections.defaultdict(list)
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tTwW":
            symbols[LLVM_SUFFIX.sub("", fields[2])].append(fields[2])
    return symbols


def main():
    profile, binary, out = sys.argv[1:4]
    counts, symbols = ran(profile), defined(binary)
    kept = sorted((n for n in counts if n in symbols), key=lambda n: -counts[n])
    order = [s for n in kept for s in symbols[n]]
    with open(out, "w") as f:
        f.writelines(n + "\n" for n in order)
    print(f"{len(counts)} functions ran; {len(kept)} of them are symbols of {binary} ({len(order)} written)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
