"""Grade a batch of submissions: what a TA runs over a folder or a Gradescope export.

Why a module of its own: a batch must survive anything one submission does, resume where it
stopped, and leave files a TA can use (grades.csv, one feedback file per student, a summary, a
histogram, and the class's leaderboard.csv and report.html from `autograder.grading.report`). Each
submission is graded by `runner.grade` inside one of `--jobs` long-lived grader processes; if a
grader process dies (the submission killed it, or the machine ran out of memory) that submission
is retried once in a fresh one and otherwise recorded as an error, and the batch goes on. Results
are kept as one record per submission under OUT/.lmgrade/records; grades.csv, the feedback files
and the rest are written at the end by this (trusted) process from what it read at
start-up and what its graders sent back, never from files a worker could have written meanwhile.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import queue
import re
import select
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.authoring import assignments
from autograder.authoring.assignments import Assignment
from autograder.grading import results, runner
from autograder.grading import report as class_report
from autograder.grading.results import clean
from autograder.grading.runner import CheckResult, Report
from autograder.sandbox import extract, lifecycle as sandbox

SUFFIXES = (".ipynb", ".py")
METADATA = "submission_metadata.yml"  # Gradescope's "Export Submissions" index
IGNORED_DIRS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".git", ".lmgrade"}
RECORD_VERSION = 2  # 2: keys that never collide, records saved as each submission finishes
SUBMISSION_TIMEOUT = 3600.0  # seconds for one whole submission, a backstop behind the per-call deadlines
REDACTED = "[hidden: text from the grader's files]"
MIN_SECRET_LINE = 24  # shorter lines (`return counts`) are too common to count as leaked


# ---- finding submissions ---------------------------------------------------------------------
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


def check_specs(assignment: Assignment) -> list:
    """The declarations (question, points, ...) of the assignment's checks."""
    return [fn.lmgrade_check for fn in assignment.checks()]


