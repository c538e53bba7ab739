"""A batch split across machines: `lmgrade grade ... --shard K/N` grades part K of N, and
`lmgrade merge OUT...` writes the one grades.csv, feedback, summary, histogram, leaderboard.csv and
report.html of all parts.

Why the parts are cut by a hash of each student's id (as found, before a classmate's clashing
file renames it), not by position in a sorted list: every machine computes the same cut without
talking to the others, and a late submission lands in one part without moving anyone else, so
each part's saved records stay valid and only the newcomer's part has work to do.

Every shard discovers the whole batch (file names and export metadata, and a sha256 of each file:
reading, never running), so record keys, clash names and feedback file names are exactly those of
a single run, and shards agree on what the batch is however its folder was typed; it grades its own
part and writes only its own records and its manifest, OUT/.lmgrade/shards/K-of-N.json (a .zip is
unpacked in a folder of its own). Shards therefore share one OUT on a shared file system, or use
separate ones, and one failing shard cannot touch another's files.

The manifest lists the submissions the shard owns and, for each one saved, a fingerprint of its
record; it is rewritten (atomically) as each record is saved. `merge` believes a submission done
only where the manifest's fingerprint and the record on disk agree. A shard that is missing,
killed, interrupted, still running, or that saw other submissions (the files added, removed or
changed since it ran are named) or other checks, is named, with the command that finishes it,
and nothing is written: never a partial grades.csv that looks whole.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shlex
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.authoring import assignments
from autograder.grading import results
from autograder.grading.outputs import some, write_outputs
from autograder.grading.records import BatchResult, check_specs, checks_digest
from autograder.grading.results import clean
from autograder.grading.submissions import Entry

MANIFEST_VERSION = 1
INCOMPLETE = 3  # `lmgrade merge`: a shard is missing or unfinished, nothing was written


class Incomplete(Exception):
    """Some shard is missing, unfinished or out of step with the others: nothing was written."""


# ---- the partition -----------------------------------------------------------------------------
def parse(text: str) -> tuple[int, int]:
    """"K/N" -> (K, N), K from 0 to N-1: a Slurm array `--array=0-(N-1)` gives K as $SLURM_ARRAY_TASK_ID."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N (e.g. 0/4: the first of 4 parts)")
    k, n = int(match[1]), int(match[2])
    if n < 1:
        raise argparse.ArgumentTypeError(f"--shard {text}: N, the number of parts, must be at least 1")
    if k >= n:
        raise argparse.ArgumentTypeError(f"--shard {text}: K goes from 0 to N-1 (0/{n} to {n - 1}/{n}); "
                                         f"a Slurm array of {n} parts is --array=0-{n - 1}")
    return k, n


def owner(entry: Entry) -> str:
    return entry.owner or "+".join(entry.students)


def shard_of(key: str, n: int) -> int:
    """The part (0 to n-1) of a student id: sha256, so the same on every machine and Python."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % n


def part(entries: list[Entry], k: int, n: int) -> list[Entry]:
    return [e for e in entries if shard_of(owner(e), n) == k]


def workdir(state: Path, k: int, n: int) -> Path:
    """Where shard K of N unpacks a .zip: its own folder, so shards sharing OUT never remove each other's files."""
    return state / "shards" / f"{k}-of-{n}"


def manifest_path(state: Path, k: int, n: int) -> Path:
    return state / "shards" / f"{k}-of-{n}.json"


def fingerprint(record: dict) -> str:
    """Of a record's content (not its bytes on disk), to tell the record a shard saved from any other."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def batch_files(entries: list[Entry], shas: dict[str, str]) -> list[list[str]]:
    """[key, file name, sha256 of its bytes, source] of every submission: what each one is, and where it was found.

    Why the file's name and bytes rather than its path: `subs` and `/home/ta/subs` are the same
    folder typed twice, and shards started either way must agree; a file that really changed, was
    added or was removed must not."""
    return [[e.key, Path(e.source).name, shas.get(e.key, ""), e.source] for e in entries]


def batch_digest(files: list[list[str]]) -> str:
    """Which submissions the batch has (keys and contents, never how the inputs were typed):
    shards that saw different submissions must not be merged."""
    text = json.dumps([[key, sha] for key, _name, sha, *_ in files], ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def differences(files: list, newest: list) -> str:
    """What a shard saw that the newest shard did not, by file name: "added since it ran: zoe.py; ..."."""
    mine = {row[0]: row for row in files}
    theirs = {row[0]: row for row in newest}
    added = [theirs[key][1] for key in theirs if key not in mine]
    removed = [mine[key][1] for key in mine if key not in theirs]
    changed = [theirs[key][1] for key in theirs if key in mine and mine[key][2] != theirs[key][2]]
    parts = [f"{what} ({len(names)}): {some(sorted(names), 5)}"
             for what, names in (("added since it ran", added), ("removed since it ran", removed),
                                 ("changed since it ran", changed)) if names]
    return "; ".join(parts)


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def entry_to_dict(entry: Entry) -> dict:
    """Absolute path: the merge may run in another folder, and reads the file (never runs it) to
    keep a student's own lines out of the redaction, as a single run does."""
    doc = dataclasses.asdict(entry)
    doc["path"] = os.path.abspath(entry.path) if entry.path is not None else None
    return doc


