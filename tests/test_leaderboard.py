"""The leaderboard: a check publishes a metric of the student's work (`t.publish`), the runner keeps
it only when the whole check passes, results.json carries Gradescope's `leaderboard`, a batch
writes leaderboard.csv, and `lmgrade merge` of shards writes the same file as one run.

The course is test_batch's small copy of `ngram` with two more hidden checks. One publishes what
the submission's `my_perplexity()` returns *before* it checks `tokenize`, so a submission with a
wrong `tokenize` has called `publish` and must still get no entry (as a pasted model whose
provenance check fails). The other fails above 100 with a message that names a hidden input and
a reference figure, which report.html must never show (tests/test_report.py).
"""
import csv
import json
import math
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from autograder.authoring import assignments
from autograder.checking.checks import CheckSpec, Context
from autograder.grading import batch, gradescope_schema, records, results, runner, shard
from tests.test_batch import FAST, HIDDEN, NGRAM, WRONG_TOKENIZE, solution

SCHEMA = json.loads((Path(__file__).parent / "data" / "gradescope_results.schema.json").read_text())
REFERENCE_FIGURE = "987654.321"  # planted in a hidden check's failure: never in report.html
HIDDEN_INPUT = "zyzzyva quokka"
HOSTILE = "<img src=x onerror=alert(1)>"  # a student id, from a file name

BOARD_CHECKS = HIDDEN + f'''
from autograder.errors import CheckFailed


@check(2, 1, "a score for the leaderboard", uses=("tokenize",))
def leaderboard_score(t):
    value = t.student.my_perplexity()
    t.publish("perplexity", value, held_out=False)  # before the verdict: kept only if the check passes
    t.publish("held-out perplexity", 2 * value)  # a hidden check's default: held out
    line = "O'er the hills--and far away!"
    assert_equal(t.student.tokenize(line), t.ref.tokenize(line), f"tokenize({{line!r}})")


@check(3, 1, "a hidden reference figure")
def planted_reference(t):
    value = t.student.my_perplexity()
    if value > 100:
        raise CheckFailed(f"perplexity {{value:.2f}} on {HIDDEN_INPUT!r} is far above the reference's "
                          "{REFERENCE_FIGURE}")
'''

SUBMISSIONS = {  # file -> (my_perplexity's value, a wrong tokenize)
    "alice.py": ("12.5", False), "bob.py": ("9.25", False), "erin.py": ("12.5", False),
    "carol.py": ("8.0", True),  # the best value, but its check fails: no entry
    "dave.py": ("float('nan')", False),  # refused: no entry, a note
    "frank.py": ("150.0", False), f"{HOSTILE}.py": ("300.0", True),  # the planted failure, twice
}


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> assignments.Assignment:
    root = tmp_path_factory.mktemp("board-course")
    folder = root / "assignments" / "ngram"
    folder.mkdir(parents=True)
    for name in ("meta.toml", "public_checks.py", "public_fixtures.json"):
        shutil.copy(NGRAM.dir / name, folder / name)
    (folder / "hidden_checks.py").write_text(BOARD_CHECKS)
    for sub, source in (("solutions", NGRAM.reference_path), ("starter_notebooks", NGRAM.starter_path)):
        (root / sub).mkdir()
        shutil.copy(source, root / sub / source.name)
    return assignments.Assignment("ngram", root)


def submission(value: str, wrong: bool) -> str:
    return solution() + (WRONG_TOKENIZE if wrong else "") + f"\n\ndef my_perplexity():\n    return {value}\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, board) -> tuple[Path, Path, records.BatchResult]:
    """The submissions graded once in one run: (submissions folder, OUT, result)."""
    tmp = tmp_path_factory.mktemp("board-batch")
    subs, out = tmp / "subs", tmp / "out"
    subs.mkdir()
    for name, (value, wrong) in SUBMISSIONS.items():
        (subs / name).write_text(submission(value, wrong))
    (subs / "gina").mkdir()  # nothing to grade
    result = batch.run([subs], board, out, jobs=2, limits=FAST, progress=False)
    assert result.errors == []
    return subs, out, result


