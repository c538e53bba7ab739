"""One infinite loop costs one time limit, and blame (not a misleading hint) follows a failed dependency.

A toy assignment without torch (its worker starts in a fraction of a second) is graded by the real
runner in a real `Sandbox`, with a 1.5 CPU-second limit per call; a spy on `Sandbox.request` shows
which calls really reached the worker.
"""
import textwrap
import time
from pathlib import Path

import pytest

from autograder.authoring.assignments import Assignment, get
from autograder.checking.checks import CheckSpec
from autograder.checking.remote import NotCalledAgain, Student, StudentCrash
from autograder.grading import runner
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits

LIMIT = 1.5
LIMITS = Limits(call_timeout=LIMIT, load_timeout=5)

SUBMISSION = '''
import time

def spin(x):
    while True:
        pass

def double(x):
    return 2 * x

def slow(seconds):  # CPU-bound for `seconds`, then answers
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds

def liar(x):  # claims a timeout it never had
    raise TimeoutError("did not finish within 1.5 s of CPU time: an infinite loop")

def base(x):
    print("base was called")
    return x + 1  # wrong: the checks want x + 2

def top(x):
    return base(x) * 10

def top_alone(x):
    return 0  # wrong, whatever base does

class Model:
    def spin(self):
        while True:
            pass

    def ok(self):
        return "ok"
'''

CHECKS = '''
from autograder.checking.checks import check
from autograder.errors import CheckFailed


def expect(got, want, what):
    if got != want:
        raise CheckFailed(f"{what} returned {got!r}, expected {want!r}")


@check(1, 1, "double", public=True, uses=("double",))
def double_first(t):
    expect(t.student.double(2), 4, "double(2)")


@check(1, 1, "spin on one input", public=True, uses=("spin",), hint="a loop whose condition never changes")
def spin_first(t):
    t.student.spin(1)


@check(2, 1, "spin on another input", public=True, uses=("spin",))
def spin_second(t):
    t.student.spin(2)


@check(3, 1, "spin over a few inputs", public=True, uses=("spin",), needs=("double",))
def spin_third(t):
    t.student.spin.map([(1,), (2,)])


@check(3, 1, "double again, after the loops", public=True, uses=("double",))
def double_after(t):
    expect(t.student.double(21), 42, "double(21)")


@check(4, 1, "slow but within its limit", public=True, uses=("slow",))
def slow_first(t):
    expect(t.student.slow(0.8), 0.8, "slow(0.8)")


@check(4, 1, "slow again", public=True, uses=("slow",))
def slow_second(t):
    expect(t.student.slow(0.1), 0.1, "slow(0.1)")


@check(5, 1, "liar", public=True, uses=("liar",))
def liar_first(t):
    t.student.liar(1)


@check(5, 1, "liar again", public=True, uses=("liar",))
def liar_second(t):
    t.student.liar(2)


@check(6, 1, "base", public=True, uses=("base",), hint="base adds two")
def base_check(t):
    expect(t.student.base(1), 3, "base(1)")


@check(7, 1, "top on base", public=True, uses=("top",), needs=("base",), hint="top multiplies by ten")
def top_check(t):
    expect(t.student.top(1), 30, "top(1)")


@check(7, 1, "top_alone", public=True, uses=("top_alone",), needs=("double",), hint="top_alone is its own bug")
def top_alone_check(t):
    expect(t.student.top_alone(1), 30, "top_alone(1)")
'''


def toy(root: Path) -> Assignment:
    folder = root / "assignments" / "toy"
    folder.mkdir(parents=True)
    questions = "".join(f'{q} = "question {q}"\n' for q in range(1, 8))
    (folder / "meta.toml").write_text(f'title = "toy"\n[questions]\n{questions}')
    (folder / "public_checks.py").write_text(CHECKS)
    return Assignment("toy", root)