def entry_from_dict(doc: dict) -> Entry:
    names = {f.name for f in dataclasses.fields(Entry)}
    entry = Entry(**{k: v for k, v in doc.items() if k in names})
    entry.path = Path(entry.path) if entry.path else None
    return entry


# ---- one shard's manifest -----------------------------------------------------------------------
class Manifest:
    """OUT/.lmgrade/shards/K-of-N.json: what shard K of N owns and which of it is saved.

    Why rewritten as each submission is saved rather than once at the end: a shard killed by a
    time limit or a dead node still tells `merge` how far it got, and its next run continues."""

    def __init__(self, state: Path, shard: tuple[int, int], assignment_id: str, checks: str,
                 questions: list[str] | None, inputs: list[Path], everyone: list[Entry], shas: dict[str, str]):
        k, n = shard
        self.path = manifest_path(state, k, n)
        sizes = [0] * n
        for e in everyone:
            sizes[shard_of(owner(e), n)] += 1
        self.done: dict[str, str] = {}  # key -> fingerprint of its saved record
        files = batch_files(everyone, shas)
        self.doc = {
            "version": MANIFEST_VERSION, "shard": k, "of": n, "assignment": assignment_id, "checks": checks,
            "questions": list(questions) if questions else None, "inputs": [clean(p) for p in inputs],
            "out": clean(state.parent), "batch": batch_digest(files), "submissions": len(everyone), "files": files,
            "sizes": sizes, "command": _command_line(), "cwd": clean(os.getcwd()), "state": "running",
            "host": clean(socket.gethostname()), "pid": os.getpid(),
            "started": _now(), "updated": _now(),
            "entries": [{"index": i, "entry": entry_to_dict(e), "done": None}
                        for i, e in enumerate(everyone) if shard_of(owner(e), n) == k],
        }

    def mark(self, entry: Entry, record: dict, save: bool = True) -> None:
        self.done[entry.key] = fingerprint(record)
        if save:
            self.save()

    def save(self, state: str | None = None) -> None:
        if state:
            self.doc["state"] = state
        self.doc["updated"] = _now()
        for item in self.doc["entries"]:
            item["done"] = self.done.get(item["entry"]["key"])
        results.write_text(self.path, json.dumps(self.doc, indent=1))

    def finish(self, records: dict[str, dict], state: str = "finished") -> None:
        """The final word, from the records held in memory (each rewritten just before)."""
        for key, record in records.items():
            self.done[key] = fingerprint(record)
        self.save(state)


def _command_line() -> list[str] | None:
    """The `lmgrade grade ... --shard K/N` that started this shard, so that `merge` can say how to run
    a missing part again with the same options (None when the batch was started from Python)."""
    argv = [clean(a) for a in sys.argv[1:]]
    if argv[:1] == ["grade"] and any(a == "--shard" or a.startswith("--shard=") for a in argv):
        return ["lmgrade", *argv]
    return None


def shard_summary(result: BatchResult, assignment, total: int, out: Path) -> str:
    """What a shard prints (its Slurm log): its own part; the class statistics come from `merge`."""
    k, n = result.shard
    lines = [f"{assignment.id} shard {k}/{n}: {len(result.entries)} of the {total} submissions; graded now "
             f"{result.graded}, unchanged since the last run {result.skipped}, could not be graded {len(result.errors)}"]
    lines += [f"could not grade {error}" for error in result.errors]
    lines.append(f"saved in {clean(out / '.lmgrade' / 'records')} and {clean(manifest_path(out / '.lmgrade', k, n))}; "
                 f"when every shard has finished: lmgrade merge {shlex.quote(clean(out))}")
    return "\n".join(lines)


# ---- merging --------------------------------------------------------------------------------------
@dataclass
class _Found:
    doc: dict
    path: Path  # the manifest file
    out: Path  # the OUT folder it is in: that shard's records are there


