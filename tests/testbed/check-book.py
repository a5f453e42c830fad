#!/usr/bin/env python3
"""Checks the book (docs/src) and the project's Markdown; `make docs` runs it before mdBook.

Fails, naming the file and line, when:
- a relative link of a book page or of the project's Markdown names a file that does not exist,
  or an `#anchor` that is no heading of its target (mdBook's rule: the heading's text
  lowercased, whitespace to `-`, punctuation dropped, `-1`, `-2`... for repeats); a book page
  may not link out of docs/src (the built book holds only its pages: name a repository file in
  code instead);
- a book page's `{{#include}}` names a missing file, a line range (which rots silently), an
  anchor without its `ANCHOR:`/`ANCHOR_END:` lines, or a file outside the tested directories;
- a book page has an inline rust, python or typescript block longer than a few lines: a sample
  is a file a test builds, included; a README block in those languages must be an excerpt whose
  first line names its file (`// plugins/x/src/lib.rs` or `# plugins/x/app.py`) and whose other
  lines all occur in that file, in order (`...` alone on a line skips);
- a page of docs/src is missing from SUMMARY.md;
- the local control plane's page does not name every controller of `--controllers` in
  tests/testbed/cluster.sh;
- README.md has 300 lines or more;
- any Markdown file of the project tells the history of its making: work sessions or periods,
  numbered periods ("the twenty-fourth ..."), issue or pull request numbers, "this PR", first
  person narrative ("we tried", "I ran", "yesterday"). Code spans and blocks are not prose and
  are not searched.

`check-book.py --self-test` shows each rule failing on a broken sample and passing a good one.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

README_LIMIT = 300
INLINE_LIMIT = 4  # lines of an inline rust/python/typescript block in a book page
SAMPLE_LANGUAGES = {"rust", "rs", "python", "py", "ts", "typescript", "js", "javascript"}
INCLUDE_ROOTS = ("plugins/", "guest-sdk/", "core/", "host/", "wit/", "tests/", "deploy/", "docs/examples/")
SKIP_DIRS = {".git", "target", "node_modules", "dist", "__pycache__"}
CONTROL_PLANE_PAGE = "docs/src/getting-started/local-control-plane.md"

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INCLUDE = re.compile(r"\{\{#(include|rustdoc_include)\s+([^}\s]+)\s*\}\}")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")

ORDINAL = (
    r"(?:fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|"
    r"fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|thirtieth|fortieth)"
)
COMPOUND_ORDINAL = r"(?:twenty|thirty|forty|fifty)-(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)"
HISTORY = [
    (re.compile(r"\bsessions?\b", re.I), "a work session"),
    (re.compile(r"\bwork[- ]periods?\b", re.I), "a work period"),
    (re.compile(rf"\b{COMPOUND_ORDINAL}\b", re.I), "a numbered period"),
    (
        re.compile(
            rf"\b{ORDINAL}(?:'s\b|(?=\s*[.,;:)]|\s*$)|\s+(?:\w+\s+)?(?:session|period|iteration|sprint|cycle)s?\b)",
            re.I,
        ),
        "a numbered period",
    ),
    (re.compile(r"\b(?:issues?|PRs?|pull requests?)\s*#?\d+\b", re.I), "an issue or pull request number"),
    (re.compile(r"(?<![\w/&.-])#\d{2,}\b"), "an issue or pull request number"),
    (re.compile(r"\bthis (?:PR|pull request|issue|ticket)\b", re.I), "talk of the change at hand"),
    (re.compile(r"\b(?:yesterday|last (?:week|night|session|time))\b", re.I), "a day of the work"),
    (
        re.compile(
            r"\b(?:[Ww]e|I)\s+(?:tried|found|decided|fixed|changed|added|removed|moved|ran|measured|wrote|used to)\b"
        ),
        "first person narrative",
    ),
]


class Problems:
    """Problems found, each `path:line: message`."""

    def __init__(self, root: Path):
        self.root = root
        self.found: list[str] = []

    def add(self, path: Path, line: int, message: str) -> None:
        self.found.append(f"{path.relative_to(self.root)}:{line}: {message}")


def prose_lines(text: str):
    """(line number, line, in a fenced block?, the block's language) for every line."""
    fence = None
    language = ""
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence, language = m.group(2), m.group(3).lower()
            yield number, line, True, language
            continue
        if fence is not None:
            yield number, line, True, language
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                fence, language = None, ""
            continue
        yield number, line, False, ""


def code_blocks(text: str):
    """(first line number, language, body lines) of every fenced block."""
    blocks = []
    current = None
    for number, line, fenced, language in prose_lines(text):
        if not fenced:
            continue
        if current is None:
            current = [number, language, []]
            continue
        if FENCE.match(line) and line.strip().strip(line.strip()[0]) == "":
            blocks.append(tuple(current))
            current = None
        else:
            current[2].append(line)
    return blocks


def strip_code_spans(line: str) -> str:
    return CODE_SPAN.sub(" ", line)


def anchor_of(heading: str) -> str:
    """mdBook's id for a heading's text (mdbook-html `id_from_content`)."""
    explicit = re.search(r"\{#([\w-]+)[^}]*\}\s*$", heading)
    if explicit:
        return explicit.group(1)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "_-":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def anchors(path: Path) -> set[str]:
    used: set[str] = set()
    for _, line, fenced, _ in prose_lines(path.read_text()):
        m = HEADING.match(line)
        if fenced or not m:
            continue
        base = anchor_of(m.group(2))
        candidate, counter = base, 0
        while candidate in used:
            counter += 1
            candidate = f"{base}-{counter}"
        used.add(candidate)
    return used


def check_links(problems: Problems, page: Path, book: Path | None) -> None:
    """Relative links of `page` resolve; a book page's stay inside `book`."""
    text = page.read_text()
    for number, line, fenced, _ in prose_lines(text):
        if fenced:
            continue
        prose = strip_code_spans(line)
        targets = [m.group(1) for m in LINK.finditer(prose)] + [m.group(1) for m in IMAGE.finditer(prose)]
        m = REFDEF.match(prose)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if re.match(r"^[a-zA-Z][\w+.-]*:", target) or target.startswith("//"):
                continue  # an external link
            path_part, _, fragment = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page.resolve()
            if not resolved.exists():
                problems.add(page, number, f"broken link {target!r}: {path_part} does not exist")
                continue
            if book is not None and book.resolve() not in resolved.parents and resolved != book.resolve():
                problems.add(page, number, f"link {target!r} leaves the book: name the file in code instead")
                continue
            if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                problems.add(page, number, f"broken link {target!r}: no heading #{fragment} in {path_part or page.name}")


def check_includes(problems: Problems, root: Path, page: Path) -> None:
    for number, line in enumerate(page.read_text().split("\n"), 1):
        for m in INCLUDE.finditer(line):
            spec = m.group(2)
            path_part, _, rest = spec.partition(":")
            target = (page.parent / path_part).resolve()
            if not target.is_file():
                problems.add(page, number, f"include {spec!r}: {path_part} does not exist")
                continue
            relative = target.relative_to(root.resolve()).as_posix() if root.resolve() in target.parents else ""
            if not relative.startswith(INCLUDE_ROOTS):
                problems.add(page, number, f"include {spec!r}: only files that tests build or read may be included")
            if not rest:
                continue
            if re.fullmatch(r"\d*(:\d*)?", rest):
                problems.add(page, number, f"include {spec!r}: a line range rots; mark the lines with ANCHOR comments")
                continue
            source = target.read_text().split("\n")
            starts = [i for i, l in enumerate(source) if re.search(rf"ANCHOR:\s*{re.escape(rest)}\b", l)]
            ends = [i for i, l in enumerate(source) if re.search(rf"ANCHOR_END:\s*{re.escape(rest)}\b", l)]
            if not starts or not ends or ends[0] <= starts[0]:
                problems.add(page, number, f"include {spec!r}: no ANCHOR: {rest} ... ANCHOR_END: {rest} in {path_part}")
            elif not any(l.strip() for l in source[starts[0] + 1 : ends[0]] if "ANCHOR" not in l):
                problems.add(page, number, f"include {spec!r}: the anchor {rest} holds nothing")


def check_inline_samples(problems: Problems, page: Path) -> None:
    for number, language, body in code_blocks(page.read_text()):
        if language not in SAMPLE_LANGUAGES:
            continue
        if all(INCLUDE.search(l) or not l.strip() for l in body):
            continue
        if len([l for l in body if l.strip()]) > INLINE_LIMIT:
            problems.add(
                page,
                number,
                f"an inline {language} block of {len(body)} lines: make it a file a test builds and "
                "include it ({{#include path:anchor}})",
            )


def check_readme_samples(problems: Problems, root: Path, readme: Path) -> None:
    for number, language, body in code_blocks(readme.read_text()):
        if language not in SAMPLE_LANGUAGES:
            continue
        lines = [l for l in body if l.strip()]
        named = re.match(r"^\s*(?://|#)\s*(\S+\.\w+)\s*$", lines[0]) if lines else None
        if not named or not (root / named.group(1)).is_file():
            problems.add(readme, number, f"a {language} sample must start with a comment naming its file")
            continue
        source = [l.strip() for l in (root / named.group(1)).read_text().split("\n")]
        at = 0
        for line in lines[1:]:
            wanted = line.strip()
            if wanted in ("...", "// ...", "# ..."):
                continue
            try:
                at = source.index(wanted, at) + 1
            except ValueError:
                problems.add(readme, number, f"{named.group(1)} has no line {wanted!r} (in this order)")
                break


def check_summary(problems: Problems, book: Path) -> None:
    summary = (book / "SUMMARY.md").read_text()
    listed = {(book / m.group(1)).resolve() for m in LINK.finditer(summary)}
    for page in sorted(book.rglob("*.md")):
        if page.name != "SUMMARY.md" and page.resolve() not in listed:
            problems.add(page, 1, "not in SUMMARY.md: the book would not show it")


def check_controllers(problems: Problems, root: Path) -> None:
    script = (root / "tests/testbed/cluster.sh").read_text()
    m = re.search(r"--controllers=([\w,-]+)", script)
    page = root / CONTROL_PLANE_PAGE
    if not m:
        problems.add(root / "tests/testbed/cluster.sh", 1, "no --controllers flag to document")
        return
    text = page.read_text()
    for controller in m.group(1).split(","):
        if f"`{controller}`" not in text:
            problems.add(page, 1, f"the control plane runs {controller} (tests/testbed/cluster.sh); name it here")


def check_readme_length(problems: Problems, readme: Path) -> None:
    count = len(readme.read_text().splitlines())
    if count >= README_LIMIT:
        problems.add(readme, count, f"README.md has {count} lines; keep it under {README_LIMIT}, the rest in the book")


def history_files(root: Path):
    """The project's Markdown (and every text file under deploy/), build output excluded."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        here = Path(dirpath)
        in_deploy = (root / "deploy") in [here, *here.parents]
        for name in filenames:
            path = here / name
            if name.endswith((".md", ".md.tmpl")) or (in_deploy and name.endswith((".yaml", ".yml", ".txt", ".tpl"))):
                yield path


def check_history(problems: Problems, path: Path) -> None:
    text = path.read_text(errors="replace")
    markdown = path.name.endswith((".md", ".md.tmpl"))
    lines = prose_lines(text) if markdown else ((n, l, False, "") for n, l in enumerate(text.split("\n"), 1))
    for number, line, fenced, _ in lines:
        if fenced:
            continue
        prose = strip_code_spans(line)
        if not markdown and not prose.lstrip().startswith("#"):
            continue  # outside Markdown, only comments are prose
        for pattern, what in HISTORY:
            m = pattern.search(prose)
            if m:
                problems.add(path, number, f"history of the project's making ({what}): {m.group(0)!r}")


def check(root: Path) -> list[str]:
    problems = Problems(root)
    book = root / "docs" / "src"
    readme = root / "README.md"
    pages = sorted(book.rglob("*.md"))
    for page in pages:
        check_links(problems, page, book)
        check_includes(problems, root, page)
        check_inline_samples(problems, page)
    check_summary(problems, book)
    check_links(problems, readme, None)
    check_readme_samples(problems, root, readme)
    check_readme_length(problems, readme)
    check_controllers(problems, root)
    for path in sorted(history_files(root)):
        check_history(problems, path)
        if path.suffix == ".md" and path != readme and book not in path.parents:
            check_links(problems, path, None)
    return problems.found


def self_test() -> int:
    """Each rule fails on a broken tree and passes the good one."""
    good = {
        "README.md": "# x\n\n[book](docs/src/a.md#a-heading)\n\n```rust\n// plugins/p.rs\nfn f() {}\n```\n"
        "A `session` cookie; a fourth replica joined.\n",
        "docs/src/SUMMARY.md": "# Summary\n\n- [A](a.md)\n- [C](getting-started/local-control-plane.md)\n",
        "docs/src/a.md": "# A heading\n\n## The host's `code`, laid out\n\n[self](#the-hosts-code-laid-out)\n\n"
        "```rust\n{{#include ../../plugins/p.rs:f}}\n```\n\n`clusterrole-aggregation-controller`\n",
        "docs/src/getting-started/local-control-plane.md": "`garbage-collector-controller`\n",
        "plugins/p.rs": "// ANCHOR: f\nfn f() {}\n// ANCHOR_END: f\n",
        "tests/testbed/cluster.sh": "x --controllers=garbage-collector-controller \\\n",
    }
    broken = {  # case: (file, what it gets, a word of the problem it must raise)
        "a broken link": ("docs/src/a.md", "[x](missing.md)\n", "does not exist"),
        "a broken anchor": ("docs/src/a.md", "[x](#no-such-heading)\n", "no heading"),
        "a link out of the book": ("docs/src/a.md", "[x](../../plugins/p.rs)\n", "leaves the book"),
        "a missing include anchor": ("docs/src/a.md", "{{#include ../../plugins/p.rs:g}}\n", "ANCHOR_END"),
        "a line range": ("docs/src/a.md", "{{#include ../../plugins/p.rs:1:2}}\n", "line range"),
        "an inline sample": ("docs/src/a.md", "```python\na = 1\nb = 2\nc = 3\nd = 4\ne = 5\n```\n", "inline"),
        "a README sample not in its file": ("README.md", "```rust\n// plugins/p.rs\nfn g() {}\n```\n", "has no line"),
        "a page outside SUMMARY.md": ("docs/src/b.md", "# B\n", "not in SUMMARY"),
        "an undocumented controller": ("tests/testbed/cluster.sh", "--controllers=namespace-controller\n", "name it"),
        "a long README": ("README.md", "line\n" * README_LIMIT, "under 300"),
        "a work session": ("docs/src/a.md", "Measured in the fourth session.\n", "work session"),
        "a numbered period": ("tests/notes.md", "As the twenty-fourth found, it is faster.\n", "numbered period"),
        "an issue number": ("plugins/README.md", "Fixed for issue 55.\n", "issue"),
        "a history comment in deploy/": ("deploy/x.yaml", "# added in this PR\nkind: X\n", "change at hand"),
        "first person narrative": ("docs/src/a.md", "We tried a larger page yesterday.\n", "first person"),
    }

    def tree(files: dict[str, str]) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for name, content in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(content)
            return check(root)

    failures = []
    if found := tree(good):
        failures.append(f"the good tree fails: {found}")
    replaced = {"a long README", "an undocumented controller"}
    for case, (name, content, word) in broken.items():
        files = dict(good)
        files[name] = content if case in replaced else files.get(name, "") + "\n" + content
        found = tree(files)
        if not any(word in problem for problem in found):
            failures.append(f"{case} passes ({found})")
    for failure in failures:
        print(f"check-book self-test: {failure}", file=sys.stderr)
    if not failures:
        print(f"check-book self-test: {len(broken)} broken trees fail, the good one passes")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(__file__).resolve().parents[2]
    found = check(root)
    for problem in found:
        print(problem, file=sys.stderr)
    if found:
        print(f"check-book: {len(found)} problem(s)", file=sys.stderr)
        return 1
    pages = len(list((root / "docs" / "src").rglob("*.md"))) - 1
    print(f"check-book: {pages} pages, their links, includes and samples, and the project's Markdown are fine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