def report_of(result: records.BatchResult, key: str) -> runner.Report:
    return results.sanitize(records.report_from_dict(result.records[key]["report"]))


# ---- publishing ------------------------------------------------------------------------------------
def context(public: bool = False) -> Context:
    return Context(student=None, ref=None, spec=CheckSpec("c", "1", 1.0, "t", public=public))


@pytest.mark.parametrize("name, value, order, error", [
    ("ppl", True, "asc", TypeError),  # a bool is no metric, though Python counts it as 1
    ("ppl", "12", "asc", TypeError),
    ("ppl", [1.0], "asc", TypeError),
    ("x" * 65, 1.0, "asc", ValueError),
    ("", 1.0, "asc", ValueError),
    ("ppl\nsecond line", 1.0, "asc", ValueError),
    (3, 1.0, "asc", ValueError),
    ("ppl", 1.0, "up", ValueError),
])
def test_publish_refuses_what_is_no_metric(name, value, order, error):
    t = context()
    with pytest.raises(error):
        t.publish(name, value, order)
    assert t.published == []


def test_publish_keeps_finite_numbers_and_refuses_nan_and_inf_with_a_note():
    t = context()
    t.publish("perplexity", np.float64(3.5))
    t.publish("accuracy", 1, order="desc", held_out=False)
    for bad in (float("nan"), float("inf"), -math.inf):
        t.publish(f"bad {bad}", bad)
    assert t.published == [{"name": "perplexity", "value": 3.5, "order": "asc", "held_out": True},
                           {"name": "accuracy", "value": 1.0, "order": "desc", "held_out": False}]
    assert type(t.published[0]["value"]) is float
    assert t.notes == ["No leaderboard entry for bad nan: its value is nan.",
                       "No leaderboard entry for bad inf: its value is inf.",
                       "No leaderboard entry for bad -inf: its value is -inf."]
    with pytest.raises(ValueError, match="twice"):
        t.publish("perplexity", 1.0)
    public = context(public=True)
    public.publish("perplexity", 1.0)
    assert public.published[0]["held_out"] is False  # a public check's data is the students' own


def test_only_checks_that_passed_publish(graded):
    _, _, result = graded
    scores = {key: {e["name"]: e["value"] for e in report_of(result, key).leaderboard}
              for key in ("alice", "bob", "carol", "dave")}
    assert scores == {"alice": {"perplexity": 12.5, "held-out perplexity": 25.0},
                      "bob": {"perplexity": 9.25, "held-out perplexity": 18.5}, "carol": {}, "dave": {}}
    carol = next(r for r in report_of(result, "carol").results if r.name == "leaderboard_score")
    assert not carol.passed and carol.published == []  # it called publish, then failed
    dave = next(r for r in report_of(result, "dave").results if r.name == "leaderboard_score")
    assert dave.passed and "No leaderboard entry for perplexity: its value is nan." in dave.output


def test_a_record_cannot_smuggle_an_entry():
    """Records are read back from disk: entries of failed checks, non-finite or malformed ones go."""
    good = {"name": "perplexity", "value": 2.0, "order": "asc", "held_out": False}
    report = runner.Report("ngram", "x.py", "cpu", results=[
        runner.CheckResult("a", "1", "t", 0.0, 1.0, False, "no", False, published=[good]),
        runner.CheckResult("b", "1", "t", 1.0, 1.0, True, "ok", False, published=[
            {**good, "value": float("nan")}, {**good, "name": "x" * 500}, {"name": "y"}, "junk", good, good]),
        runner.CheckResult("c", "1", "t", 1.0, 1.0, True, "ok", False, published="junk")])
    results.sanitize(report)
    assert [r.published for r in report.results] == [[], [good], []]
    assert report.leaderboard == [good]


