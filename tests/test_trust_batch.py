"""Issue 9 classes 8 and 9, issue 11's resume: what one student's files can do to a TA's batch.

Attacks: a lone surrogate printed or raised, terminal escapes, a non-UTF-8 file name, a
985-deep notebook (class 8); links to solutions/ or to a classmate's file, file names that meet
after cleaning, names that are spreadsheet formulas (class 9). Each must leave valid results for
everyone, in single-file mode (--json) and in batch mode, on the first run and on every rerun.
Then Ctrl-C in the middle of a real batch: one line, exit 130, no process left, and the same
command grades only what was not saved.

Everything grades the small copy of `ngram` from test_batch (seven public checks and one tiny
hidden check), so that each submission takes about a second.
"""
import csv
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from autograder.grading import batch, outputs, submissions
from tests.test_batch import FAST, lost, points, read_grades, solution, tiny  # noqa: F401 - tiny is a fixture

SCHEMA = json.loads((Path(__file__).parent / "data" / "gradescope_results.schema.json").read_text())
DEEP = '{"cells": [], "metadata": {"x": ' + "[" * 985 + "]" * 985 + "}, \"nbformat\": 4}"
PRINTS_SURROGATE = '\n\ndef tokenize(line):\n    print("half a pair: \\ud800 and \\x1b]0;pwned\\x07\\x1b[2J")\n' \
                   '    return line.split()\n'
RAISES_SURROGATE = '\n\ndef tokenize(line):\n    raise ValueError("bad \\udcff byte\\r\\x1b[31mred")\n'
BAD_NAME = os.fsdecode(b"caf\xe9_ngram.py")  # not UTF-8: Python keeps it as a lone surrogate


def lmgrade(*args, root: Path, cwd=None, **kwargs):
    env = dict(os.environ, LMGRADE_ROOT=str(root))
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=120, cwd=cwd, env=env, **kwargs)


def write_attacks(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "printer.py").write_text(solution() + PRINTS_SURROGATE)
    (folder / "raiser.py").write_text(solution() + RAISES_SURROGATE)
    (folder / BAD_NAME).write_text(solution())
    (folder / "deep.ipynb").write_text(DEEP)


# ---- class 8, one file at a time ---------------------------------------------------------------
def test_one_file_at_a_time_every_attack_leaves_valid_results(tmp_path, tiny):
    subs = tmp_path / "subs"
    write_attacks(subs)
    for name, expected in (("printer.py", "lost"), ("raiser.py", "lost"), (BAD_NAME, "full"), ("deep.ipynb", "none")):
        out = tmp_path / "results.json"
        proc = lmgrade("grade", subs / name, "--assignment", "ngram", "--device", "cpu", "--allow-unconfined",
                       "--json", out, root=tiny.root)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(out.read_text())
        jsonschema.validate(doc, SCHEMA)
        for text in (json.dumps(doc, ensure_ascii=False), proc.stdout):  # the file and the terminal
            assert "\x1b" not in text and all(not 0xD800 <= ord(c) <= 0xDFFF for c in text), name
        if expected == "none":  # one message, not one per check
            assert doc["tests"] == [] and doc["score"] == 0 and doc["output"].count("nested more than") == 1
            assert proc.stdout.count("nested more than") == 1
            continue
        failed = {t["name"] for t in doc["tests"] if t["status"] == "failed"}
        assert all("tokenize" in failure for failure in failed)  # tokenize's checks only
        assert f"{doc['score']:g}" == (lost(tiny, "tokenize") if expected == "lost" else points(tiny))
        totals = [line.split()[1].split("/")[0] for line in proc.stdout.splitlines() if line.strip().startswith("total")]
        assert totals == [f"{doc['score']:g}"]
        shown = {"printer.py": "half a pair: ? and \\x1b]0;pwned\\x07", "raiser.py": "bad ? byte\\r\\x1b[31mred"}
        if name in shown:  # what the student's code said, legible and harmless, in the file and on the terminal
            outputs = "\n".join([doc["output"], *(t["output"] for t in doc["tests"])])
            assert shown[name] in outputs and shown[name] in proc.stdout, name


