#!/usr/bin/env python3
"""Checks the dependency direction of the code, in every crate of the workspace:

- no import cycle between files: a file imports another when it names an item defined there
  (through `use`, or a path in its code), so two files never import each other, directly or
  through others;
- no import cycle between the top-level modules of a crate (the files and directories directly
  under its root's directory; the root file itself, lib.rs or main.rs, is not a module);
- a rules crate (core/) with no kube, wasmtime or wit-bindgen in its dependency tree.

Paths are resolved as rustc resolves them, from the crate roots `cargo metadata` lists, through
`mod` declarations (files and inline modules) and `use` declarations (re-exports are followed to
the file that defines the item: a `pub use` in a mod.rs is an import of the file it names, and a
file naming the item through that mod.rs imports the defining file). Naming a module only (`use
crate::informer;`) imports nothing until an item is named through it. Comments, strings and test
code (`#[cfg(test)]` items and the files they declare) are not read: a test may reach anywhere.
Prints the cycles found, with the paths that make each edge, and exits 1 when there is one.
"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = re.compile(r"^(kube|kube-[a-z-]+|wasmtime|wasmtime-[a-z-]+|wit-bindgen|wit-bindgen-[a-z-]+) v")
IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
PATH = re.compile(rf"(?<![\w:$]){IDENT}(?:\s*::\s*{IDENT})+")
VISIBILITY = r"(?:pub(?:\s*\([^)]*\))?\s+)?"
MOD_DECL = re.compile(rf"\b{VISIBILITY}mod\s+({IDENT})\s*([;{{])")
USE = re.compile(rf"(?<![\w$]){VISIBILITY}use\s+([^;]*);")
RAW_STRING = re.compile(r'b?r(#*)"')
CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'")


def strip(text: str) -> str:
    """`text` without comments, string and character literals (blanked, lines kept)."""
    out, i, n = [], 0, len(text)

    def blank(s: str) -> str:
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif c in "br" and (m := RAW_STRING.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + blank(text[i + 2 : j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('""' + blank(text[i + 2 : j]))
            i = j
        elif c == "'" and (m := CHAR.match(text, i)):
            out.append("' '" + " " * (m.end() - i - 3))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(text: str, start: int) -> int:
    """The index after the brace that closes the one at `start`."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def without_tests(text: str) -> str:
    """`text` without the items under `#[cfg(test)]` (their attributes, body or declaration)."""
    while m := re.search(r"#\[cfg\(\s*test\s*\)\]", text):
        j = m.end()
        while j < len(text) and text[j] != ";" and text[j] != "{":
            j += 1
        end = block_end(text, j) if j < len(text) and text[j] == "{" else j + 1
        text = text[: m.start()] + "".join(c if c == "\n" else " " for c in text[m.start() : end]) + text[end:]
    return text


def use_paths(tree: str, prefix: list[str]) -> list[tuple[list[str], str | None]]:
    """The paths a `use` tree names, each with the name it binds (`None` for a glob)."""
    tree = tree.strip()
    if not tree:
        return []
    if tree.endswith("}") and "{" in tree:
        head = tree[: tree.index("{")].rstrip().removesuffix("::").strip()
        body = tree[tree.index("{") + 1 : -1]
        base = prefix + [s.strip() for s in head.split("::") if s.strip()]
        parts, depth, last = [], 0, 0
        for k, c in enumerate(body):
            depth += {"{": 1, "}": -1}.get(c, 0)
            if c == "," and depth == 0:
                parts.append(body[last:k])
                last = k + 1
        parts.append(body[last:])
        return [found for part in parts for found in use_paths(part, base)]
    alias = None
    if m := re.fullmatch(rf"(.*?)\s+as\s+({IDENT})", tree, re.S):
        tree, alias = m.group(1), m.group(2)
    segments = prefix + [s.strip() for s in tree.split("::") if s.strip()]
    if segments[-1] == "*":
        return [(segments[:-1], None)]
    if segments[-1] == "self":
        segments = segments[:-1]
    if alias == "_":
        alias = "_" + "::".join(segments)
    return [(segments, alias or segments[-1])]


