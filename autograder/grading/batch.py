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

This module is the run itself; its parts are beside it: finding submissions (`submissions`),
records and resuming (`records`), redaction (`redaction`), the grader processes
(`grader_process`) and the files written at the end (`outputs`).
"""
from __future__ import annotations

import dataclasses
import json
import queue
import signal
import sys
import threading
import time
from pathlib import Path

from autograder.authoring.assignments import Assignment
from autograder.grading import results
from autograder.grading import shard as sharding
from autograder.grading.grader_process import GraderProcess, Outcome
from autograder.grading.outputs import write_outputs
from autograder.grading.records import (RECORD_VERSION, BatchResult, check_specs, checks_digest, file_digest,
                                        load_records, report_from_dict, report_to_dict, write_text)
from autograder.grading.results import clean
from autograder.grading.submissions import Entry, discover
from autograder.sandbox import capabilities, extract, processes
from autograder.sandbox.limits import Limits

SUBMISSION_TIMEOUT = 3600.0  # seconds for one whole submission, a backstop behind the per-call deadlines


class Interrupted(Exception):
    """Ctrl-C during a batch: what was finished is saved; the same command continues."""

    def __init__(self, saved: int, total: int, what: str = ""):
        super().__init__(f"{what}interrupted: {saved} of {total} graded and saved; run the same command to continue")
        self.saved, self.total = saved, total


def run(inputs: list[Path], assignment: Assignment, out: Path, *, jobs: int = 1, device: str = "cpu",
        questions: list[str] | None = None, force: bool = False, limits: Limits | None = None,
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
    results.make_dir(out)
    state = out / ".lmgrade"
    everyone = discover(inputs, assignment, state if shard is None else sharding.workdir(state, *shard), skip=out)
    if not everyone:
        raise ValueError(f"no submissions (.ipynb or .py files, or one folder per student) in {', '.join(map(clean, inputs))}")
    entries = everyone if shard is None else sharding.part(everyone, *shard)
    # each submission is known by what it is (its students and its file's bytes), never by how the
    # folder was typed: `subs` and its absolute path are the same batch, resumed, and shards agree
    shas = {e.key: file_digest(e.path) for e in (everyone if shard is not None else entries)}
    records = load_records(state / "records")  # read once: nothing written later by a worker counts
    digest = checks_digest(assignment)
    all_questions = sorted({spec.question for spec in check_specs(assignment)}, key=results._qkey)
    if questions:
        unknown = sorted(set(questions) - set(all_questions))
        if unknown:
            raise ValueError(f"no such question in {assignment.id}: {', '.join(unknown)} (it has {', '.join(all_questions)})")
    todo, problems, result = [], [], BatchResult(entries=entries, records={}, shard=shard)
    tracker = None if shard is None else sharding.Manifest(state, shard, assignment.id, digest, questions, inputs,
                                                           everyone, shas)
    saved = [0]
    bar = None
    try:
        for entry in entries:
            old = records.get(entry.key)
            sha = shas[entry.key]
            fresh = (old is not None and old.get("status") == "graded" and old.get("sha256") == sha
                     and old.get("checks") == digest and set(old.get("questions", [])) >= set(all_questions)
                     and old.get("students") == entry.students)
            if fresh and not force and not questions:
                where = _where(entry)  # the same submission, perhaps typed otherwise: say where it is now
                if any(old.get(k) != v for k, v in where.items()):
                    old.update(where)  # saved at once: a shard's manifest must match the record on disk
                    write_text(state / "records" / f"{entry.key}.json", json.dumps(old, indent=1))
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
            write_text(state / "records" / f"{key}.json", json.dumps(record, indent=1))
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
    write_text(state / "records" / f"{entry.key}.json", json.dumps(record, indent=1))
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


def _where(entry: Entry) -> dict:
    """A record's fields that say where its file was found this time (they vary with how the inputs were typed)."""
    return {"source": entry.source, "file": str(entry.path) if entry.path else None, "note": entry.note}


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
    capabilities.harden_this_process()  # a dead grader's worker is re-parented here, to be killed
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
                            processes.kill_orphans(spare=set(graders))
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
            processes.kill_orphans()
        finally:
            signal.signal(signal.SIGINT, previous)
        raise
    with lock:
        processes.kill_orphans(spare=set(graders))
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
