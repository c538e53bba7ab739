"""Pairs of students whose graded cells are unusually alike, for a TA to look at: similarity.csv
and a section of report.html. Never in feedback or results.json; a TA decides what it means.

How (winnowing, as MOSS does; Schleimer, Wilkerson and Aiken 2003): each submission's graded
cells become one stream of tokens in which what a copier changes for free is gone: comments,
docstrings and layout are dropped, every name the student chose (variables, parameters, functions,
classes, their own attributes) becomes `V`, every number `N` and every string `S`; keywords,
operators, builtins and imported library names stay, since those carry the program's shape. Every
run of K tokens is hashed; a k-gram that is in the starter notebook (the code everyone was given)
or in more than `common_limit` submissions (code the class shares, not copied between two) is set
aside; of the rest, winnowing keeps the smallest hash of every WINDOW consecutive ones, so any
common run of at least K + WINDOW - 1 tokens is found. Two submissions sharing fingerprints are a
pair; its score is the larger of the two shares of a student's own tokens (those not from the
starter) that the shared fingerprints cover: the larger, so a student who copied a few functions
of a classmate's long notebook scores high (the averaged share would drown them). Reordered
functions, renamed variables, new comments and a reformatted file keep almost every fingerprint.

Why our own code rather than `copydetect` (a PyPI package doing the same winnowing): measured on
tests/test_similarity.py's batch (twelve correct staff variants, a planted disguised copy, two
untouched starters; the starter as its boilerplate), copydetect 0.5.0 ranked the copy 67th of 91
pairs and honest pairs first at up to 99%, since it cannot set aside what most of the class
shares; this module ranks the copy first and keeps honest pairs under 5%. Python's own tokenizer
also tells names apart by what they are (a builtin, an imported library, the student's
variable), and everything is deterministic (the same bytes from one run or a merge of shards, as
report.py requires). It needs nothing beyond numpy, already a dependency; 201 submissions take
about 5 s of CPU, nearly all of it reading and tokenizing (docs/tas.md).

Student files are read here, in the trusted process, with `extract.read_submission` (the grader's
own reader, which runs nothing), and only when their bytes are those that were graded (the
record's sha256).
"""
from __future__ import annotations

import ast
import builtins
import csv
import hashlib
import html
import io
import keyword
import tokenize
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autograder.grading.results import clean
from autograder.sandbox import extract

K = 12  # tokens per k-gram: shorter runs are idiom (`for V in range ( V ) :`)
WINDOW = 6  # winnowing window: every shared run of K + WINDOW - 1 = 17 tokens is found
COMMON_LIMIT = 10  # a fingerprint in more submissions than this (or half the batch) is shared code (MOSS's -m)
MIN_MATCH = 40  # tokens each side must share (about three lines of code) for a pair to be listed
MAX_TOKENS = 50_000  # per submission: the graded cells of a real one have a few thousand
PAIRS_SHOWN = 20  # pairs with excerpts in report.html; similarity.csv has every pair listed
EXCERPTS = 3  # matching regions shown side by side per pair, the longest first
EXCERPT_LINES = 30  # lines of one region shown
_MASK = np.uint64(2**64 - 1)
_BUILTINS = frozenset(dir(builtins))
_KEYWORDS = frozenset(keyword.kwlist)
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_CLOSERS = {")", "]", "}"}


# ---- one submission as tokens ------------------------------------------------------------------
@dataclass
class Doc:
    """One submission's graded cells as normalised tokens, with where each came from."""

    key: str  # the batch record's key
    students: list[str]
    source: str  # as grades.csv shows it
    cells: list[extract.Cell]
    texts: list[str] = field(default_factory=list)  # normalised token texts
    where: list[tuple[int, int]] = field(default_factory=list)  # (index in cells, line) per token
    truncated: bool = False


@dataclass
class Names:
    """What a submission's names are, from all its graded cells (a notebook's cells share one
    namespace): imported names and what they stand for, and the attributes the student made."""

    aliases: dict[str, str] = field(default_factory=dict)  # `np` -> `numpy`, `Counter` -> `Counter`
    own_attrs: set[str] = field(default_factory=set)  # assigned as `x.name = ...`, or defined by `def`/`class`