@dataclass(eq=False)
class Module:
    """A module: a file, or an inline `mod x { ... }` in one."""

    file: pathlib.Path
    parent: "Module | None"
    children: dict[str, "Module"] = field(default_factory=dict)
    # Names bound by `use`, and the glob imports, as written.
    uses: dict[str, list[str]] = field(default_factory=dict)
    globs: list[list[str]] = field(default_factory=list)
    # Paths its code names, as written.
    paths: list[list[str]] = field(default_factory=list)

    def root(self) -> "Module":
        return self.parent.root() if self.parent else self


class Crate:
    """A crate's modules, from its root file."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.files: dict[pathlib.Path, Module] = {}
        self.top = self.load(root, None, mod_dir=root.parent)

    def load(self, path: pathlib.Path, parent: Module | None, mod_dir: pathlib.Path) -> Module:
        module = Module(path, parent)
        self.files[path] = module
        self.read(module, without_tests(strip(path.read_text())), mod_dir)
        return module

    def read(self, module: Module, text: str, mod_dir: pathlib.Path):
        """Reads `text`, the body of `module`, whose `mod x;` files lie in `mod_dir`."""
        own, i = [], 0
        while m := MOD_DECL.search(text, i):
            name = m.group(1)
            if m.group(2) == ";":
                own.append(text[i : m.end()])
                for candidate in (mod_dir / f"{name}.rs", mod_dir / name / "mod.rs"):
                    if candidate.exists():
                        module.children[name] = self.load(candidate, module, mod_dir / name)
                        break
                i = m.end()
            else:
                own.append(text[i : m.start()])
                end = block_end(text, m.end() - 1)
                inline = Module(module.file, module)
                module.children[name] = inline
                self.read(inline, text[m.end() : end - 1], mod_dir / name)
                i = end
        own.append(text[i:])
        body = "".join(own)
        for m in USE.finditer(body):
            for segments, name in use_paths(m.group(1), []):
                if name is None:
                    module.globs.append(segments)
                else:
                    module.uses[name] = segments
                module.paths.append(segments)
        code = USE.sub(" ", body)
        for m in PATH.finditer(code):
            module.paths.append([s.strip() for s in m.group(0).split("::")])

    def start(self, module: Module, first: str, seen: set) -> Module | pathlib.Path | None:
        """Where a path that begins with `first`, written in `module`, leads (`None`: outside the crate)."""
        if first == "crate":
            return module.root()
        if first == "self":
            return module
        if first == "super":
            return module.parent
        if first in module.children:
            return module.children[first]
        if first in module.uses:
            return self.resolve(module, module.uses[first], seen)
        return None

    def resolve(self, module: Module, segments: list[str], seen: set | None = None) -> Module | pathlib.Path | None:
        """The module or the file defining the item `segments` (written in `module`) names."""
        seen = set() if seen is None else seen
        key = (id(module), tuple(segments))
        if key in seen:
            return None
        seen.add(key)
        at = self.start(module, segments[0], seen)
        for segment in segments[1:]:
            if not isinstance(at, Module):
                return at
            if segment == "super":
                at = at.parent
            elif segment == "self":
                continue
            elif segment in at.children:
                at = at.children[segment]
            elif segment in at.uses:
                # An item of another crate is this file's, as far as this crate goes.
                at = self.resolve(at, at.uses[segment], seen) or at.file
            else:
                # Defined here, or brought in by a glob.
                for glob in at.globs:
                    source = self.resolve(at, glob, seen)
                    if isinstance(source, Module):
                        found = self.resolve(source, ["self", segment], seen)
                        if found is not None and found != source.file:
                            return found
                return at.file
        return at

    def modules(self):
        stack = [self.top]
        while stack:
            module = stack.pop()
            yield module
            stack.extend(module.children.values())

    def edges(self) -> dict[pathlib.Path, dict[pathlib.Path, set[str]]]:
        """File -> the files it imports, each with the paths that import it."""
        graph = {path: {} for path in self.files}
        for module in self.modules():
            named = list(module.paths) + [glob for glob in module.globs]
            for segments in named:
                target = self.resolve(module, segments)
                if isinstance(target, Module) and segments in module.globs:
                    target = target.file
                if isinstance(target, pathlib.Path) and target != module.file:
                    graph[module.file].setdefault(target, set()).add("::".join(segments))
        return graph


def cycles(graph: dict) -> list[list]:
    """Strongly connected components with more than one node (Tarjan, iteratively)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, successors = work[-1]
            advanced = False
            for w in successors:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return out