def _read_manifests(outs: list[Path]) -> tuple[list[_Found], list[Path]]:
    found, damaged = [], []
    for out in outs:
        for path in sorted((out / ".lmgrade" / "shards").glob("*-of-*.json")):
            try:
                doc = json.loads(path.read_text())
                if doc.get("version") != MANIFEST_VERSION:
                    raise ValueError("another version")
                int(doc["shard"]), int(doc["of"]), doc["assignment"], doc["batch"], list(doc["entries"])
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                damaged.append(path)
                continue
            found.append(_Found(doc, path, out))
    return found, damaged


def _listing(doc: dict) -> bool:
    """True when a manifest lists its batch's files as `batch_files` writes them (not a damaged or older one)."""
    files = doc.get("files")
    return isinstance(files, list) and all(isinstance(row, list) and len(row) == 4 and all(isinstance(x, str)
                                                                                          for x in row) for row in files)


def _load_record(out: Path, key: str) -> dict | None:
    try:
        record = json.loads((out / ".lmgrade" / "records" / f"{key}.json").read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) and record.get("key") == key else None


def _rerun(doc: dict, k: int | str) -> str:
    """The command for part K: the one that started a shard, with K in it (else one built from its inputs)."""
    part = f"{k}/{doc['of']}"
    command = doc.get("command")
    if isinstance(command, list) and all(isinstance(a, str) for a in command):
        args = []
        for i, a in enumerate(command):
            args.append(part if i and command[i - 1] == "--shard" else f"--shard={part}" if a.startswith("--shard=")
                        else a)
        text = " ".join(shlex.quote(a) if a != part else a for a in args)
        cwd = doc.get("cwd")
        return f"cd {shlex.quote(cwd)} && {text}" if isinstance(cwd, str) and cwd != clean(os.getcwd()) else text
    args = ["lmgrade", "grade", *doc.get("inputs", []), "--assignment", doc["assignment"], "--out", doc["out"]]
    for q in doc.get("questions") or []:
        args += ["--question", str(q)]
    return " ".join(map(shlex.quote, args)) + f" --shard {part}"