# ---- results.json ------------------------------------------------------------------------------------
def test_results_json_has_gradescopes_leaderboard_without_held_out_metrics(graded):
    _, _, result = graded
    doc = results.gradescope_json(report_of(result, "bob"))
    assert doc["leaderboard"] == [{"name": "perplexity", "value": 9.25, "order": "asc"}]
    jsonschema.validate(doc, SCHEMA)
    assert gradescope_schema.validate(doc) == []
    assert "leaderboard" not in results.gradescope_json(report_of(result, "carol"))
    # course staff opted in (`gradescope build --leaderboard`): held-out figures too, rounded
    opted = results.gradescope_json(report_of(result, "bob"), held_out_leaderboard=True)
    assert opted["leaderboard"] == [{"name": "perplexity", "value": 9.25, "order": "asc"},
                                    {"name": "held-out perplexity", "value": 18.5, "order": "asc"}]
    assert gradescope_schema.validate(opted) == [] and "leaderboard" not in results.gradescope_json(
        report_of(result, "carol"), held_out_leaderboard=True)  # a failed (pasted) model: no entry either way


@pytest.mark.parametrize("board_doc, valid", [
    ([{"name": "perplexity", "value": 9.25, "order": "asc"}, {"name": "accuracy", "value": 0.9}], True),
    ([{"name": "Stars", "value": "*****"}], True),  # Gradescope's own example: a text value
    ([{"name": "perplexity"}], False),
    ([{"name": "perplexity", "value": 1, "order": "up"}], False),
    ([{"name": "perplexity", "value": 1, "rank": 3}], False),
    ({"name": "perplexity", "value": 1}, False),
])
def test_the_schema_checks_the_leaderboard(board_doc, valid):
    doc = {"score": 1.0, "tests": [], "leaderboard": board_doc}
    assert (gradescope_schema.validate(doc) == []) == valid  # what run_autograder checks before it hands the file over
    if valid:
        jsonschema.validate(doc, SCHEMA)
    else:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, SCHEMA)


# ---- leaderboard.csv ---------------------------------------------------------------------------------
def test_leaderboard_csv_ranks_each_metric(graded):
    _, out, _ = graded
    with open(out / "leaderboard.csv", newline="") as f:
        rows = [tuple(row.values()) for row in csv.DictReader(f)]
    assert rows == [  # metrics by name; ties share a rank and are listed by key
        ("held-out perplexity", "asc", "1", "bob", "18.5", "yes"),
        ("held-out perplexity", "asc", "2", "alice", "25.0", "yes"),
        ("held-out perplexity", "asc", "2", "erin", "25.0", "yes"),
        ("held-out perplexity", "asc", "4", "frank", "300.0", "yes"),
        ("perplexity", "asc", "1", "bob", "9.25", "no"),
        ("perplexity", "asc", "2", "alice", "12.5", "no"),
        ("perplexity", "asc", "2", "erin", "12.5", "no"),
        ("perplexity", "asc", "4", "frank", "150.0", "no"),
    ]


def test_ranks_follow_the_order():
    from autograder.grading.report import ranked
    entry = lambda v: [{"name": "accuracy", "value": v, "order": "desc", "held_out": False}]  # noqa: E731
    rows = ranked([("b", entry(0.5)), ("a", entry(0.9)), ("c", entry(0.5)), ("d", [])])
    assert [(r["rank"], r["student"]) for r in rows] == [(1, "a"), (2, "b"), (2, "c")]


def test_merged_shards_write_the_same_leaderboard_and_report(tmp_path, board, graded):
    subs, single, _ = graded
    out = tmp_path / "out"
    for k in range(3):
        batch.run([subs], board, out, limits=FAST, progress=False, shard=(k, 3))
    assert not (out / "leaderboard.csv").exists()  # a shard writes only its records and manifest
    merged = shard.merge([out], assignment=board)
    assert merged.merged == 3 and merged.errors == []
    for name in ("leaderboard.csv", "report.html", "grades.csv"):
        assert (out / name).read_bytes() == (single / name).read_bytes(), name