def crate_roots() -> list[pathlib.Path]:
    metadata = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    roots = {
        pathlib.Path(target["src_path"]).resolve()
        for package in json.loads(metadata)["packages"]
        for target in package["targets"]
    }
    return sorted(roots)


def top_level(crate: Crate, path: pathlib.Path) -> str | None:
    """The top-level module `path` belongs to (`None` for the root file)."""
    if path == crate.root:
        return None
    return path.relative_to(crate.root.parent).parts[0].removesuffix(".rs")


def check_crate(root: pathlib.Path) -> list[str]:
    crate = Crate(root)
    graph = crate.edges()
    found = []
    name = lambda p: str(p.relative_to(ROOT))
    for component in cycles(graph):
        detail = "; ".join(
            f"{name(f)} -> {name(t)} ({', '.join(sorted(graph[f][t]))})"
            for f in component for t in sorted(graph[f]) if t in component
        )
        found.append(f"import cycle between files of {name(root)}: {detail}")
    modules: dict[str, dict[str, set[str]]] = {}
    for source, targets in graph.items():
        here = top_level(crate, source)
        if here is None:
            continue
        modules.setdefault(here, {})
        for target, via in targets.items():
            there = top_level(crate, target)
            if there is not None and there != here:
                modules[here].setdefault(there, set()).update(f"{name(source)}: {p}" for p in via)
    for component in cycles(modules):
        detail = "; ".join(
            f"{m} -> {t} ({', '.join(sorted(modules[m][t])[:3])})"
            for m in component for t in sorted(modules[m]) if t in component
        )
        found.append(f"import cycle between the top-level modules of {name(root)}: {detail}")
    return found


def self_test() -> None:
    """Checks the checker on a crate made for it: the cycles it must find and the paths it must not
    follow (comments, strings, tests, a module named without an item, re-exports of an item
    defined elsewhere)."""
    import tempfile
    files = {
        "lib.rs": "mod a;\nmod b;\nmod c;\nmod m;\npub use c::Shared;\n",
        # a and b import each other, b through a `use` group and a path in its code.
        "a.rs": "use crate::b::{self, B};\npub struct A;\nfn f() -> B { b::make() }\n",
        "b.rs": "pub struct B;\npub fn make() -> B { let _ = crate::a::A; B }\n",
        # c names a and the root's re-export only in a comment, a string and its tests.
        "c.rs": "// crate::a::A\npub struct Shared;\nconst S: &str = \"crate::a::A\";\n"
                "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
        # m/mod.rs re-exports its child's item; the child takes `Shared` through the root's
        # re-export (defined in c.rs) and `crate::m` only as a module: no cycle.
        "m/mod.rs": "mod child;\npub use child::Child;\n",
        "m/child.rs": "use crate::Shared;\nuse crate::m;\npub struct Child(Shared);\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp).resolve()
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        graph = Crate(root / "lib.rs").edges()
        found = [[p.relative_to(root).as_posix() for p in component] for component in cycles(graph)]
        assert found == [["a.rs", "b.rs"]], f"check-layers finds {found}, not the one cycle a.rs <-> b.rs"
        child = {p.relative_to(root).as_posix() for p in graph[root / "m/child.rs"]}
        assert child == {"c.rs"}, f"m/child.rs imports {child}, not c.rs alone"
        assert not graph[root / "c.rs"], f"c.rs imports {graph[root / 'c.rs']}, from a comment, a string or a test"


def main() -> int:
    self_test()
    failed = False
    roots = crate_roots()
    for root in roots:
        for problem in check_crate(root):
            failed = True
            print(f"check-layers: {problem}", file=sys.stderr)
    tree = subprocess.run(
        ["cargo", "tree", "-p", "wasmop-core", "-e", "normal", "--prefix", "none"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    for line in tree:
        if FORBIDDEN.match(line):
            failed = True
            print(f"check-layers: wasmop-core depends on {line}", file=sys.stderr)
    if not failed:
        print(f"check-layers: no import cycle between files or top-level modules in {len(roots)} crate roots; "
              "wasmop-core has no kube, wasmtime or wit-bindgen")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