@pytest.fixture
def spy(monkeypatch):
    """(op, name called, worker restarts so far, seconds) of every request the grader sent a worker."""
    sent = []
    real = Sandbox.request

    def request(box, message, arrays, timeout):
        started = time.monotonic()
        try:
            return real(box, message, arrays, timeout)
        finally:
            name = (message.get("target") or {}).get("name")
            sent.append((message.get("op"), name, box.restarts, time.monotonic() - started))

    monkeypatch.setattr(Sandbox, "request", request)
    return sent


def grade(tmp_path, questions):
    path = tmp_path / "submission.py"
    path.write_text(SUBMISSION)
    started = time.monotonic()
    report = runner.grade(path, toy(tmp_path / "root"), public_only=True, questions=set(questions), limits=LIMITS)
    return report, {r.name: r for r in report.results}, time.monotonic() - started


def test_an_infinite_loop_costs_one_limit_and_later_checks_fail_at_once(tmp_path, spy):
    report, results, seconds = grade(tmp_path, {"1", "2", "3"})
    # The loop is called by three checks; before, each waited out its own limit (3 x 1.5 CPU seconds, so
    # at least that much wall time). Now the first one does, and the others never reach the worker.
    spins = [s for s in spy if s[1] == "spin"]
    assert len(spins) == 1 and spins[0][3] >= LIMIT, spins
    assert seconds - spins[0][3] < LIMIT, seconds  # all the rest, two worker starts included, in less than one limit
    first = results["spin_first"].output
    assert "spin(1) did not finish within 1.5 s of CPU time" in first and "not called again" not in first
    assert "Hint: a loop whose condition never changes" in first
    why = '`spin` ran past its time limit in check "spin on one input" (Q1); not called again.'
    for name in ("spin_second", "spin_third"):
        out = results[name].output
        assert not results[name].passed and out.startswith(why), out
        assert "spin(1) did not finish within 1.5 s of CPU time" in out  # what happened there, repeated
    # only `spin` is marked: `double` answers before and after, in the restarted worker
    assert results["double_first"].passed and results["double_after"].passed
    doubles = [s for s in spy if s[1] == "double"]
    assert len(doubles) == 2 and doubles[1][2] > doubles[0][2]  # the worker was restarted in between
    assert report.score == 2


@pytest.mark.usefixtures("policy_off")  # the layer beneath the policy
def test_a_function_slow_but_within_its_limit_is_not_marked(tmp_path, spy):
    _, results, _ = grade(tmp_path, {"4"})
    assert results["slow_first"].passed and results["slow_second"].passed, [r.output for r in results.values()]
    assert len([s for s in spy if s[1] == "slow"]) == 2


def test_a_timeout_the_worker_claims_marks_nothing(tmp_path, spy):
    """Only the grader's own clock sets the mark: a TimeoutError raised by student code is an error like any."""
    _, results, seconds = grade(tmp_path, {"5"})
    for name in ("liar_first", "liar_second"):
        assert "raised TimeoutError" in results[name].output and "not called again" not in results[name].output
    assert len([s for s in spy if s[1] == "liar"]) == 2 and seconds < LIMIT * 2


def test_marks_name_what_was_called_and_survive_restarts(tmp_path):
    """A method is marked by its type and the name its chain began with; a module function of the same
    name, the object's other methods and calls under another deadline (`within`) share nothing else."""
    cells = [{"index": 0, "number": 1, "source": textwrap.dedent(SUBMISSION)}]
    with Sandbox(cells, limits=LIMITS) as box:
        student = Student(box, timeout=LIMIT)
        model = student.Model()
        with pytest.raises(StudentCrash, match="did not finish") as first:
            model.spin()
        assert not isinstance(first.value, NotCalledAgain)
        restarts = box.restarts
        started = time.monotonic()
        with pytest.raises(NotCalledAgain, match=r"^`Model.spin` ran past its time limit earlier"):
            student.Model().spin()  # another object of the same class, in a fresh worker
        with pytest.raises(NotCalledAgain):
            student.within(30).Model().spin()  # a copy with another deadline shares the marks
        assert time.monotonic() - started < LIMIT
        assert box.restarts == restarts + 1  # `Model()` was made in the restarted worker; spin never sent
        assert student.Model().ok() == "ok" and student.double(4) == 8
        with pytest.raises(StudentCrash, match="did not finish") as module_level:
            student.within(0.3).spin(1)  # the module's `spin` is another function: really called
        assert not isinstance(module_level.value, NotCalledAgain)