def names_of(trees: list[ast.Module]) -> Names:
    names = Names()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    names.aliases.update({part: part for part in a.name.split(".")})
                    if a.asname:
                        names.aliases[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom):
                names.aliases.update({part: part for part in (node.module or "").split(".") if part})
                for a in node.names:
                    names.aliases[a.name] = a.name
                    if a.asname:
                        names.aliases[a.asname] = a.name
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.own_attrs.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.own_attrs.add(node.name)
    return names


def normalised_tokens(source: str, names: Names | None = None, tree: ast.Module | None = None,
                      limit: int = MAX_TOKENS) -> tuple[list[str], list[int]]:
    """The tokens of one cell with names, literals, comments and layout set aside, and their lines.

    Names the student chose become `V`; builtins, keywords and imported libraries keep their
    spelling (an alias becomes what it names: `np` is `numpy`); an attribute keeps its name unless
    the student assigns it or defines it (`self.counts`, a helper method), so library calls like
    `.items()` stay. Docstrings and other bare strings are dropped; NEWLINE is `;`, INDENT and DEDENT
    are `{` and `}`; a trailing comma before a closing bracket is dropped (a formatter adds it).
    Stops after `limit` tokens (a hostile cell can be megabytes).
    """
    tree = tree or ast.parse(source)
    names = names or names_of([tree])
    aliases, own_attrs = names.aliases, names.own_attrs
    bare = {node.lineno for node in ast.walk(tree)  # lines where a bare string (a docstring) starts
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}
    texts: list[str] = []
    lines: list[int] = []
    after_dot = dropping = False
    starts = True  # the next token starts a statement
    depth = 0  # inside an f-string (Python 3.12 splits them into parts)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if len(texts) > limit:
            break
        kind, text = tok.type, tok.string
        name = tokenize.tok_name.get(kind, "")
        if name.startswith("FSTRING_"):
            depth += (name == "FSTRING_START") - (name == "FSTRING_END")
            if name == "FSTRING_END" and depth == 0:
                texts.append("S")
                lines.append(tok.start[0])
            continue
        if depth or kind in _SKIP:
            continue
        if kind == tokenize.STRING and ((starts and tok.start[0] in bare) or dropping):
            dropping, starts = True, False  # implicit concatenation continues a bare string
            continue
        starts = kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        if dropping and kind == tokenize.NEWLINE:
            dropping = False
            continue
        dropping = False
        if kind == tokenize.NAME:
            if text in _KEYWORDS:
                out = text
            elif after_dot:
                out = "V" if text in own_attrs else text
            elif text in aliases:
                out = aliases[text]
            elif text in _BUILTINS:
                out = text
            else:
                out = "V"
        elif kind == tokenize.NUMBER:
            out = "N"
        elif kind == tokenize.STRING:
            out = "S"
        elif kind == tokenize.NEWLINE:
            out = ";"
        elif kind == tokenize.INDENT:
            out = "{"
        elif kind == tokenize.DEDENT:
            out = "}"
        else:
            out = text
        if out in _CLOSERS and texts and texts[-1] == ",":
            texts.pop()
            lines.pop()
        after_dot = out == "."
        texts.append(out)
        lines.append(tok.start[0])
    return texts, lines