# ---- records: what was graded, kept for resuming ----------------------------------------------
def file_digest(path: Path | None) -> str:
    if path is None:
        return ""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checks_digest(assignment: Assignment) -> str:
    """Changes whenever the checks, their fixtures, limits or the reference change: then regrade."""
    digest = hashlib.sha256()
    for path in (assignment.dir / "public_checks.py", assignment.dir / "hidden_checks.py", assignment.dir / "meta.toml",
                 assignment.fixtures_path, assignment.reference_path):
        digest.update(path.name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    return digest.hexdigest()[:24]


def report_to_dict(report: Report) -> dict:
    return dataclasses.asdict(report)


def report_from_dict(doc: dict) -> Report:
    names = {f.name for f in dataclasses.fields(CheckResult)}
    checks = [CheckResult(**{k: v for k, v in r.items() if k in names}) for r in doc.get("results", [])]
    keep = {f.name for f in dataclasses.fields(Report)} - {"results"}
    return Report(results=checks, **{k: v for k, v in doc.items() if k in keep})


def _write_text(path: Path, text: str) -> None:
    """Atomic (readers see the old file or the whole new one), group-readable, never fatal on odd text."""
    results.write_text(path, text)


def load_records(folder: Path) -> dict[str, dict]:
    records = {}
    if folder.is_dir():
        for path in folder.glob("*.json"):
            try:
                doc = json.loads(path.read_text())
                if doc.get("version") == RECORD_VERSION and type(doc.get("key")) is str:
                    records[doc["key"]] = doc
            except (OSError, ValueError, RecursionError, AttributeError):
                continue  # a damaged record: that submission is graded again
    return records


# ---- redaction: no grader file text in feedback -----------------------------------------------
def secret_lines(assignment: Assignment) -> set[str]:
    """Lines of the reference, hidden checks and authored source that students never see.

    Why: where the worker runs as the grader's own user without Landlock, it can read these
    files and print them; feedback then shows the reader a placeholder instead. A speed bump
    (re-encoded text passes), not the protection: that is a separate user or Landlock.
    """
    secret_files = [assignment.reference_path] + [p for p in sorted(assignment.dir.rglob("*")) if p.is_file()
                                                  and p.name not in ("public_checks.py", "public_fixtures.json")]
    public_text = ""
    for path in (assignment.dir / "public_checks.py", assignment.starter_path):
        if path.exists():
            public_text += path.read_text(errors="replace")
    if assignment.starter_path.exists():  # cell sources, not the JSON-escaped text
        try:
            nb = extract.read_notebook(assignment.starter_path)
            public_text += "\n".join("".join(c.get("source", "")) for c in nb.get("cells", []))
        except ValueError:
            pass
    public = {line.strip() for line in public_text.splitlines()}
    lines = set()
    for path in secret_files:
        if path.exists() and path.stat().st_size < 5 << 20:
            lines |= {s for s in (line.strip() for line in path.read_text(errors="replace").splitlines())
                      if len(s) >= MIN_SECRET_LINE and s not in public}
    return lines


def own_lines(path: Path) -> set[str]:
    """Every stripped line of a submission's code, all cells of a notebook included."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return set()
    if path.suffix.lower() == ".ipynb":
        try:
            cells = extract.parse_notebook(text)["cells"]
            text = "\n".join("".join(map(str, c["source"])) if isinstance(c.get("source"), list)
                             else str(c.get("source", "")) for c in cells if isinstance(c, dict))
        except (ValueError, AttributeError, TypeError, KeyError):
            pass
    return {line.strip() for line in text.splitlines()}


def redact_report(report: Report, secrets_: set[str], submission: Path | None = None) -> Report:
    """Replace every secret line found in feedback and notes, except lines the submission itself
    contains (showing a student their own code reveals nothing, and that avoids an oracle)."""
    if submission is not None:
        secrets_ = secrets_ - own_lines(submission)
    if not secrets_:
        return report

    def clean(text: str) -> str:
        for line in secrets_:
            if line in text:
                text = text.replace(line, REDACTED)
        return text

    for r in report.results:
        r.output = clean(r.output)
    report.notes = [clean(n) for n in report.notes]
    return report


# ---- the grader processes --------------------------------------------------------------------
@dataclass
class Outcome:
    """What one grading attempt produced: a report, or why there is none."""

    report: Report | None = None
    error: str = ""


class GraderProcess:
    """A long-lived `python -m autograder.grading.batch --serve` that grades one submission at a time.

    Jobs and replies are JSON lines; each job carries a fresh random token that its reply must
    echo, so a line written by anyone else (the grader is non-dumpable, so a worker cannot reach
    its pipes) would be ignored rather than believed.
    """

    def __init__(self, config: dict):
        # its sandboxes' scratch dirs go here, so that they are removed even if the grader is killed;
        # 0711: a worker running as another user reaches its own scratch dir but lists nothing
        self.tmp = Path(tempfile.mkdtemp(prefix="lmgrade-grader-"))
        os.chmod(self.tmp, 0o711)
        # its own session: a Ctrl-C at the terminal reaches only the batch, which stops graders itself
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.grading.batch", "--serve", json.dumps(config)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                     env=dict(os.environ, TMPDIR=str(self.tmp)), start_new_session=True)
        self.buffer = b""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def grade(self, path: Path, questions: list[str] | None, timeout: float) -> Outcome:
        token = secrets.token_hex(16)
        try:
            self.proc.stdin.write((json.dumps({"token": token, "path": str(path), "questions": questions}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return Outcome(error=self._died())
        deadline = time.monotonic() + timeout
        while True:
            line = self._line(deadline)
            if line is None:  # no reply: it ended, or it is still at work after the deadline
                if time.monotonic() >= deadline and self.alive:
                    self.stop()
                    return Outcome(error=f"grading took longer than {timeout:g} s and was stopped")
                return Outcome(error=self._died())
            try:
                reply = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if type(reply) is not dict or reply.get("token") != token:
                continue
            if reply.get("error"):
                return Outcome(error=clean(f"the grader failed: {reply['error']}")[:2000])
            try:  # the trusted boundary: every string cleaned before anything is written or printed
                return Outcome(report=results.sanitize(report_from_dict(reply["report"])))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                return Outcome(error=clean(f"the grader sent an unreadable report ({exc})")[:2000])

    def _line(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                if not self.alive:
                    return None
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def _died(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the grading process stopped answering"
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return f"the grading process {how} while grading this submission"

    def terminate(self) -> None:
        """Ask it to end (it kills its worker on the way out); `stop` waits for it."""
        if self.proc.poll() is None:
            try:
                self.proc.terminate()
            except OSError:
                pass

    def stop(self) -> None:
        """SIGTERM first, so that the grader kills its worker on the way out; then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            except KeyboardInterrupt:  # a second Ctrl-C: no more patience
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def serve(config: dict) -> None:
    """The grader process: read jobs on stdin, grade, answer on the original stdout."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed here (warnings, data preparation) goes to stderr
    sys.stdout = sys.stderr
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds `with Sandbox`: the worker dies too
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the batch decides what a Ctrl-C means
    sandbox.harden_this_process()
    assignment = assignments.get(config["assignment"], Path(config["root"]))
    limits = sandbox.Limits(**config["limits"]) if config.get("limits") else None
    extra = {}
    if hasattr(runner, "reference_results") and assignment.reference_path.exists():
        try:  # the reference's cached results, read before any worker of any submission has run
            extra["reference_results"] = runner.reference_results(assignment)
        except Exception:  # noqa: BLE001 - each submission's grading reports it then
            import traceback
            traceback.print_exc()
    for line in sys.stdin:
        job = json.loads(line)
        reply: dict = {"token": job["token"]}
        try:
            report = runner.grade(job["path"], assignment, device=config["device"], limits=limits,
                                  questions=set(job["questions"]) if job.get("questions") else None, **extra)
            reply["report"] = report_to_dict(results.sanitize(report))
        except Exception as exc:  # noqa: BLE001 - reported for this submission; the batch goes on
            import traceback
            traceback.print_exc()
            reply["error"] = f"{type(exc).__name__}: {exc}"
        out.write(json.dumps(reply) + "\n")


# ---- the batch ---------------------------------------------------------------------------------
@dataclass
class BatchResult:
    entries: list[Entry]
    records: dict[str, dict]  # key -> record, for every entry
    graded: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    summary: str = ""
    write_errors: list[str] = field(default_factory=list)  # output files that could not be written
    shard: tuple[int, int] | None = None  # (K, N) of `--shard K/N`: `entries` are that part only
    merged: int = 0  # `lmgrade merge`: the number of shards these records come from
    notes: list[str] = field(default_factory=list)  # `lmgrade merge`: what it left aside


class Interrupted(Exception):
    """Ctrl-C during a batch: what was finished is saved; the same command continues."""

    def __init__(self, saved: int, total: int, what: str = ""):
        super().__init__(f"{what}interrupted: {saved} of {total} graded and saved; run the same command to continue")
        self.saved, self.total = saved, total


def run(inputs: list[Path], assignment: Assignment, out: Path, *, jobs: int = 1, device: str = "cpu",
        questions: list[str] | None = None, force: bool = False, limits: sandbox.Limits | None = None,
        progress: bool | None = None, submission_timeout: float = SUBMISSION_TIMEOUT,
        shard: tuple[int, int] | None = None) -> BatchResult:
    """Grade every submission found in `inputs` and write OUT/grades.csv, OUT/feedback/, OUT/summary.txt,
    OUT/histogram.png, OUT/leaderboard.csv and OUT/report.html. Already graded submissions (same file, same
    checks) are skipped unless `force`; `questions` regrades only those questions and merges them into the
    earlier results.

    Each submission's record is saved (atomically) the moment it is graded, so Ctrl-C loses only
    the submissions in progress: it raises `Interrupted` once every grader process is gone.

    `shard=(K, N)` grades only part K of N (see `autograder.grading.shard`) and writes only that part's
    records and its manifest, never grades.csv or another shard's files; `lmgrade merge` writes
    the outputs once every part is done.
    """
    from autograder.grading import shard as sharding  # imports this module: only here, not at the top
    results.make_dir(out)
    state = out / ".lmgrade"
    everyone = discover(inputs, assignment, state if shard is None else sharding.workdir(state, *shard), skip=out)
    if not everyone:
        raise ValueError(f"no submissions (.ipynb or .py files, or one folder per student) in {', '.join(map(clean, inputs))}")
    entries = everyone if shard is None else sharding.part(everyone, *shard)
    records = load_records(state / "records")  # read once: nothing written later by a worker counts
    digest = checks_digest(assignment)
    all_questions = sorted({spec.question for spec in check_specs(assignment)}, key=results._qkey)
    if questions:
        unknown = sorted(set(questions) - set(all_questions))
        if unknown:
            raise ValueError(f"no such question in {assignment.id}: {', '.join(unknown)} (it has {', '.join(all_questions)})")
    todo, problems, result = [], [], BatchResult(entries=entries, records={}, shard=shard)
    tracker = None if shard is None else sharding.Manifest(state, shard, assignment.id, digest, questions, inputs,
                                                           everyone)
    saved = [0]
    bar = None
    try:
        for entry in entries:
            old = records.get(entry.key)
            sha = file_digest(entry.path)
            fresh = (old is not None and old.get("status") == "graded" and old.get("sha256") == sha
                     and old.get("checks") == digest and set(old.get("questions", [])) >= set(all_questions)
                     and old.get("students") == entry.students and old.get("source") == entry.source)
            if fresh and not force and not questions:
                result.records[entry.key] = old
                result.skipped += 1
                saved[0] += 1
                if tracker is not None:
                    tracker.mark(entry, old, save=False)
                continue
            same_file = old if (questions and old and old.get("sha256") == sha and old.get("report")) else None
            problem = _problem(entry, assignment)
            if problem is not None:  # nothing a grader could do: recorded here, in the trusted process
                problems.append((entry, sha, problem))
            else:
                todo.append((entry, sha, same_file))
        if tracker is not None:
            tracker.save()  # before any grading: a shard killed from here on still says what it owns
        # one count per submission: the unchanged ones at once, then each as it is recorded or graded
        bar = _progress(len(entries), progress, skipped=result.skipped)
        for entry, sha, (status, message) in problems:
            _finish(result, state, _problem_record(entry, sha, digest, all_questions, status, message), entry,
                    tracker)
            saved[0] += 1
            bar(entry, f"{status}: {message}")
        config = {"assignment": assignment.id, "root": str(assignment.root), "device": device,
                  "limits": dataclasses.asdict(limits) if limits else None}
        pending = {entry.key: (entry, sha, old) for entry, sha, old in todo}

        def done(entry: Entry, outcome: Outcome) -> None:  # in a grading thread, under its lock
            _, sha, old = pending[entry.key]
            _finish(result, state, _record(entry, sha, digest, outcome, questions, all_questions, old), entry,
                    tracker)
            saved[0] += 1

        _grade_all(todo, config, questions, jobs, bar, submission_timeout, done)
        bar(None, None)
        for key, record in result.records.items():  # all of them again: undo anything a worker wrote meanwhile
            _write_text(state / "records" / f"{key}.json", json.dumps(record, indent=1))
        if tracker is None:
            write_outputs(result, assignment, out, all_questions)
        else:
            tracker.finish(result.records)
            result.summary = sharding.shard_summary(result, assignment, len(everyone), out)
    except KeyboardInterrupt:
        if bar is not None:
            bar(None, None)
        if tracker is not None:
            try:
                tracker.save("interrupted")
            except OSError:
                pass  # the records say the same; merge then reports the shard as running
        raise Interrupted(saved[0], len(entries), f"shard {shard[0]}/{shard[1]}: " if shard else "") from None
    return result


def _finish(result: BatchResult, state: Path, record: dict, entry: Entry, tracker=None) -> None:
    """Keep one submission's record and save it at once (write first, report after); a shard's
    manifest names it as done only once the record is on disk."""
    result.records[entry.key] = record
    _write_text(state / "records" / f"{entry.key}.json", json.dumps(record, indent=1))
    if tracker is not None:
        tracker.mark(entry, record)
    if record["status"] == "graded":
        result.graded += 1
    else:
        result.errors.append(f"{entry.source}: {record['error']}")


def _problem(entry: Entry, assignment: Assignment) -> tuple[str, str] | None:
    """("unreadable" | "wrong assignment", message) for a file no check can grade; read here, never run."""
    if entry.path is None:
        return None
    try:
        return extract.read_submission(entry.path, analyse=False).problem(assignment.id)
    except (RecursionError, MemoryError) as exc:
        return "unreadable", f"the file could not be read ({type(exc).__name__})."


def _problem_record(entry: Entry, sha: str, digest: str, all_questions, status: str, message: str) -> dict:
    return {"version": RECORD_VERSION, "key": entry.key, "students": entry.students, "source": entry.source,
            "file": str(entry.path), "sha256": sha, "note": entry.note, "checks": digest,
            "graded_at": time.strftime("%Y-%m-%d %H:%M:%S"), "status": "graded", "questions": all_questions,
            "report": None, "error": "", "problem": status, "message": clean(message)}


def _grade_all(todo, config: dict, questions, jobs: int, bar, timeout: float, done=None) -> dict[str, Outcome]:
    """Grade `todo` on `jobs` grader processes; a submission whose grader dies is retried once.

    `done(entry, outcome)` runs as each one finishes, then `bar(entry, text)` counts it (`bar` is
    `_progress`'s, or None for no progress). On Ctrl-C (KeyboardInterrupt here) no new
    submission starts, every grader process is told to stop and waited for, whatever they left
    is killed, and KeyboardInterrupt goes on up: the submissions in progress are simply not saved.
    """
    finished: dict[str, Outcome] = {}
    if not todo:
        return finished
    sandbox.harden_this_process()  # a dead grader's worker is re-parented here, to be killed
    work: queue.Queue = queue.Queue()
    for item in todo:
        work.put(item[0])
    lock = threading.Lock()
    stopping = threading.Event()
    graders: dict[int, GraderProcess] = {}  # pid -> live grader process
    bar = bar or (lambda entry, text: None)

    def slot() -> None:
        grader = None
        try:
            while not stopping.is_set():
                try:
                    entry = work.get_nowait()
                except queue.Empty:
                    break
                if entry.path is None:
                    outcome = Outcome(error="")  # nothing to grade: recorded as zero with a message
                else:
                    outcome = Outcome(error="not graded")
                    for _attempt in range(2):
                        if grader is None or not grader.alive:
                            with lock:
                                if stopping.is_set():
                                    break
                                grader = GraderProcess(config)
                                graders[grader.proc.pid] = grader
                        outcome = grader.grade(entry.path, questions, timeout)
                        if stopping.is_set() or outcome.report is not None or grader.alive:
                            break
                        with lock:  # the grader died: kill what it left behind, then retry in a fresh one
                            graders.pop(grader.proc.pid, None)
                            sandbox.kill_orphans(spare=set(graders))
                        grader.stop()
                        grader = None
                if stopping.is_set():
                    break  # stopped mid-way: this one is not finished, and not saved
                with lock:
                    finished[entry.key] = outcome
                    if done is not None:
                        done(entry, outcome)
                    bar(entry, _progress_text(outcome))
        except Exception as exc:  # noqa: BLE001 - never a traceback from a thread; the batch says what failed
            print(f"lmgrade: a grading thread failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            if grader is not None:
                grader.stop()
                with lock:
                    graders.pop(grader.proc.pid, None)

    threads = [threading.Thread(target=slot, daemon=True) for _ in range(max(1, min(jobs, len(todo))))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not break the cleanup
        try:
            stopping.set()
            with lock:
                for grader in graders.values():
                    grader.terminate()  # each grader kills its worker; its thread then sees it end
            for t in threads:
                t.join(timeout=20)
            with lock:
                for grader in list(graders.values()):
                    grader.proc.kill()
            sandbox.kill_orphans()
        finally:
            signal.signal(signal.SIGINT, previous)
        raise
    with lock:
        sandbox.kill_orphans(spare=set(graders))
    return finished


def _progress(total: int, enabled: bool | None, skipped: int = 0):
    """A tqdm bar on a terminal; one line per submission otherwise (logs, CI).

    Why `total` is every submission found and each is counted exactly once (unchanged ones at
    start, unreadable or wrong-assignment files as they are recorded, the rest as they are graded):
    the count ends at the total, and "[n/N]" means n of the N submissions the TA gave.
    Returns `update(entry, text)`; `update(None, None)` ends the bar (more calls do nothing).
    """
    from tqdm import tqdm
    bar = tqdm(total=total, initial=skipped, unit="submission", file=sys.stderr, dynamic_ncols=True,
               disable=not enabled if enabled is not None else None)
    done = [skipped, False]  # count, closed
    if skipped and bar.disable:
        print(f"[{skipped}/{total}] {skipped} unchanged since the last run, not graded again", file=sys.stderr,
              flush=True)

    def update(entry: Entry | None, text: str | None) -> None:
        if done[1]:
            return
        if entry is None:
            done[1] = True
            bar.close()
            return
        done[0] += 1
        text = clean(f"{', '.join(entry.students)}: {text}")
        if bar.disable:
            print(f"[{done[0]}/{total}] {text}", file=sys.stderr, flush=True)
        else:
            bar.set_postfix_str(text[:60])
            bar.update(1)

    return update


def _progress_text(outcome: Outcome) -> str:
    if outcome.report is not None:
        r = outcome.report
        return f"{r.score:g}/{r.max_score:g} ({r.execution_time:.1f} s)"
    return outcome.error or "no notebook or .py file"


def _record(entry: Entry, sha: str, digest: str, outcome: Outcome, questions, all_questions, old) -> dict:
    record = {"version": RECORD_VERSION, "key": entry.key, "students": entry.students, "source": entry.source,
              "file": str(entry.path) if entry.path else None, "sha256": sha, "note": entry.note, "checks": digest,
              "graded_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    if entry.path is None:
        return {**record, "status": "graded", "questions": all_questions, "report": None,
                "error": "", "missing": "No notebook (.ipynb) or .py file was found in this submission."}
    if outcome.report is None:
        return {**record, "status": "error", "questions": [], "report": None, "error": clean(outcome.error)}
    report = outcome.report
    graded = sorted({r.question for r in report.results} | set(questions or all_questions), key=results._qkey)
    if old is not None and old.get("report"):  # --question: replace those questions, keep the rest
        earlier = report_from_dict(old["report"])
        kept = [r for r in earlier.results if r.question not in set(questions)]
        report.results = sorted(kept + report.results, key=lambda r: results._qkey(r.question))
        report.notes = list(dict.fromkeys(earlier.notes + report.notes))
        graded = sorted(set(old.get("questions", [])) | set(graded), key=results._qkey)
        record["checks"] = old.get("checks") if old.get("checks") != digest else digest
    return {**record, "status": "graded", "questions": graded, "report": report_to_dict(report), "error": ""}


# ---- outputs -----------------------------------------------------------------------------------
def write_outputs(result: BatchResult, assignment: Assignment, out: Path, all_questions: list[str]) -> None:
    """grades.csv, feedback/<student>.txt, leaderboard.csv, report.html, summary.txt and histogram.png,
    all from `result` in memory.

    grades.csv first and on its own: a feedback file, the summary or another file that cannot be
    written is listed in `result.write_errors` and costs nothing else.
    """
    titles = assignment.questions
    specs = check_specs(assignment)
    extra = {spec.question for spec in specs if spec.extra}
    max_score = sum(spec.points for spec in specs if not spec.extra)
    export = any(entry.submission_id for entry in result.entries)  # Gradescope's ids, names and e-mails too
    secrets_ = secret_lines(assignment)
    rows, totals, per_question, per_check, feedback = [], [], {q: [] for q in all_questions}, {}, []
    # why a submission is missing from a mean: {question or "total": {reason: count}}, for the summary
    left_out: dict[str, dict[str, int]] = {q: {} for q in [*all_questions, "total"]}
    named = frozenset(name for spec in specs for name in (*spec.uses, *spec.needs))  # public: kept in messages
    failures: dict[tuple[str, str, str, str], list[str]] = {}  # (q, check, title, normalised message) -> students
    boards, members, students_rows = [], {}, []  # leaderboard entries per record key; its students; (id, total, status)

    def leave_out(reason: str, questions) -> None:
        for q in questions:
            left_out[q][reason] = left_out[q].get(reason, 0) + 1

    for entry in result.entries:
        record = result.records[entry.key]
        report = report_from_dict(record["report"]) if record.get("report") else None
        if report is not None:
            redact_report(results.sanitize(report), secrets_, entry.path)
        scores = {q: "" for q in all_questions}
        status, total = record["status"], ""
        if record.get("problem"):  # unreadable or another assignment's: 0, and out of the class statistics
            total, status = 0, record["problem"]
            leave_out(record["problem"], [*all_questions, "total"])
        elif record.get("missing"):
            scores = {q: 0 for q in all_questions}
            total, status = 0, "no file"
            totals.append(0.0)
            leave_out("no file", all_questions)
        elif report is not None:
            by_question: dict[str, float] = {}
            for r in report.results:
                by_question[r.question] = by_question.get(r.question, 0.0) + r.score
                per_check.setdefault((r.question, r.name, r.title), []).append(r.passed)
            scores.update({q: _num(s) for q, s in by_question.items()})
            total = _num(report.score)
            missing = [q for q in all_questions if q not in record.get("questions", [])]
            if missing:
                status = f"partial (not graded: Q{', Q'.join(missing)})"
                leave_out("partly graded", ["total"])
            else:
                totals.append(report.score)
            for q in all_questions:
                if q in by_question:
                    q_max = sum(r.max_score for r in report.results if r.question == q) or \
                        sum(spec.points for spec in specs if spec.question == q)
                    per_question[q].append((by_question[q], q_max))
                else:
                    leave_out("not graded yet", [q])
        else:
            status = f"error: {record.get('error', '')}"
            leave_out("could not be graded", [*all_questions, "total"])
        students = record.get("students", entry.students)
        if report is not None:
            for r in report.results:
                if not r.passed:
                    failures.setdefault((r.question, r.name, r.title, class_report.normalise(r.output, named)),
                                        []).extend(students)
            boards.append((entry.key, report.leaderboard))
            members[entry.key] = students
        people = entry.people if len(entry.people) == len(students) else [{}] * len(students)
        for sid, person in zip(students, people):
            who = [person.get("name", ""), person.get("email", ""), entry.submission_id] if export else []
            rows.append([sid, *who, entry.source, *[scores[q] for q in all_questions], total, _num(max_score),
                         status])
            feedback.append((sid, entry, record, report))
            students_rows.append((sid, str(total), status))
    rows.sort(key=lambda row: row[0])
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["student_id", *(["name", "email", "submission_id"] if export else []), "submission",
                     *[f"Q{q}" + (" (extra)" if q in extra else "") for q in all_questions], "total", "max", "status"])
    writer.writerows([[csv_cell(c) for c in row] for row in rows])
    _write_text(out / "grades.csv", buf.getvalue())
    result.summary = summary_text(assignment, result, totals, per_question, per_check, max_score, titles, extra,
                                  left_out)
    feedback_dir = out / "feedback"
    names = unique_names([sid for sid, *_ in feedback])
    for sid, entry, record, report in feedback:
        _attempt(result, feedback_dir / f"{names[sid]}.txt",
                 lambda path: _write_text(path, feedback_text(sid, entry, record, report, assignment)))
    ranked = class_report.ranked(boards)
    _attempt(result, out / "leaderboard.csv", lambda path: _write_text(path, class_report.leaderboard_csv(ranked)))
    data = class_report.ClassReport(
        assignment=assignment, specs=specs, max_score=max_score, totals=totals, per_question=per_question,
        per_check=per_check, failures=failures, leaderboard=ranked, members=members,
        students=sorted((sid, total, status, class_report.feedback_href(f"{names[sid]}.txt"))
                        for sid, total, status in students_rows))
    _attempt(result, out / "report.html", lambda path: _write_text(path, class_report.html_report(data)))
    if result.write_errors:
        result.summary += "\n" + "\n".join(f"could not write {e}" for e in result.write_errors)
    _attempt(result, out / "summary.txt", lambda path: _write_text(path, result.summary + "\n"))
    _attempt(result, out / "histogram.png",
             lambda path: histogram(totals, per_question, max_score, assignment, path, titles))


def _attempt(result: BatchResult, path: Path, write) -> None:
    """Write one output file; a failure is listed, never raised (the other files still appear)."""
    try:
        write(path)
    except Exception as exc:  # noqa: BLE001 - one file's problem is that file's alone
        result.write_errors.append(clean(f"{path}: {type(exc).__name__}: {exc}"))


def csv_cell(value):
    """A grades.csv cell that a spreadsheet shows as text: a leading = + - @ (or tab, CR) would make it
    a live formula (`=HYPERLINK(...)` as a folder name), so such text gets a leading quote."""
    if not isinstance(value, str):
        return value
    value = clean(value)
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _num(x: float) -> str:
    return f"{x:g}"


def feedback_text(student: str, entry: Entry, record: dict, report: Report | None, assignment: Assignment) -> str:
    head = [f"{assignment.title} ({assignment.id}): feedback for {student}", f"Submission: {Path(entry.source).name}"]
    if entry.note:
        head.append(f"Note: {entry.note}")
    if record.get("problem"):
        return "\n".join(head + ["", f"Nothing could be graded: {record.get('message', '')}", "Score: 0"]) + "\n"
    if record.get("missing"):
        return "\n".join(head + ["", record["missing"], "Score: 0"]) + "\n"
    if report is None:
        return "\n".join(head + ["", "This submission could not be graded yet; the course staff will look at it.",
                                 f"({record.get('error', '')})"]) + "\n"
    passed = [f"  ok Q{r.question} {r.title}" for r in report.results if r.passed]
    return "\n".join(head + ["", results.format_table(report, assignment.questions, details=True), "",
                             "Passed checks:" if passed else "No check passed.", *passed]) + "\n"


def summary_text(assignment, result: BatchResult, totals, per_question, per_check, max_score, titles, extra,
                 left_out=None) -> str:
    """The batch in a few lines. Every mean says what it is over: which submissions it counts and
    which it leaves out (unreadable, no file, ...), so "mean 4.2" is never read as the class's mean."""
    left_out = left_out or {}
    if result.merged:
        lines = [f"{assignment.id}: {len(result.entries)} submissions, merged from {result.merged} shard"
                 f"{'s' if result.merged != 1 else ''}; graded {result.graded}, could not be graded {len(result.errors)}"]
    else:
        lines = [f"{assignment.id}: {len(result.entries)} submissions; graded now {result.graded}, "
                 f"unchanged since the last run {result.skipped}, could not be graded {len(result.errors)}"]
    if totals:
        no_file = sum(1 for e in result.entries if result.records.get(e.key, {}).get("missing"))
        over = f"over these {len(totals)}" + (f", {no_file} with no file as 0" if no_file else "")
        if left_out.get("total"):
            over += f" ({_excluded(left_out['total'])})"
        lines.append(f"{len(totals)} with every question graded; total (of {max_score:g}) {over}: "
                     f"mean {statistics.mean(totals):.2f}, median {statistics.median(totals):g}, "
                     f"min {min(totals):g}, max {max(totals):g}, full marks {sum(t >= max_score for t in totals)}")
    lines.append("per question (the mean over the submissions graded on it):")
    for q, pairs in per_question.items():
        if not pairs:
            continue
        mean = statistics.mean(s for s, _ in pairs)
        full = sum(s >= m for s, m in pairs) / len(pairs)
        label = titles.get(q, "") + (" (extra)" if q in extra else "")
        over = f"over {len(pairs)} graded submission{'s' if len(pairs) != 1 else ''}"
        if left_out.get(q):
            over += f" ({_excluded(left_out[q])})"
        lines.append(f"  {'Q' + q:<4} {label[:40]:<40} mean {mean:5.2f}/{pairs[0][1]:<4g} {over}; full marks {full:.0%}")
    hardest = sorted(per_check.items(), key=lambda kv: (sum(kv[1]) / len(kv[1]), kv[0][1]))[:5]
    if hardest and any(not all(v) for _, v in hardest):
        lines.append("checks failed most often:")
        for (q, name, title), passes in hardest:
            if not all(passes):
                lines.append(f"  Q{q} {title} [{name}]: {len(passes) - sum(passes)} of {len(passes)} failed")
    problems: dict[str, list[str]] = {}
    for entry in result.entries:
        record = result.records.get(entry.key, {})
        if record.get("problem"):
            problems.setdefault(record["problem"], []).append(", ".join(entry.students))
    for status, who in sorted(problems.items()):
        lines.append(f"{status} (0, left out of the statistics above): {len(who)}: {_some(who)}")
    links = [link for entry in result.entries for link in entry.links]
    if links:
        lines.append(f"skipped {len(links)} symbolic link(s), never followed or graded: {_some(links)}")
    for error in result.errors:
        lines.append(f"could not grade {error}")
    return "\n".join(lines)


def _excluded(reasons: dict[str, int]) -> str:
    """{"unreadable": 3, "no file": 1} -> "3 unreadable, 1 no file excluded"."""
    return ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) + " excluded"


def _some(items: list[str], shown: int = 10) -> str:
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


def histogram(totals, per_question, max_score, assignment, path: Path, titles) -> None:
    """Totals on the left, mean score per question (as % of its points) on the right."""
    fig = histogram_figure(totals, per_question, max_score, assignment)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    results.write_bytes(path, buf.getvalue())


def histogram_figure(totals, per_question, max_score, assignment):
    """The histogram as a matplotlib Figure (no pyplot: no display, no global state).

    The count axis has whole-number ticks only: with a small section, matplotlib's default would
    label it 0.25, 0.5, ... submissions."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    bins = max(5, min(30, int(max_score) + 1))
    left.hist(totals, bins=bins, range=(0, max(max_score, max(totals, default=0))), color="#4477aa", edgecolor="white")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel(f"total score (of {max_score:g})")
    left.set_ylabel("submissions")
    left.set_title(f"{assignment.id}: {len(totals)} fully graded submissions")
    qs = [q for q, pairs in per_question.items() if pairs]
    means = [100 * statistics.mean(s / m if m else 0 for s, m in per_question[q]) for q in qs]
    right.bar([f"Q{q}" for q in qs], means, color="#cc6677")
    right.set_ylim(0, 100)
    right.set_ylabel("mean score, % of the question's points")
    right.set_title("where students lose points")
    return fig


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--serve":
        serve(json.loads(argv[1]))
    else:
        raise SystemExit("usage: lmgrade grade SUBMISSIONS... --out DIR (this module's --serve is internal)")


if __name__ == "__main__":
    main(sys.argv[1:])
