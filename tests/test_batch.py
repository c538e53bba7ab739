"""Batch grading as a TA runs it: finding submissions (Gradescope exports included), student ids,
parallel graders, resuming, regrading one question, grades.csv, feedback files, summary,
histogram; and a batch that goes on through hostile submissions.

Most tests grade a small copy of `ngram` (its seven public checks and one tiny hidden check:
well under a second per submission) so that whole batches stay fast.
"""
import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.authoring import assignments
from autograder.grading import batch, outputs, records, redaction, submissions
from autograder.sandbox.limits import Limits

NGRAM = assignments.get("ngram")
HIDDEN = '''
from autograder.checking.checks import check
from autograder.checking.compare import assert_equal


@check(1, 2, "tokenize on a few tricky lines", uses=("tokenize",))
def tokenize_tricky(t):
    for line in ["O'er the hills--and far away!", "Don't, won't... can't?", "In 1599, 2s. 2d. paid"]:
        assert_equal(t.student.tokenize(line), t.ref.tokenize(line), f"tokenize({line!r})")
'''



def points(assignment, question=None, *, uses=None, extra=True) -> str:
    """Points of the assignment's checks (of one question, grading one function), as grades.csv shows them.

    Why computed: the tiny copy takes `ngram`'s public checks as they are, so their number and
    points follow that assignment's own changes.
    """
    total = sum(spec.points for spec in records.check_specs(assignment)
                if (question is None or spec.question == question) and (uses is None or uses in spec.uses)
                and (extra or not spec.extra))
    return f"{total:g}"


def lost(assignment, name: str) -> str:
    """The total of a submission whose `name` fails every check that grades it, all else correct."""
    return f"{float(points(assignment)) - float(points(assignment, uses=name)):g}"


WRONG_TOKENIZE = "\n\ndef tokenize(line):\n    return line.split()\n"  # later definition wins
FAST = Limits(call_timeout=3, load_timeout=5)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> assignments.Assignment:
    root = tmp_path_factory.mktemp("course")
    folder = root / "assignments" / "ngram"
    folder.mkdir(parents=True)
    for name in ("meta.toml", "public_checks.py", "public_fixtures.json"):
        shutil.copy(NGRAM.dir / name, folder / name)
    (folder / "hidden_checks.py").write_text(HIDDEN)
    for sub, source in (("solutions", NGRAM.reference_path), ("starter_notebooks", NGRAM.starter_path)):
        (root / sub).mkdir()
        shutil.copy(source, root / sub / source.name)
    return assignments.Assignment("ngram", root)


def solution() -> str:
    return NGRAM.reference_path.read_text()


