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

import re
from dataclasses import dataclass, field

_FORMAT = {"extension": ".py", "format_name": "percent", "comment_magics": False}  # `# %cmd` stays a comment
_HEADER = re.compile(r"^\s*#\s*%%")  # what jupytext takes for a cell header (used to name a bad one)
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
    """The cells of an authored source, read by jupytext (py:percent, magics left as written).

    Blank lines around a cell are dropped and empty cells skipped; a header jupytext cannot read
    (tags not a JSON list of strings, unparsable key=value metadata) is a SourceError naming its line.
    """
    import jupytext  # here, not at the top: every `lmgrade` start (a student's `check`) imports this module

    try:
        nb = jupytext.reads(text, fmt=_FORMAT)
    except Exception as exc:  # jupytext raises validation errors, even AttributeError, on bad metadata
        raise SourceError(_bad_header(text) or f"jupytext could not read the source: {exc}") from None
    cells = []
    for cell in nb.cells:
        if not _good_metadata(cell.metadata):
            raise SourceError(_bad_header(text) or f"cell metadata jupytext could not read: {dict(cell.metadata)}")
        lines = cell.source.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        kind = "markdown" if cell.cell_type == "markdown" else "code"
        if lines:
            cells.append(SourceCell(kind, list(cell.metadata.get("tags", [])), "\n".join(lines)))
    return cells


def _good_metadata(metadata) -> bool:
    tags = metadata.get("tags", [])
    return "incorrectly_encoded_metadata" not in metadata and type(tags) is list and all(type(t) is str for t in tags)


def _bad_header(text: str) -> str | None:
    """Which cell header is malformed, with its line number (error path only: reads each header alone)."""
    import jupytext

    for number, line in enumerate(text.splitlines(), start=1):
        if not _HEADER.match(line):
            continue
        try:
            good = all(_good_metadata(c.metadata) for c in jupytext.reads(line + "\npass\n", fmt=_FORMAT).cells)
        except Exception:
            good = False
        if not good:
            return (f"line {number}: cannot read the cell header {line.strip()!r}: tags must be a JSON list of "
                    'strings, e.g. # %% tags=["graded"]')
    return None


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