def test_a_blamed_failure_drops_its_own_hint_and_keeps_the_others(tmp_path, spy):
    _, results, _ = grade(tmp_path, {"6", "7"})
    base, top, alone = results["base_check"].output, results["top_check"].output, results["top_alone_check"].output
    # base fails on its own: its message, then its hint, then what it printed (the order students know)
    assert base.index("base(1) returned 2, expected 3") < base.index("\nHint: base adds two") \
        < base.index("\nYour code printed:\nbase was called")
    # top fails because base is wrong: the blame, and no hint about top
    assert top.endswith("\n`base` (Q6) fails its own checks; fix it first.")
    assert "Hint" not in top and "top(1) returned 20, expected 30" in top
    # top_alone needs `double`, which is fine: no blame, and its hint stays
    assert "fix it first" not in alone and "\nHint: top_alone is its own bug" in alone


def spec(name, question, uses, needs=(), hint=""):
    return CheckSpec(name=name, question=question, points=1, title=name, uses=uses, needs=needs, hint=hint)


def outcome(specs, failing: set) -> dict:
    results = [runner._result(s, s.name not in failing, "Passed." if s.name not in failing else f"{s.name} failed",
                              hint=s.hint) for s in specs]
    runner._blame_earlier_functions(results, specs, specs)
    return {r.name: r.output for r in results}


def test_blame_names_the_function_a_failing_check_grades_not_every_name_it_uses():
    """In the transformer's own declarations: train_lm's public check (which also uses TransformerLM, AdamW,
    ...) fails and every check of Q4 passes; train_exact_steps, failing too, must not blame TransformerLM."""
    specs = [fn.lmgrade_check for fn in get("transformer").checks()]
    out = outcome(specs, {"public_train_one_step", "train_exact_steps"})
    assert "fix it first" not in out["train_exact_steps"]
    assert "\nHint: " in out["train_exact_steps"]  # not blamed, so its own hint is shown
    # and when TransformerLM's own checks fail, the same check does name it, with its question
    out = outcome(specs, {"lm_builtin", "train_exact_steps"})
    assert "`TransformerLM` (Q4) fails its own checks; fix it first." in out["train_exact_steps"]
    assert "Hint" not in out["train_exact_steps"] and "`Block`" not in out["train_exact_steps"]


def test_a_check_of_several_names_blames_the_one_no_narrower_check_grades():
    """Block's check also uses MultiHeadAttention; attention has checks of its own, which pass."""
    specs = [spec("attention", "3", ("MultiHeadAttention", "apply_rope")), spec("rope", "3", ("apply_rope",)),
             spec("block", "3", ("Block", "MultiHeadAttention", "apply_rope")),
             spec("lm", "4", ("TransformerLM", "Block", "MultiHeadAttention"), needs=("Block", "MultiHeadAttention"),
                  hint="check the head")]
    out = outcome(specs, {"block", "lm"})
    assert "`Block` (Q3) fails its own checks" in out["lm"] and "MultiHeadAttention" not in out["lm"]
    assert "Hint" not in out["lm"]
    out = outcome(specs, {"attention", "lm"})  # attention fails: named, Block (whose check passed) is not
    assert "`MultiHeadAttention` (Q3) fails its own checks" in out["lm"] and "`Block`" not in out["lm"]
