"""Finding a batch's submissions: files, one folder per student, Gradescope exports (a folder with
submission_metadata.yml, or its .zip), the student ids they belong to, and keys and file names
unique in the batch.

Why a module of its own: discovery only reads names and export metadata, never runs anything,
and a whole batch (`autograder.grading.batch`) and every shard of one (`autograder.grading.shard`)
must find exactly the same entries, keys and clash names from it.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.authoring.assignments import Assignment
from autograder.grading.results import clean

SUFFIXES = (".ipynb", ".py")
METADATA = "submission_metadata.yml"  # Gradescope's "Export Submissions" index
IGNORED_DIRS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".git", ".lmgrade"}


@dataclass
class Entry:
    """One submission to grade: the file, the student(s) it belongs to, and a unique key."""

    key: str  # unique and safe as a file name: names the record
    students: list[str]  # student ids; several for a Gradescope group submission
    path: Path | None  # the file graded; None when the submission holds no .ipynb or .py
    source: str  # as shown to people: the file or folder it came from (cleaned: no lone surrogates)
    note: str = ""  # e.g. which of several notebooks in a folder was graded
    links: list[str] = field(default_factory=list)  # symbolic links skipped for this submission
    people: list[dict[str, str]] = field(default_factory=list)  # export metadata per student ({name, email, sid})
    submission_id: str = ""  # Gradescope's submission id, for a submission from an export
    owner: str = ""  # the student id(s) as found, before clashes were renamed: what `--shard` partitions


def discover(inputs: list[Path], assignment: Assignment, workdir: Path, skip: Path | None = None) -> list[Entry]:
    """Submissions in files, folders (one file or one sub-folder per student), Gradescope exports
    (a folder with submission_metadata.yml, or its .zip), in a stable order with unique keys."""
    entries: list[Entry] = []
    for item in inputs:
        shown = None
        if item.is_file() and item.suffix.lower() == ".zip":
            item, shown = _unzip(item, workdir), item
        if item.is_dir():
            entries += _from_dir(item, assignment, skip, _Shown(item, shown))
        elif item.is_file():  # named by the TA on the command line: taken as given
            entries.append(Entry("", [student_id(item.stem, assignment.id)], item, clean(item)))
    for e in entries:  # before _unique_ids: a classmate's file never moves this student to another shard
        e.owner = "+".join(e.students)
    _unique_ids(entries)
    return entries


def _inside(path: Path, folder: Path) -> bool:
    """True when `path` is no link and resolves inside `folder` (never solutions/ or a classmate's file)."""
    try:
        return not path.is_symlink() and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False


def _link_entry(child: Path, assignment: Assignment, shown=clean) -> Entry:
    """A submission that is a symbolic link: listed with nothing graded, and the reason."""
    stem = child.stem if child.suffix.lower() in SUFFIXES else child.name
    return Entry("", [student_id(clean(stem), assignment.id)], None, shown(child),
                 f"{clean(child.name)} is a symbolic link; links are never followed or graded (submit the file itself).",
                 [shown(child)])


class _Shown:
    """Paths as the TA knows them: inside a .zip they name the archive, never the folder it was
    unpacked into under OUT/.lmgrade (that path means nothing to anyone reading grades.csv)."""

    def __init__(self, folder: Path, archive: Path | None):
        self.folder, self.archive = folder, archive

    def __call__(self, path: Path | str) -> str:
        if self.archive is None:
            return clean(path)
        try:
            return clean(self.archive / Path(path).relative_to(self.folder))
        except ValueError:
            return clean(path)


def _unzip(archive: Path, workdir: Path) -> Path:
    """Extract an export .zip under the output folder (zipfile drops absolute and '..' paths)."""
    target = workdir / "unzipped" / archive.stem
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(target)
    return target


def _visible(path: Path) -> bool:
    return not path.name.startswith(".") and path.name not in IGNORED_DIRS


def _from_dir(folder: Path, assignment: Assignment, skip: Path | None, shown: _Shown | None = None) -> list[Entry]:
    shown = shown or _Shown(folder, None)
    export = _export_root(folder)
    if export is not None:
        return _from_export(export, assignment, shown)
    entries = []
    for child in sorted(folder.iterdir()):
        if not _visible(child) or (skip is not None and child.resolve() == skip.resolve()):
            continue
        if not _inside(child, folder):
            if child.suffix.lower() in SUFFIXES or child.is_dir():
                entries.append(_link_entry(child, assignment, shown))
            continue
        if child.is_file() and child.suffix.lower() in SUFFIXES:
            entries.append(Entry("", [student_id(clean(child.stem), assignment.id)], child, shown(child)))
        elif child.is_dir():
            path, note, links = pick_file(child, assignment)
            entries.append(Entry("", [student_id(clean(child.name), assignment.id)], path, shown(child), note,
                                 [shown(link) for link in links]))
    return entries


def _export_root(folder: Path) -> Path | None:
    """The folder holding submission_metadata.yml: this one, or its only sub-folder (an unzipped export)."""
    if (folder / METADATA).is_file():
        return folder
    subdirs = [d for d in folder.iterdir() if d.is_dir() and not d.is_symlink() and _visible(d)]
    if len(subdirs) == 1 and (subdirs[0] / METADATA).is_file():
        return subdirs[0]
    return None


def _from_export(root: Path, assignment: Assignment, shown: _Shown) -> list[Entry]:
    """One entry per `submission_<id>/` folder, its students (id, name, e-mail) from the metadata:
    Gradescope's own identities, so that grades.csv can be matched back to its roster."""
    metadata = read_gradescope_metadata(root / METADATA)
    entries = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or not _visible(child):
            continue
        people = [{k: clean(p.get(k, "")) for k in ("name", "email", "sid")} for p in metadata.get(child.name, [])]
        people = [p for p in people if p["sid"] or p["email"] or p["name"]]
        ids = [p["sid"] or p["email"] or p["name"] for p in people] or [clean(child.name)]
        number = re.fullmatch(r"submission_(\d+)", child.name)
        if not _inside(child, root):
            entry = _link_entry(child, assignment, shown)
            entry.students = ids
        else:
            path, note, links = pick_file(child, assignment)
            entry = Entry("", ids, path, shown(child), note, [shown(link) for link in links])
        entry.people = people or [{"name": "", "email": "", "sid": ""}]
        entry.submission_id = number.group(1) if number else clean(child.name)
        entries.append(entry)
    return entries


def read_gradescope_metadata(path: Path) -> dict[str, list[dict[str, str]]]:
    """folder name -> submitters ({name, sid, email}) from an export's submission_metadata.yml.

    Only the few keys needed are read, line by line, so no YAML library is needed:
        submission_123456:
          :submitters:
          - :name: Ada Lovelace
            :sid: '1815'
            :email: ada@example.edu
          :created_at: ...
    """
    found: dict[str, list[dict[str, str]]] = {}
    current, level = None, None  # level: the indent of `:submitters:` while inside its list
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        top = re.match(r"^(['\"]?)([^\s:'\"-][^:]*?)\1:\s*$", line)
        if top:
            current, level = top.group(2), None
            found[current] = []
            continue
        item = re.match(r"^(\s*)(-\s+)?:?(\w+):(?:\s+(.*))?$", line)
        if current is None or not item:
            continue
        indent, dash, key, value = len(item.group(1)), item.group(2), item.group(3), _unquote(item.group(4) or "")
        if level is not None:
            if dash:
                found[current].append({})
            elif indent <= level:
                level = None  # a sibling key of :submitters: ends the list
        if level is not None and found[current] and key in ("name", "sid", "email"):
            found[current][-1][key] = value
        if key == "submitters":
            level = indent
    return found


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return "" if value in ("~", "null") else value


def student_id(stem: str, assignment_id: str) -> str:
    """A student id from a file or folder name: the name without the assignment's id.

    `alice_ngram.ipynb` -> alice, `ngram-bob.py` -> bob, `carol.ipynb` -> carol.
    """
    sep = r"[\s_.\-]"
    cleaned = re.sub(rf"(^|{sep}+){re.escape(assignment_id)}(?={sep}|$)", "", stem, flags=re.I)
    cleaned = re.sub(rf"^{sep}+|{sep}+$", "", cleaned)
    return cleaned or stem


def pick_file(folder: Path, assignment: Assignment) -> tuple[Path | None, str, list[str]]:
    """The file to grade in one student's folder: a notebook before a .py, the starter's name
    before one that mentions the assignment before anything else; a note when there was a choice.
    Symbolic links (files or folders) are never followed: they come back as the third item."""
    candidates, links = [], []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if _visible(Path(d)))
        for name in dirnames + filenames:
            path = here / name
            if path.is_symlink() and (name in dirnames or path.suffix.lower() in SUFFIXES):
                links.append(clean(path))
        for name in sorted(filenames):
            path = here / name
            if _visible(path) and path.suffix.lower() in SUFFIXES and _inside(path, folder) and path.is_file():
                candidates.append(path)
    candidates.sort()
    notebooks = [p for p in candidates if p.suffix.lower() == ".ipynb"] or candidates
    if not notebooks:
        note = (f"Skipped {len(links)} symbolic link(s) ({', '.join(Path(l).name for l in links[:5])}): links are "
                "never followed or graded; submit the files themselves.") if links else ""
        return None, note, links
    starter = assignment.starter_path.name.lower()
    chosen = min(notebooks, key=lambda p: (p.name.lower() != starter, assignment.id not in p.stem.lower(),
                                           len(p.relative_to(folder).parts), str(p)))
    note = ""
    if len(notebooks) > 1:
        note = f"{len(notebooks)} candidate files in the submission; graded {clean(chosen.relative_to(folder))}."
    if links:
        note += (" " if note else "") + f"Skipped {len(links)} symbolic link(s): links are never followed or graded."
    return chosen, note, links