# ---- class 8 and 9, a whole batch ---------------------------------------------------------------
def test_a_batch_of_hostile_names_links_and_texts_grades_everyone(tmp_path, tiny):
    subs, out = tmp_path / "subs", tmp_path / "out"
    write_attacks(subs)
    (subs / "alice.py").write_text(solution())
    os.symlink(tiny.reference_path, subs / "mallory_ngram.py")  # the staff solution, by a link
    (subs / "eve").mkdir()
    os.symlink(subs / "alice.py", subs / "eve" / "ngram.py")  # a classmate's file
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(tiny.reference_path, elsewhere / "ngram.py")
    os.symlink(elsewhere, subs / "trudy")  # a folder outside the submissions
    (subs / "john~smith.py").write_text(solution())
    (subs / "john_smith.py").write_text(solution() + "\n\ndef tokenize(line):\n    return line.split()\n")
    for name in ("=1+1", "@SUM(A1)", "+1"):
        (subs / f"{name}.py").write_text(solution())
    (subs / "wrong.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1",
                                                             "outputs": [], "execution_count": None}],
                                                  "metadata": {"lmgrade": {"assignment": "attention"}}}))
    (subs / "empty.ipynb").write_text("")

    for attempt in range(2):  # every rerun must work too
        result = batch.run([subs], tiny, out, jobs=2, limits=FAST, progress=False)
        grades = read_grades(out)
        assert len(grades) == 15 and result.errors == [] and result.write_errors == []
        assert (result.graded, result.skipped) == ((15, 0) if attempt == 0 else (0, 15))

    assert grades["printer"]["total"] == grades["raiser"]["total"] == lost(tiny, "tokenize")
    assert grades["caf?"]["total"] == grades["alice"]["total"] == points(tiny)
    for name, status in (("deep", "unreadable"), ("empty", "unreadable"), ("wrong", "wrong assignment")):
        assert grades[name]["status"] == status and grades[name]["total"] == "0" and grades[name]["Q1"] == ""
    for name in ("mallory", "eve", "trudy"):
        assert grades[name]["total"] == "0" and grades[name]["status"] == "no file", name
    assert grades["john~smith"]["total"] == points(tiny) and grades["john_smith"]["total"] == lost(tiny, "tokenize")

    feedback = {p.name: p.read_text() for p in (out / "feedback").iterdir()}
    assert len(feedback) == 15  # no two students share a file
    owners = {text.splitlines()[0].rsplit("feedback for ", 1)[1] for text in feedback.values()}
    assert owners == {sid[1:] if sid[:2] in ("'=", "'@", "'+") else sid for sid in grades}
    assert "symbolic link" in feedback["mallory.txt"] and "Score: 0" in feedback["mallory.txt"]
    assert "symbolic link" in next(t for t in feedback.values() if "feedback for eve" in t)
    assert "nested more than" in feedback["deep.txt"] and feedback["deep.txt"].count("nested more than") == 1
    assert "`attention`" in feedback["wrong.txt"]
    for text in feedback.values():
        assert "\x1b" not in text and all(not 0xD800 <= ord(c) <= 0xDFFF for c in text)

    with open(out / "grades.csv", newline="") as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert {"'=1+1", "'@SUM(A1)", "'+1"} <= set(cells)
    assert [outputs.csv_cell(c) for c in ("-2+3", "\t=1", "\r=1", "a=1", 3)] == ["'-2+3", "'\t=1", "\\r=1", "a=1", 3]

    summary = (out / "summary.txt").read_text()
    assert "skipped 3 symbolic link(s)" in summary and "unreadable (0, left out of the statistics" in summary
    assert "12 with every question graded" in summary  # 15 less the unreadable and wrong-assignment ones
    for path in [out / "grades.csv", out / "summary.txt", out / "histogram.png", out / "feedback" / "alice.txt"]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o040, path  # group-readable, not mkstemp's 0600
    assert stat.S_IMODE((out / "feedback").stat().st_mode) & 0o050 == 0o050


def test_feedback_names_never_collide():
    names = ["john~smith", "john_smith", "John_Smith", "a/b", "a_b", "ok", "x" * 300, "x" * 301]
    chosen = submissions.unique_names(names)
    assert len(set(v.casefold() for v in chosen.values())) == len(names)
    assert chosen["ok"] == "ok" and chosen["a_b"] == "a_b"
    assert chosen == submissions.unique_names(list(reversed(names)))  # the same whatever the order
    assert all(len(v) < 120 and "/" not in v for v in chosen.values())