def merge(outs: list[Path], dest: Path | None = None, assignment=None) -> BatchResult:
    """One grades.csv, feedback/, summary.txt, histogram.png, leaderboard.csv and report.html from every
    shard's records, the same as a single run over the same inputs would write (timings aside).

    Raises ValueError (argument errors: no manifests, shards of other assignments, the same shard
    in two folders) and `Incomplete` (a shard missing, unfinished, or graded on other inputs or
    checks); in both cases nothing is written. `result.notes` says what was left aside.
    """
    outs = [Path(o) for o in outs]
    if dest is None:
        if len(outs) != 1:
            raise ValueError("several OUT folders: say where the merged grades go with --out DIR")
        dest = outs[0]
    absent = [clean(o) for o in outs if not o.is_dir()]
    if absent:
        raise ValueError(f"no such folder: {', '.join(absent)}")
    found, damaged = _read_manifests(outs)
    if not found:
        if damaged:
            raise Incomplete(f"cannot merge: every shard manifest is damaged ({', '.join(map(clean, damaged))}); "
                             "rerun the shards (each continues where it stopped), then merge again")
        raise ValueError(f"no shard manifests in {', '.join(map(clean, outs))} (OUT/.lmgrade/shards/K-of-N.json): "
                         "grade with `lmgrade grade INPUTS --assignment ID --out OUT --shard K/N` first")
    newest = max(found, key=lambda f: (f.doc.get("started", ""), f.doc.get("updated", "")))
    n = int(newest.doc["of"])
    notes = []
    older = [f for f in found if int(f.doc["of"]) != n]
    if older:
        notes.append(f"left aside {len(older)} manifest(s) of an earlier split into "
                     f"{', '.join(sorted({str(f.doc['of']) for f in older}))} parts; merged the newest, into {n}")
    found = [f for f in found if int(f.doc["of"]) == n]
    by_k: dict[int, _Found] = {}
    for f in found:
        k = int(f.doc["shard"])
        if k in by_k:
            raise ValueError(f"shard {k}/{n} is in both {clean(by_k[k].out)} and {clean(f.out)}: give only one of them")
        by_k[k] = f
    ids = sorted({f.doc["assignment"] for f in found})
    if len(ids) > 1:
        raise ValueError(f"these shards graded different assignments ({', '.join(ids)}): merge each one's folders apart")
    if assignment is None:
        assignment = assignments.get(ids[0])
    elif assignment.id != ids[0]:
        raise ValueError(f"these shards graded {ids[0]}, not {assignment.id}")
    digest = checks_digest(assignment)
    damaged_k = {}
    for path in damaged:
        match = re.fullmatch(r"(\d+)-of-(\d+)\.json", path.name)
        if match and int(match[2]) == n and int(match[1]) not in by_k:
            damaged_k[int(match[1])] = path

    problems, entries, records = [], [], {}
    sizes = newest.doc.get("sizes") or [None] * n
    for k in range(n):
        f = by_k.get(k)
        if f is None:
            where = ", ".join(map(clean, outs))
            size = f"its {sizes[k]} submission(s) are not graded" if k < len(sizes) and sizes[k] is not None else \
                "its submissions are not graded"
            why = (f"its manifest {clean(damaged_k[k])} is damaged" if k in damaged_k else
                   f"no manifest in {where} (never started, still queued, or its OUT folder was not given)")
            problems.append((k, f"shard {k}/{n}: {why}: {size}"))
            continue
        doc = f.doc
        if doc["batch"] != newest.doc["batch"]:
            what = (differences(doc["files"], newest.doc["files"]) or "the same files, listed otherwise"
                    if _listing(doc) and _listing(newest.doc) else "its manifest lists no files (an older lmgrade)")
            problems.append((k, f"shard {k}/{n} saw other submissions than the newest shard, {newest.doc['shard']}/{n} "
                                f"({doc.get('submissions')} found, the newest found {newest.doc.get('submissions')}; "
                                f"{what}): rerun it on the same inputs (what it graded is kept)"))
            continue
        if doc.get("checks") != digest:
            problems.append((k, f"shard {k}/{n} was graded with other checks than this checkout's: rerun it"))
            continue
        missing, changed = [], []
        for item in doc["entries"]:
            entry = entry_from_dict(item["entry"])
            record = _load_record(f.out, entry.key)
            if record is not None and item.get("done") and fingerprint(record) == item["done"]:
                entries.append((int(item["index"]), entry))
                records[entry.key] = record
            elif record is not None and item.get("done"):
                changed.append(entry.key)
            else:
                missing.append(entry.key)
        if missing or changed:
            total = len(doc["entries"])
            how = {"running": f"its manifest says it is running on {doc.get('host')} as pid {doc.get('pid')} "
                              f"(last saved {doc.get('updated')}): still running, or killed",
                   "interrupted": "it was interrupted (Ctrl-C, scancel or a time limit)",
                   "finished": "it finished, so the rest could not be graded"}.get(doc.get("state"), "")
            text = f"shard {k}/{n}: {total - len(missing) - len(changed)} of {total} saved"
            text += f"; {how}" if how else ""
            if changed:
                text += f"; {len(changed)} record(s) changed since it saved them ({some(changed, 5)})"
            if missing:
                text += f"; not saved: {some(missing, 5)}"
            problems.append((k, text))
    if problems:
        shards = [k for k, _ in problems]
        lines = [f"cannot merge: {len(shards)} of {n} shards missing or unfinished ({', '.join(map(str, shards))}); "
                 "nothing written", *[text for _, text in problems],
                 "run each again (it continues where it stopped), then merge again; e.g.",
                 "  " + _rerun(newest.doc, shards[0] if len(shards) == 1 else "K")]
        raise Incomplete("\n".join(lines))

    ordered = [entry for _, entry in sorted(entries, key=lambda pair: pair[0])]
    if _listing(newest.doc):  # shards that typed the inputs otherwise: every file named as the newest named it
        sources = {row[0]: row[3] for row in newest.doc["files"]}
        for entry in ordered:
            entry.source = sources.get(entry.key, entry.source)
    result = BatchResult(entries=ordered, records=records, merged=n, notes=notes)
    for entry in ordered:
        record = records[entry.key]
        if record.get("status") == "graded":
            result.graded += 1
        else:
            result.errors.append(f"{entry.source}: {record.get('error', '')}")
    results.make_dir(dest)
    for f in by_k.values():  # the merged folder can be graded into later: every record is there
        if f.out.resolve() != dest.resolve():
            for item in f.doc["entries"]:
                key = item["entry"]["key"]
                results.write_text(dest / ".lmgrade" / "records" / f"{key}.json", json.dumps(records[key], indent=1))
    all_questions = sorted({spec.question for spec in check_specs(assignment)}, key=results._qkey)
    write_outputs(result, assignment, dest, all_questions)
    return result