def _unique_ids(entries: list[Entry]) -> None:
    """Keys and ids unique: a clash (alice.py and alice.ipynb) takes the file name instead."""
    counts: dict[str, int] = {}
    for e in entries:
        for s in e.students:
            counts[s] = counts.get(s, 0) + 1
    for e in entries:
        if any(counts[s] > 1 for s in e.students):
            e.students = [f"{s} ({Path(e.source).name})" if counts[s] > 1 else s for s in e.students]
    keys = unique_names(["+".join(e.students) for e in entries], r"[^A-Za-z0-9._@+-]+")
    for e in entries:
        e.key = keys["+".join(e.students)]


def unique_names(names: list[str], unsafe: str = r"[^A-Za-z0-9._@+ ()-]+") -> dict[str, str]:
    """name -> a file name safe and unique on every file system, the same whatever else is in the batch.

    Why: `john~smith` and `john_smith` both became john_smith.txt and one student's feedback
    replaced the other's. A name that had to be changed (or that differs from another only in
    case, for macOS and Windows) gets a short hash of the original, so no two originals meet.
    """
    def safe(name: str) -> str:
        return re.sub(unsafe, "_", name).strip(". ")[:100] or "student"

    def hashed(name: str) -> str:
        return f"{safe(name)}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"

    distinct = sorted(set(names))
    folded: dict[str, int] = {}  # names kept as they are, by case-folded form
    for name in distinct:
        if safe(name) == name:
            folded[name.casefold()] = folded.get(name.casefold(), 0) + 1
    chosen: dict[str, str] = {}
    used: set[str] = set()
    for name in distinct:
        plain = safe(name) == name and folded[name.casefold()] == 1
        candidate = base = name if plain else hashed(name)
        n = 2
        while candidate.casefold() in used:  # a hashed name that equals someone's plain name: never in practice
            candidate, n = f"{base}-{n}", n + 1
        used.add(candidate.casefold())
        chosen[name] = candidate
    return chosen