def test_a_feedback_file_that_cannot_be_written_costs_only_itself(tmp_path, tiny):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("alice", "bob"):
        (subs / f"{name}.py").write_text(solution())
    (out / "feedback" / "bob.txt").mkdir(parents=True)  # os.replace onto a folder fails
    result = batch.run([subs], tiny, out, limits=FAST, progress=False)
    assert set(read_grades(out)) == {"alice", "bob"} and (out / "feedback" / "alice.txt").is_file()
    assert len(result.write_errors) == 1 and "bob.txt" in result.write_errors[0]
    assert "could not write" in (out / "summary.txt").read_text()


# ---- Ctrl-C in the middle of a batch --------------------------------------------------------------
def _ours(*markers: str) -> list[str]:
    """Live processes whose command line names one of `markers`: graders name the course root,
    workers their scratch folder under this test's TMPDIR."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if any(marker in cmdline for marker in markers) and state not in "ZX":
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found


SLOW_LOAD = "\n_spin = 0\nfor _step in range(20_000_000):\n    _spin += 1\n"  # correct, and slow to load


@pytest.mark.parametrize("whom", ["group", "main"])  # a terminal signals the group; `kill -INT` one process
def test_ctrl_c_stops_cleanly_and_the_same_command_continues(tmp_path, tiny, whom):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    total = 6
    for i in range(total):  # all but the first two take a second to load: room to interrupt after the second
        (subs / f"student{i}.py").write_text(solution() + (SLOW_LOAD if i >= 2 else ""))
    scratch = tmp_path / "tmp"  # graders and workers keep their files here: it marks their command lines
    scratch.mkdir()
    command = [sys.executable, "-m", "autograder", "grade", str(subs), "--assignment", "ngram", "--device", "cpu",
               "--allow-unconfined", "--out", str(out), "--jobs", "2"]
    env = dict(os.environ, LMGRADE_ROOT=str(tiny.root), TMPDIR=str(scratch))
    # as from a TA's terminal: Ctrl-C at its default, even when this suite runs as a background job,
    # whose children a shell starts with SIGINT ignored (and an ignored SIGINT is never delivered)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    records = out / ".lmgrade" / "records"
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and len(list(records.glob("*.json"))) < 2:
        time.sleep(0.05)
    assert proc.poll() is None, "the batch ended before it could be interrupted"
    running = _ours(str(tmp_path), str(tiny.root))
    assert any("autograder.grading.grader_process" in p for p in running), running  # graders are found while they run
    if whom == "group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=40)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.count("interrupted") == 1
    saved = len(list(records.glob("*.json")))
    assert f"interrupted: {saved} of {total} graded and saved; run the same command to continue" in stderr
    assert 2 <= saved < total and not (out / "grades.csv").exists()
    time.sleep(0.2)
    assert _ours(str(tmp_path), str(tiny.root)) == []

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert f"graded now {total - saved}, unchanged since the last run {saved}" in again.stdout
    assert {row["total"] for row in read_grades(out).values()} == {points(tiny)} and len(read_grades(out)) == total
    assert _ours(str(tmp_path), str(tiny.root)) == []


@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o077, 0o640, 0o750), (0o022, 0o644, 0o755),
                                                        (0o002, 0o664, 0o775)])
def test_output_files_follow_the_umask_but_are_never_owner_only(tmp_path, umask, file_mode, dir_mode):
    from autograder.grading import results
    previous = os.umask(umask)
    try:
        results.write_text(tmp_path / "new" / "deeper" / "grades.csv", "a,b\n")
        results.write_json({"score": 1}, tmp_path / "results.json")
    finally:
        os.umask(previous)
    for path in (tmp_path / "new" / "deeper" / "grades.csv", tmp_path / "results.json"):
        assert stat.S_IMODE(path.stat().st_mode) == file_mode, oct(path.stat().st_mode)
    for folder in (tmp_path / "new", tmp_path / "new" / "deeper"):
        assert stat.S_IMODE(folder.stat().st_mode) == dir_mode, oct(folder.stat().st_mode)