def read_grades(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


# ---- finding submissions ---------------------------------------------------------------------
@pytest.mark.parametrize("name, expected", [("alice_ngram", "alice"), ("ngram-bob", "bob"), ("carol", "carol"),
                                            ("Dan Smith - ngram (2)", "Dan Smith (2)"), ("ngram", "ngram"),
                                            ("ngrammar_fan", "ngrammar_fan")])
def test_student_id_from_the_file_name(name, expected):
    assert submissions.student_id(name, "ngram") == expected


METADATA = """---
submission_101:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2025-01-01 10:00:00.000000000 -08:00
  :score: 9.0
submission_102:
  :submitters:
  - :name: Alan Turing
    :sid: ''
    :email: alan@example.edu
  :created_at: 2025-01-02 10:00:00.000000000 -08:00
  :history:
  - :id: 99
    :score: 1.0
submission_103:
  :submitters:
  - :name: Grace Hopper
    :sid: "1906"
    :email: grace@example.edu
submission_104:
  :submitters:
  - :email: x@example.edu
    :name: Pair One
    :sid: '1'
  - :name: Pair Two
    :sid: '2'
    :email: y@example.edu
  :score: 3.0
"""


METADATA_NAME = "submission_metadata.yml"


def make_export(tmp_path) -> Path:
    """Gradescope's "Export Submissions" layout: metadata plus one folder per submission."""
    root = tmp_path / "assignment_4242_export"
    root.mkdir()
    (root / "submission_metadata.yml").write_text(METADATA)
    (root / "submission_101").mkdir()
    (root / "submission_101" / "ngram.ipynb").write_text(NGRAM.starter_path.read_text())
    sub = root / "submission_102"
    (sub / ".ipynb_checkpoints").mkdir(parents=True)
    (sub / ".ipynb_checkpoints" / "ngram-checkpoint.ipynb").write_text("{}")
    (sub / "scratch.ipynb").write_text("{}")
    (sub / "homework").mkdir()
    (sub / "homework" / "ngram.ipynb").write_text(NGRAM.starter_path.read_text())
    (root / "submission_103").mkdir()  # uploaded nothing gradable
    (root / "submission_103" / "notes.txt").write_text("sorry")
    (root / "submission_104").mkdir()
    (root / "submission_104" / "lm.py").write_text(solution())
    return root


def zip_folder(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w") as zf:
        for path in folder.rglob("*"):
            zf.write(path, path.relative_to(folder.parent))
    return archive


def test_gradescope_export_folder_and_zip(tmp_path):
    root = make_export(tmp_path)
    people = submissions.read_gradescope_metadata(root / "submission_metadata.yml")
    assert people["submission_101"] == [{"name": "Ada Lovelace", "sid": "1815", "email": "ada@example.edu"}]
    assert [p["sid"] for p in people["submission_104"]] == ["1", "2"]
    archive = zip_folder(root, tmp_path / "export.zip")
    for source in (root, tmp_path / "as-downloaded", archive):
        if source.name == "as-downloaded":  # the unzipped folder one level up, as a browser leaves it
            shutil.copytree(root, source / root.name)
        entries = submissions.discover([source], NGRAM, tmp_path / "work")
        got = {tuple(e.students): (e.path.relative_to(e.path.parents[1]).as_posix() if e.path else None) for e in entries}
        assert got == {("1815",): "submission_101/ngram.ipynb", ("alan@example.edu",): "homework/ngram.ipynb",
                       ("1906",): None, ("1", "2"): "submission_104/lm.py"}, source
        note = next(e.note for e in entries if e.students == ["alan@example.edu"])
        assert "2 candidate files" in note and "homework/ngram.ipynb" in note


def test_plain_folder_files_and_clashing_ids(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("alice_ngram.py", "alice.ipynb", "bob.py", "README.md", ".hidden.py"):
        (subs / name).write_text("")
    (subs / "carol").mkdir()
    (subs / "carol" / "my_ngram.py").write_text("")
    (subs / "out").mkdir()  # the output folder inside the input folder is not a submission
    entries = submissions.discover([subs], NGRAM, tmp_path / "work", skip=subs / "out")
    assert sorted(s for e in entries for s in e.students) == [
        "alice (alice.ipynb)", "alice (alice_ngram.py)", "bob", "carol"]
    assert len({e.key for e in entries}) == 4


def test_grades_csv_of_an_export_names_gradescope_submissions_and_people(tmp_path, tiny):
    """A TA matches grades.csv back to Gradescope: its submission id, each submitter's name and
    e-mail from submission_metadata.yml, one row per group member; never the folder the zip was
    unpacked into; and a name in the metadata is as harmless in a spreadsheet as a file name."""
    root = make_export(tmp_path)
    (root / METADATA_NAME).write_text(METADATA.replace("Alan Turing", "=HYPERLINK(\"http://x\")"))
    archive = zip_folder(root, tmp_path / "export.zip")
    out = tmp_path / "out"
    batch.run([archive], tiny, out, limits=FAST, progress=False)
    with open(out / "grades.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    assert header[:5] == ["student_id", "name", "email", "submission_id", "submission"]
    grades = {row[0]: dict(zip(header, row)) for row in rows}
    assert {sid: (g["name"], g["email"], g["submission_id"]) for sid, g in grades.items()} == {
        "1815": ("Ada Lovelace", "ada@example.edu", "101"),
        "alan@example.edu": ("'=HYPERLINK(\"http://x\")", "alan@example.edu", "102"),
        "1906": ("Grace Hopper", "grace@example.edu", "103"),
        "1": ("Pair One", "x@example.edu", "104"), "2": ("Pair Two", "y@example.edu", "104")}
    assert grades["1"]["total"] == grades["2"]["total"] == points(tiny) and grades["1815"]["total"] == "0"
    assert grades["1906"]["status"] == "no file"
    for g in grades.values():
        assert g["submission"] == f"{archive}/{root.name}/submission_{g['submission_id']}"  # the zip as the TA named it
    assert ".lmgrade" not in (out / "grades.csv").read_text() and str(out) not in (out / "grades.csv").read_text()
    assert "Submission: submission_101" in (out / "feedback" / "1815.txt").read_text()


# ---- a whole batch -----------------------------------------------------------------------------
def test_batch_grades_resumes_and_regrades(tmp_path, tiny):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice_ngram.py").write_text(solution())
    shutil.copy(NGRAM.starter_path, subs / "bob.ipynb")
    (subs / "carol.py").write_text(solution() + WRONG_TOKENIZE)
    (subs / "dave").mkdir()  # a folder with nothing to grade
    out = tmp_path / "out"

    first = batch.run([subs], tiny, out, jobs=2, limits=FAST, progress=False)
    assert (first.graded, first.skipped, first.errors) == (4, 0, [])
    grades = read_grades(out)
    assert {sid: row["total"] for sid, row in grades.items()} == {"alice": points(tiny), "bob": "0",
                                                                   "carol": lost(tiny, "tokenize"), "dave": "0"}
    q1_left = f"{float(points(tiny, '1')) - float(points(tiny, '1', uses='tokenize')):g}"
    assert grades["carol"]["Q1"] == q1_left and grades["carol"]["Q2"] == points(tiny, "2")
    assert grades["alice"]["max"] == points(tiny, extra=False)
    assert grades["dave"]["status"] == "no file" and grades["alice"]["status"] == "graded"
    specs = records.check_specs(tiny)
    questions = [f"Q{q}" + (" (extra)" if any(s.extra for s in specs if s.question == q) else "")
                 for q in sorted({s.question for s in specs}, key=int)]
    assert list(grades["alice"]) == ["student_id", "submission", *questions, "total", "max", "status"]
    assert questions[:6] == ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6"]
    feedback = (out / "feedback" / "carol.txt").read_text()
    assert "feedback for carol" in feedback and "tokenize" in feedback and "Passed checks:" in feedback
    assert "No notebook (.ipynb) or .py file" in (out / "feedback" / "dave.txt").read_text()
    assert (out / "histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "leaderboard.csv").read_text() == "metric,order,rank,student,value,held_out\n"  # no check publishes
    report = (out / "report.html").read_text()
    assert 'href="feedback/carol.txt"' in report and "tokenize(&lt;text&gt;)" in report  # tests/test_report.py: more
    summary = (out / "summary.txt").read_text()
    assert re.search(r"Q1 +Tokens and vocabulary +mean ", summary) and "checks failed most often" in summary
    assert "tokenize on a few tricky lines [tokenize_tricky]: 2 of 3 failed" in summary
    q1 = next(line for line in summary.splitlines() if line.strip().startswith("Q1 "))
    assert q1.split()[-1] == "33%"  # full marks on Q1: alice, of the three that submitted a file
    assert "over 3 graded submissions (1 no file excluded)" in q1

    again = batch.run([subs], tiny, out, jobs=2, limits=FAST, progress=False)  # nothing changed: nothing graded
    assert (again.graded, again.skipped) == (0, 4) and read_grades(out) == grades
    assert json.loads((out / ".lmgrade" / "records" / "alice.json").read_text())["graded_at"] == \
        first.records["alice"]["graded_at"]

    (subs / "carol.py").write_text(solution())  # carol resubmits: only she is graded again
    third = batch.run([subs], tiny, out, jobs=1, limits=FAST, progress=False)
    assert (third.graded, third.skipped) == (1, 3) and read_grades(out)["carol"]["total"] == points(tiny)

    forced = batch.run([subs], tiny, out, jobs=2, limits=FAST, force=True, progress=False)
    assert (forced.graded, forced.skipped) == (4, 0)

    # a changed check regrades everything; --question regrades one question and keeps the others
    hidden = tiny.dir / "hidden_checks.py"
    original = hidden.read_text()
    try:
        hidden.write_text(original.replace("@check(1, 2,", "@check(1, 3,"))
        (subs / "carol.py").write_text(solution() + WRONG_TOKENIZE)
        regraded = batch.run([subs], tiny, out, jobs=2, limits=FAST, questions=["1"], progress=False)
        grades = read_grades(out)
        assert regraded.graded == 4 and grades["carol"]["Q1"] == q1_left and grades["carol"]["Q2"] == ""
        assert grades["alice"]["Q1"] == points(tiny, "1") and grades["alice"]["Q2"] == points(tiny, "2")
        assert grades["alice"]["total"] == points(tiny)
        assert grades["carol"]["status"].startswith("partial")  # her new file: only Q1 graded so far
        q2 = next(line for line in regraded.summary.splitlines() if line.strip().startswith("Q2 "))
        assert "over 2 graded submissions (1 no file, 1 not graded yet excluded)" in q2
        full = batch.run([subs], tiny, out, jobs=2, limits=FAST, progress=False)
        assert full.graded == 3  # the checks changed since their other questions were graded (dave: nothing to grade)
        assert read_grades(out)["carol"]["total"] == lost(tiny, "tokenize")
        assert read_grades(out)["alice"]["max"] == points(tiny, extra=False)
    finally:
        hidden.write_text(original)


def test_the_same_folder_typed_otherwise_is_the_same_batch(tmp_path, tiny, monkeypatch):
    """A TA who graded `/home/ta/subs` and reruns from the course folder as `subs` regrades nothing:
    a submission is known by its student and its file's bytes, not by how the folder was typed.
    A file that really changed is still graded again, and the outputs name files as typed this time."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(solution())
    (subs / "carol.py").write_text(solution() + WRONG_TOKENIZE)
    (subs / "empty.ipynb").write_text("")
    (subs / "dave").mkdir()
    first = batch.run([subs], tiny, out, limits=FAST, progress=False)
    assert (first.graded, first.skipped) == (4, 0)
    before = read_grades(out)
    assert before["alice"]["submission"] == str(subs / "alice.py")

    monkeypatch.chdir(tmp_path)
    for typed in (Path("subs"), Path("./subs/"), Path("out/../subs")):
        again = batch.run([typed], tiny, Path("out"), limits=FAST, progress=False)
        assert (again.graded, again.skipped) == (0, 4), typed
        grades = read_grades(out)
        assert grades["alice"]["submission"] == str(typed / "alice.py")  # named as typed this time
        assert {sid: row["total"] for sid, row in grades.items()} == {sid: row["total"] for sid, row in before.items()}
        record = json.loads((out / ".lmgrade" / "records" / "alice.json").read_text())
        assert record["graded_at"] == first.records["alice"]["graded_at"] and record["source"] == str(typed / "alice.py")

    (subs / "carol.py").write_text(solution())  # a real change: graded again, whatever the spelling
    third = batch.run([subs.resolve()], tiny, out.resolve(), limits=FAST, progress=False)
    assert (third.graded, third.skipped) == (1, 3) and read_grades(out)["carol"]["total"] == points(tiny)


WRONG_ASSIGNMENT = json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [],
                                          "execution_count": None}], "metadata": {"lmgrade": {"assignment": "attention"}}})


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, tiny):
    """A batch as a TA meets it: two graded files, an unreadable one, another assignment's notebook
    and a folder with nothing to grade; graded once, with what its progress printed."""
    tmp = tmp_path_factory.mktemp("mixed")
    subs, out = tmp / "subs", tmp / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(solution())
    (subs / "carol.py").write_text(solution() + WRONG_TOKENIZE)
    (subs / "empty.ipynb").write_text("")
    (subs / "wrong.ipynb").write_text(WRONG_ASSIGNMENT)
    (subs / "dave").mkdir()
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        result = batch.run([subs], tiny, out, jobs=2, limits=FAST, progress=False)
    return subs, out, result, stderr.getvalue()


def progress_lines(stderr: str) -> list[tuple[int, int, str]]:
    return [(int(m[1]), int(m[2]), m[3]) for m in re.finditer(r"^\[(\d+)/(\d+)\] (.*)$", stderr, re.M)]


def test_progress_counts_every_submission_once_and_ends_at_the_total(mixed, tiny, capsys):
    subs, out, _, stderr = mixed
    lines = progress_lines(stderr)
    assert [(n, total) for n, total, _ in lines] == [(n, 5) for n in range(1, 6)], stderr
    who = sorted(text.split(":")[0] for *_, text in lines)
    assert who == ["alice", "carol", "dave", "empty", "wrong"]  # unreadable and wrong assignment counted too
    assert any(text.startswith("empty: unreadable") for *_, text in lines)
    assert any(text.startswith("wrong: wrong assignment") for *_, text in lines)

    # a second run: the unchanged ones counted at once, the one changed file after them
    again, out2 = subs.parent / "again", subs.parent / "out2"
    shutil.copytree(subs, again)
    batch.run([again], tiny, out2, jobs=2, limits=FAST, progress=False)
    capsys.readouterr()
    (again / "carol.py").write_text(solution())
    batch.run([again], tiny, out2, limits=FAST, progress=False)
    lines = progress_lines(capsys.readouterr().err)
    assert lines == [(4, 5, "4 unchanged since the last run, not graded again"), (5, 5, lines[-1][2])]
    assert lines[-1][2].startswith(f"carol: {points(tiny)}/")

    (again / "alice.py").write_text(solution() + WRONG_TOKENIZE)  # the bar as a terminal shows it
    batch.run([again], tiny, out2, limits=FAST, progress=True)
    bar = capsys.readouterr().err
    assert "5/5" in bar and not re.search(r"\b[6-9]/5\b", bar)


def test_every_mean_in_the_summary_says_its_denominator(mixed, tiny):
    _, out, result, _ = mixed
    summary = (out / "summary.txt").read_text()
    assert summary.strip() == result.summary.strip()
    grades = read_grades(out)
    rows = {line.split()[0]: line for line in summary.splitlines() if re.match(r"^\s+Q\d+ .* mean ", line)}
    assert len(rows) == len({s.question for s in records.check_specs(tiny)})
    for q, line in rows.items():  # the mean of exactly the two graded files, and the three left out named
        column = next(c for c in grades["alice"] if c.split()[0] == q)  # "Q7 (extra)" too
        mean = (float(grades["alice"][column]) + float(grades["carol"][column])) / 2
        assert f"mean {mean:5.2f}/" in line, line
        assert line.split(f"/")[1].split()[1:] == ["over", "2", "graded", "submissions", "(1", "no", "file,", "1",
                                                   "unreadable,", "1", "wrong", "assignment", "excluded);",
                                                   "full", "marks", line.split()[-1]], line
    total = next(line for line in summary.splitlines() if "with every question graded" in line)
    assert "over these 3, 1 with no file as 0 (1 unreadable, 1 wrong assignment excluded)" in total
    mean_total = (float(grades["alice"]["total"]) + float(grades["carol"]["total"]) + 0) / 3
    assert f"mean {mean_total:.2f}," in total


def test_the_histogram_counts_submissions_in_whole_numbers(tiny):
    """Three submissions: matplotlib's default ticks would read 0.25, 0.5, ... submissions."""
    fig = outputs.histogram_figure([3.0, 5.0, 5.0], {"1": [(1.0, 2.0)], "2": [(0.0, 1.0)]}, 10, tiny)
    fig.canvas.draw()
    counts = fig.axes[0]
    assert counts.get_ylabel() == "submissions"
    ticks = [t for t in counts.get_yticks() if counts.get_ylim()[0] <= t <= counts.get_ylim()[1]]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
    labels = [label.get_text() for label in counts.get_yticklabels() if label.get_text()]
    assert labels and all(re.fullmatch(r"\d+", label.replace("\u2212", "-")) for label in labels), labels


def test_a_batch_goes_on_through_hostile_submissions(tmp_path, tiny):
    """Confinement off (as where Landlock is missing), so that submissions can kill their grader
    and write the output folder: the batch still ends, and its outputs are the trusted side's."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "good.py").write_text(solution())
    batch.run([subs], tiny, out, limits=FAST, progress=False)
    assert read_grades(out)["good"]["total"] == points(tiny)

    hostile = {
        "killer": "import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return []",
        "looper": "while True:\n        pass",
        "exiter": "import os\n    os._exit(1)",
        "bomber": "return len(bytearray(20 * 10**9))",
        "reader": f"print(open({str(tiny.dir / 'hidden_checks.py')!r}).read())\n    return line.split()",
    }
    for name, body in hostile.items():
        (subs / f"{name}.py").write_text(solution() + f"\n\ndef tokenize(line):\n    {body}\n")
    (subs / "leaver.py").write_text(solution() + "\nimport sys\nsys.exit('bye')\n")
    (subs / "broken.ipynb").write_text('{"cells": [')
    forged_row = "good,x,9,9,9,9,9,9,100,9,graded\n"
    (subs / "tamperer.py").write_text(solution() + f"""
import json, os
OUT = {str(out)!r}

def tamper():
    with open(os.path.join(OUT, "grades.csv"), "a") as f:
        f.write({forged_row!r})
    with open(os.path.join(OUT, "feedback", "good.txt"), "w") as f:
        f.write("you failed")
    record = os.path.join(OUT, ".lmgrade", "records", "good.json")
    doc = json.load(open(record))
    for r in doc["report"]["results"]:
        r["score"] = r["max_score"] = 50.0
    json.dump(doc, open(record, "w"))
    with open(os.path.join(OUT, ".lmgrade", "records", "tamperer.json"), "w") as f:
        f.write("{{}}")

def tokenize(line):
    tamper()
    return line.split()
""")
    limits = Limits(call_timeout=2, load_timeout=3, confine=False, isolate_network=False)
    result = batch.run([subs], tiny, out, jobs=2, limits=limits, progress=False)
    grades = read_grades(out)
    assert result.skipped == 1 and len(grades) == 9
    assert grades["good"]["total"] == points(tiny) and grades["good"]["status"] == "graded"
    assert sum(1 for line in (out / "grades.csv").read_text().splitlines() if line.startswith("good,")) == 1
    assert "you failed" not in (out / "feedback" / "good.txt").read_text()
    assert json.loads((out / ".lmgrade" / "records" / "good.json").read_text())["report"]["results"][0]["score"] == 1.0
    for name in ("looper", "exiter", "bomber", "reader", "tamperer"):
        assert grades[name]["total"] == lost(tiny, "tokenize"), (name, grades[name])  # tokenize's points lost, no more
    # `import sys; sys.exit(...)` at the end of a .py is outside the graded-code subset: not run, and said where
    assert grades["leaver"]["total"] == points(tiny) and "Not run: `sys`" in (out / "feedback" / "leaver.txt").read_text()
    assert grades["broken"]["total"] == "0" and "not valid JSON" in (out / "feedback" / "broken.txt").read_text()
    # killing the grader needs `os`, outside the graded-code subset: refused before it runs, like the others
    assert grades["killer"]["total"] == lost(tiny, "tokenize") and result.errors == []
    reader = (out / "feedback" / "reader.txt").read_text()
    # the hidden checks' text never reaches feedback: the worker (its own uid, the guard) cannot open
    # the file, and what a worker that could would print is redacted (test_redaction's business)
    assert "PermissionError" in reader and not [line for line in redaction.secret_lines(tiny) if line in reader]
    for name in ("looper", "bomber"):
        assert "tokenize(" in (out / "feedback" / f"{name}.txt").read_text()
    assert "Not graded" in (out / "feedback" / "exiter.txt").read_text()  # `os._exit`: outside the subset
    assert _strays() == []


def _strays() -> list[int]:
    """Live processes started by this test process's workers: there must be none left."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] not in "ZX" and int(fields[3]) != os.getsid(0):
                found.append(int(entry.name))
    return found


# ---- the command --------------------------------------------------------------------------------
def lmgrade(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_the_grade_command_in_batch_mode(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice_ngram.py").write_text(solution())
    shutil.copy(NGRAM.starter_path, subs / "bob_ngram.ipynb")
    proc = lmgrade("grade", subs, "--assignment", "ngram", "--device", "cpu", "--allow-unconfined",
                   "--out", out, "--jobs", "2", "--question", "1")
    assert proc.returncode == 0, proc.stderr
    assert "2 submissions; graded now 2" in proc.stdout and "Tokens and vocabulary" in proc.stdout
    assert "[2/2]" in proc.stderr  # progress, one line per submission when not on a terminal
    grades = read_grades(out)
    assert grades["alice"]["Q1"] == points(NGRAM, "1") and grades["bob"]["Q1"] == "0"
    assert (out / "feedback" / "alice.txt").exists() and (out / "histogram.png").exists()
    again = lmgrade("grade", subs, "--assignment", "ngram", "--device", "cpu", "--allow-unconfined",
                    "--out", out, "--question", "1")
    assert again.returncode == 0 and "graded now 2" in again.stdout  # --question always regrades


@pytest.mark.parametrize("args, message", [
    (["--json", "r.json", "--out", "o"], "--json is for one submission"),
    ([], "add --out DIR"),
    (["--out", "o", "--jobs", "0"], "--jobs must be at least 1"),
    (["--out", "o", "--question", "9"], "no such question in ngram: 9"),
])
def test_batch_argument_errors_exit_2(tmp_path, args, message):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "a.py").write_text("")
    proc = lmgrade("grade", "subs", "--assignment", "ngram", "--device", "cpu", "--allow-unconfined",
                   *args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
