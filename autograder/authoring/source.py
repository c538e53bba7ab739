"""Read an authored assignment source (jupytext percent format) and render its two variants.

Why one source: narrative, stubs and solution sit side by side, so staff never keep two copies in
sync by hand. A solution region

    # BEGIN SOLUTION: count_ngrams: pad each sentence, then slide a window
    ...
    # END SOLUTION

becomes `raise NotImplementedError("count_ngrams: pad each sentence, then slide a window")` in the
starter and plain code in the solution. Cells tagged "solution" exist only in the solution, cells
tagged "starter" only in the starter (a written answer's blank and its staff answer).

Written questions (exported by `lmgrade export`): a markdown cell tagged "written" asks the
question (its first line is a heading, "### Written question 2: ..."), the markdown cells tagged
"answer" after it hold the student's answer, and the code cells tagged "figure" before it (since
the previous written question) make the figures and printed results it is about.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^# %%(?P<rest>.*)$")
_BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION(?::\s*(?P<hint>.*?))?\s*$")
_END = re.compile(r"^\s*# END SOLUTION\s*$")


class SourceError(ValueError):
    """The authored source is malformed (unbalanced regions, bad tags)."""


@dataclass
class SourceCell:
    kind: str  # "markdown" or "code"
    tags: list[str] = field(default_factory=list)
    text: str = ""  # markdown without the '# ' prefixes, or code with regions still marked

    @property
    def graded(self) -> bool:
        return "graded" in self.tags


def parse(text: str) -> list[SourceCell]:
    cells: list[SourceCell] = []
    current: SourceCell | None = None
    body: list[str] = []
    for number, line in enumerate(text.splitlines() + ["# %%"], start=1):
        m = _HEADER.match(line)
        if not m:
            body.append(line)
            continue
        if current is not None:
            current.text = _finish(current.kind, body)
            cells.append(current)
        rest = m.group("rest").strip()
        kind = "markdown" if rest.startswith("[markdown]") else "code"
        tags = []
        tag_match = re.search(r"tags=(\[.*\])", rest)
        if tag_match:
            try:
                tags = json.loads(tag_match.group(1))
            except json.JSONDecodeError:
                raise SourceError(f"line {number}: tags must be a JSON list, e.g. tags=[\"graded\"]") from None
        current, body = SourceCell(kind, tags), []
    return [c for c in cells if c.text]


def _finish(kind: str, body: list[str]) -> str:
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    if kind == "markdown":
        body = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in body]
    return "\n".join(body)


def _regions(code: str):
    """Yield (kind, lines): kind is 'plain' or ('solution', indent, hint)."""
    plain: list[str] = []
    region: list[str] | None = None
    opener = None
    for line in code.splitlines():
        begin, end = _BEGIN.match(line), _END.match(line)
        if begin:
            if region is not None:
                raise SourceError(f"nested BEGIN SOLUTION: {line.strip()}")
            yield "plain", plain
            plain, region, opener = [], [], begin
        elif end:
            if region is None:
                raise SourceError("END SOLUTION without BEGIN SOLUTION")
            yield ("solution", opener.group("indent"), opener.group("hint") or "not implemented yet"), region
            region = None
        elif region is not None:
            region.append(line)
        else:
            plain.append(line)
    if region is not None:
        raise SourceError("BEGIN SOLUTION without END SOLUTION")
    yield "plain", plain


def starter_code(code: str) -> str:
    out: list[str] = []
    for kind, lines in _regions(code):
        if kind == "plain":
            out += lines
        else:
            _, indent, hint = kind
            out.append(f"{indent}raise NotImplementedError({hint!r})")
    return "\n".join(out)


def solution_code(code: str) -> str:
    out: list[str] = []
    for _, lines in _regions(code):
        out += lines
    return "\n".join(out)


def solution_lines(code: str) -> list[str]:
    """The lines inside solution regions: what must never reach a starter."""
    return [line for kind, lines in _regions(code) if kind != "plain" for line in lines]