def read_doc(key: str, students: list[str], source: str, cells: list[extract.Cell]) -> Doc:
    """A submission's graded cells, in notebook order, as one stream of tokens."""
    doc = Doc(key=key, students=students, source=source, cells=cells)
    trees = {}
    for i, cell in enumerate(cells):
        try:
            trees[i] = ast.parse(cell.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass  # the grader could not read it either (and said so in the feedback)
    names = names_of(list(trees.values()))
    for i, cell in enumerate(cells):
        if i not in trees:
            continue
        try:
            texts, lines = normalised_tokens(cell.source, names, trees[i], MAX_TOKENS - len(doc.texts))
        except (SyntaxError, ValueError, tokenize.TokenError, RecursionError, MemoryError):
            continue
        room = MAX_TOKENS - len(doc.texts)
        if len(texts) > room:
            texts, lines, doc.truncated = texts[:room], lines[:room], True
        doc.texts += texts
        doc.where += [(i, line) for line in lines]
        if doc.truncated:
            break
    return doc


# ---- fingerprints ------------------------------------------------------------------------------
def kgram_hashes(texts: list[str]) -> np.ndarray:
    """One 64-bit hash per run of K tokens, the same on every machine and in every process
    (Python's own `hash` of a string changes with PYTHONHASHSEED)."""
    m = len(texts) - K + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    codes = np.fromiter((zlib.crc32(t.encode()) for t in texts), dtype=np.uint64, count=len(texts))
    h = np.zeros(m, dtype=np.uint64)
    base = np.uint64(0x100000001B3)
    with np.errstate(over="ignore"):
        for j in range(K):
            h = h * base + codes[j:j + m]
        h ^= h >> np.uint64(31)  # mixed, so the smallest in a window is any position's alike
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(29)
    h[h == _MASK] -= np.uint64(1)  # the mask value means "set aside"
    return h


def winnow(h: np.ndarray) -> np.ndarray:
    """Positions of the fingerprints: the smallest hash of every WINDOW consecutive ones (the
    rightmost on a tie), never a masked position."""
    if h.size == 0:
        return np.zeros(0, dtype=np.int64)
    if h.size <= WINDOW:
        pos = np.array([h.size - 1 - int(np.argmin(h[::-1]))])
    else:
        windows = np.lib.stride_tricks.sliding_window_view(h, WINDOW)
        pos = np.arange(len(windows)) + (WINDOW - 1 - np.argmin(windows[:, ::-1], axis=1))
    pos = np.unique(pos)
    return pos[h[pos] != _MASK]


@dataclass
class Pair:
    """Two submissions that share fingerprints no one else's (few others') have."""

    a: Doc
    b: Doc
    score: float  # the larger share of a side's own tokens covered by shared fingerprints, 0..1
    matched: tuple[int, int]  # tokens covered, in a and in b
    own: tuple[int, int]  # tokens not from the starter, in a and in b
    regions: list[tuple[tuple[int, int], tuple[int, int]]]  # ((first, last) token in a, same in b), longest first


@dataclass
class Findings:
    """What the batch's comparison found, for similarity.csv and report.html."""

    pairs: list[Pair] = field(default_factory=list)  # the most alike first
    compared: int = 0  # submissions compared
    left_out: list[str] = field(default_factory=list)  # submissions not compared, and why
    common_limit: int = COMMON_LIMIT
    starter: bool = False  # whether starter code was set aside
    error: str = ""  # the comparison itself failed: the rest of the batch's files are still written


def compare(docs: list[Doc], starter: list[str] | None = None) -> Findings:
    """Every pair of `docs` sharing at least MIN_MATCH tokens on each side of fingerprints that are
    neither in `starter` (its tokens, `normalised_tokens` of the starter's graded cells) nor
    common to more than `common_limit` submissions, the most alike first."""
    limit = max(2, min(COMMON_LIMIT, len(docs) // 2))
    found = Findings(compared=len(docs), common_limit=limit, starter=bool(starter))
    hashes = [kgram_hashes(d.texts) for d in docs]
    set_aside = kgram_hashes(starter) if starter else np.zeros(0, dtype=np.uint64)
    own = []
    for h, d in zip(hashes, docs):  # tokens not covered by a starter k-gram: the student's own
        covered = _cover(np.flatnonzero(np.isin(h, set_aside)), len(d.texts))
        own.append(len(d.texts) - covered)
    if docs:
        values, counts = np.unique(np.concatenate([np.unique(h) for h in hashes]), return_counts=True)
        set_aside = np.union1d(set_aside, values[counts > limit])
    prints = []  # per doc: fingerprint hash -> its positions
    for h in hashes:
        masked = np.where(np.isin(h, set_aside), _MASK, h)
        table: dict[int, list[int]] = {}
        for p in winnow(masked).tolist():
            table.setdefault(int(masked[p]), []).append(p)
        prints.append(table)
    owners: dict[int, list[int]] = {}
    for i, table in enumerate(prints):
        for value in table:
            owners.setdefault(value, []).append(i)
    shared: dict[tuple[int, int], list[int]] = {}
    for value, who in owners.items():
        for x in range(len(who)):
            for y in range(x + 1, len(who)):
                shared.setdefault((who[x], who[y]), []).append(value)
    for (i, j), values in shared.items():
        a_pos = [p for v in values for p in prints[i][v]]
        b_pos = [p for v in values for p in prints[j][v]]
        matched = (_cover(np.array(a_pos), len(docs[i].texts)), _cover(np.array(b_pos), len(docs[j].texts)))
        if min(matched) < MIN_MATCH:
            continue
        score = max(matched[0] / max(1, own[i]), matched[1] / max(1, own[j]))
        found.pairs.append(Pair(docs[i], docs[j], min(1.0, score), matched, (own[i], own[j]),
                                _regions(docs[i], docs[j], prints[i], prints[j], values)))
    found.pairs.sort(key=lambda p: (-round(p.score, 6), -sum(p.matched), p.a.key, p.b.key))
    return found


def _cover(positions: np.ndarray, length: int) -> int:
    """Tokens inside [p, p + K) for some p in `positions`."""
    if positions.size == 0:
        return 0
    hit = np.zeros(length + K, dtype=bool)
    for j in range(K):
        hit[positions + j] = True
    return int(hit[:length].sum())


def _regions(a: Doc, b: Doc, pa: dict, pb: dict, values: list[int]):
    """Runs of shared fingerprints that follow each other in both submissions, inside one cell of
    each: ((first, last token in a), (first, last in b)), the longest first."""
    matches = sorted((x, y) for v in values for x in pa[v][:4] for y in pb[v][:4])
    runs: list[list[int]] = []  # [first a, last a, first b, last b]
    for x, y in matches:
        for run in reversed(runs[-3:]):
            if (0 <= x - run[1] <= K + WINDOW and -K <= y - run[3] <= K + WINDOW
                    and a.where[x][0] == a.where[run[0]][0] and b.where[y][0] == b.where[run[2]][0]):
                run[1], run[3] = x, max(run[3], y)
                run[2] = min(run[2], y)
                break
        else:
            runs.append([x, x, y, y])
    last_a, last_b = len(a.texts) - 1, len(b.texts) - 1
    out = [((r[0], min(r[1] + K - 1, last_a)), (r[2], min(r[3] + K - 1, last_b))) for r in runs]
    out.sort(key=lambda r: (-(r[0][1] - r[0][0]), r[0][0]))
    return out


# ---- the batch -------------------------------------------------------------------------------
def in_batch(result, assignment) -> Findings:
    """Compare every graded submission of a batch (`records.BatchResult`); never raises: whatever
    goes wrong is in `Findings.error`, and the batch's other files are written as ever."""
    try:
        return _in_batch(result, assignment)
    except Exception as exc:  # noqa: BLE001 - similarity is a view for TAs; grades never depend on it
        return Findings(error=clean(f"{type(exc).__name__}: {exc}"))


def _in_batch(result, assignment) -> Findings:
    docs, left_out = [], []
    for entry in result.entries:
        record = result.records.get(entry.key) or {}
        who = ", ".join(entry.students)
        if entry.path is None or record.get("missing") or record.get("problem"):
            continue  # no file, unreadable or another assignment's: nothing of theirs to compare
        try:
            raw = Path(entry.path).read_bytes()
        except OSError as exc:
            left_out.append(clean(f"{who}: could not read {entry.source} ({exc.strerror})"))
            continue
        if hashlib.sha256(raw).hexdigest() != record.get("sha256"):
            left_out.append(clean(f"{who}: {entry.source} changed since it was graded; grade again to compare it"))
            continue
        sub = extract.read_submission(entry.path)
        doc = read_doc(entry.key, list(entry.students), entry.source, sub.cells)
        if doc.truncated:
            left_out.append(clean(f"{who}: only the first {MAX_TOKENS} tokens of the graded cells were compared"))
        docs.append(doc)
    starter = None
    if Path(assignment.starter_path).is_file():
        given = extract.read_submission(assignment.starter_path)
        starter = read_doc("", [], "", given.cells).texts
    found = compare(docs, starter)
    found.left_out = left_out
    return found


# ---- similarity.csv ------------------------------------------------------------------------------
def csv_text(found: Findings) -> str:
    """similarity.csv: one row per pair listed, the most alike first; no code in it, only where."""
    from autograder.grading.outputs import csv_cell  # outputs imports this module

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["rank", "student_a", "student_b", "similarity", "matched_tokens_a", "own_tokens_a",
                     "matched_tokens_b", "own_tokens_b", "matching_regions", "submission_a", "submission_b"])
    for rank, p in enumerate(found.pairs, 1):
        writer.writerow([rank, csv_cell(", ".join(p.a.students)), csv_cell(", ".join(p.b.students)), f"{p.score:.3f}",
                         p.matched[0], p.own[0], p.matched[1], p.own[1],
                         csv_cell("; ".join(f"{_place(p.a, ra)} = {_place(p.b, rb)}" for ra, rb in p.regions)),
                         csv_cell(p.a.source), csv_cell(p.b.source)])
    return buf.getvalue()


def _lines(doc: Doc, span: tuple[int, int]) -> tuple[extract.Cell, int, int]:
    cell = doc.where[span[0]][0]
    first = doc.where[span[0]][1]
    last = max(line for c, line in doc.where[span[0]:span[1] + 1] if c == cell)
    return doc.cells[cell], first, last


def _place(doc: Doc, span: tuple[int, int]) -> str:
    cell, first, last = _lines(doc, span)
    return f"cell {cell.number} lines {first}-{last}"


# ---- report.html's section -----------------------------------------------------------------------
def html_section(found: Findings | None, links: dict[str, str] | None = None) -> str:
    """The section of report.html: the pairs, the most alike first, each with its longest matching
    regions side by side. Everything from a submission is escaped."""
    head = "<h2 id='similarity'>Similarity (staff only)</h2>"
    if found is None:
        return ""
    if found.error:
        return head + f"<p class='note'>The comparison could not run: {_e(found.error)}</p>"
    links = links or {}
    ignored = (f"the starter notebook's code and code found in more than {found.common_limit} submissions are"
               if found.starter else f"code found in more than {found.common_limit} submissions is")
    parts = [head, "<p class='note'>Pairs of submissions whose graded cells are unusually alike once comments, "
             f"docstrings, layout, names and literals are set aside; {ignored} ignored. <b>similarity</b>: the larger of the two shares of a "
             "student's own code (not the starter's) found in the other's. Alike is not copied: read the excerpts; "
             "a TA decides. Never show this section to students. Every pair is in similarity.csv.</p>",
             f"<p>{found.compared} submissions compared; {len(found.pairs)} pair"
             f"{'s' if len(found.pairs) != 1 else ''} share at least {MIN_MATCH} tokens each.</p>"]
    if found.left_out:
        parts.append("<p class='note'>Not compared: " + "; ".join(_e(x) for x in found.left_out) + "</p>")
    if not found.pairs:
        return "".join(parts)
    rows = []
    for rank, p in enumerate(found.pairs[:PAIRS_SHOWN], 1):
        rows.append(f"<tr><td class='num'><a href='#pair-{rank}'>{rank}</a></td><td>{_who(p.a, links)}</td>"
                    f"<td>{_who(p.b, links)}</td><td class='num'>{p.score:.0%}</td>"
                    f"<td class='num'>{p.matched[0]} / {p.own[0]}</td><td class='num'>{p.matched[1]} / {p.own[1]}</td></tr>")
    parts.append("<table><tr><th>#</th><th>student a</th><th>student b</th><th>similarity</th>"
                 "<th>a: tokens matched / own</th><th>b: tokens matched / own</th></tr>" + "".join(rows) + "</table>")
    if len(found.pairs) > PAIRS_SHOWN:
        parts.append(f"<p class='note'>The {len(found.pairs) - PAIRS_SHOWN} other pairs are in similarity.csv.</p>")
    for rank, p in enumerate(found.pairs[:PAIRS_SHOWN], 1):
        parts.append(f"<h3 id='pair-{rank}'>{rank}. {_who(p.a, links)} and {_who(p.b, links)}: {p.score:.0%}</h3>")
        for ra, rb in p.regions[:EXCERPTS]:
            parts.append("<table><tr>" + _excerpt(p.a, ra) + _excerpt(p.b, rb) + "</tr></table>")
        if len(p.regions) > EXCERPTS:
            parts.append(f"<p class='note'>and {len(p.regions) - EXCERPTS} shorter matching region(s).</p>")
    return "".join(parts)


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _who(doc: Doc, links: dict[str, str]) -> str:
    return ", ".join(f"<a href=\"{_e(links[s])}\">{_e(s)}</a>" if s in links else _e(s) for s in doc.students)


def _excerpt(doc: Doc, span: tuple[int, int]) -> str:
    cell, first, last = _lines(doc, span)
    lines = cell.source.splitlines()[first - 1:last]
    more = len(lines) - EXCERPT_LINES
    shown = "\n".join(f"{first + i:4d}  {line}" for i, line in enumerate(lines[:EXCERPT_LINES]))
    if more > 0:
        shown += f"\n      ... {more} more line(s)"
    return (f"<td style='width:50%'><div class='note'>{_e(', '.join(doc.students))}: {_e(cell.label)}, lines "
            f"{first}-{last}</div><pre style='white-space:pre-wrap;font-size:12px'>{_e(shown)}</pre></td>")
