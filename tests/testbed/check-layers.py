#!/usr/bin/env python3
"""Checks the dependency direction of the code: no import cycle between the top-level modules of
a crate, and a rules crate (core/) with no kube, wasmtime or wit-bindgen in its dependency tree.

Modules are the files and directories directly under a crate's src/; an edge M -> N is any
`crate::N` path (in a `use` or inline) in M's files, `super::N` from a file directly in src/, and
a `use` of an item re-exported at the root under N's name is not followed (lib.rs is the root, not
a module). Prints the cycles found and exits 1 when there is one.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRATES = ["host", "guest-sdk", "core"]
FORBIDDEN = re.compile(r"^(kube|kube-[a-z-]+|wasmtime|wasmtime-[a-z-]+|wit-bindgen|wit-bindgen-[a-z-]+) v")


def modules(src: pathlib.Path) -> dict[str, list[pathlib.Path]]:
    found = {}
    for entry in src.iterdir():
        if entry.name in ("lib.rs", "main.rs"):
            continue
        if entry.is_dir():
            found[entry.name] = sorted(entry.rglob("*.rs"))
        elif entry.suffix == ".rs":
            found[entry.stem] = [entry]
    return found


def reexports(src: pathlib.Path) -> dict[str, str]:
    """Items the crate root re-exports (`pub use config::{Config, Kind};`), by the module they live in."""
    owner = {}
    for root in ("lib.rs",):
        path = src / root
        if not path.exists():
            continue
        text = path.read_text()
        for module, items in re.findall(r"pub use ([a-z_][a-z0-9_]*)::\{([^}]*)\};", text):
            for item in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", items):
                owner[item] = module
        for module, item in re.findall(r"pub use ([a-z_][a-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*);", text):
            owner[item] = module
    return owner


def edges(crate: str) -> dict[str, set[str]]:
    src = ROOT / crate / "src"
    mods = modules(src)
    owner = reexports(src)
    graph = {name: set() for name in mods}
    for name, files in mods.items():
        for path in files:
            text = path.read_text()
            # Skip the unit tests: a test module may reach anywhere.
            text = text.split("#[cfg(test)]")[0]
            # Comments (doc links included) are not dependencies.
            text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
            for target in re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text):
                if target in graph and target != name:
                    graph[name].add(target)
            # `use crate::{a, b::c}` groups.
            for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
                for target in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", group):
                    target = owner.get(target, target)
                    if target in graph and target != name:
                        graph[name].add(target)
            # `crate::Kind`: an item the root re-exports.
            for item in re.findall(r"\bcrate::([A-Z][A-Za-z0-9_]*)", text):
                target = owner.get(item)
                if target in graph and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    failed = False
    for crate in CRATES:
        graph = edges(crate)
        for component in cycles(graph):
            failed = True
            detail = "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(component)))}" for m in component)
            print(f"check-layers: import cycle in {crate}: {detail}", file=sys.stderr)
    tree = subprocess.run(
        ["cargo", "tree", "-p", "wasmop-core", "-e", "normal", "--prefix", "none"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    for line in tree:
        if FORBIDDEN.match(line):
            failed = True
            print(f"check-layers: wasmop-core depends on {line}", file=sys.stderr)
    if not failed:
        print("check-layers: no import cycle in " + ", ".join(CRATES) + "; wasmop-core has no kube, wasmtime or wit-bindgen")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
