"""The engine believes nothing the worker says: attacks on its own code in the worker gain nothing.

A graded cell can replace anything in the student's process, the engine's worker code included
(`Worker.op_vjp`, `Worker.op_device`, `wire.encode`, `Worker.send`) and can return tensors that
lie about their device and dtype. Each attack here runs in a real `Sandbox`; the grader's
primitives must decide exactly as they would for the same code without the attack (the attack
gains nothing). Also here: replies that would balloon the grader's memory, reference results that
a worker able to write the cache cannot change, and feedback that blames the function that is wrong.
"""
import inspect
import json
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder.authoring.assignments import Assignment
from autograder.checking import reference_results
from autograder.checking.compare import assert_close
from autograder.checking.remote import Student, StudentCrash
from autograder.checking.torch_checks import assert_device_agnostic, assert_on_device, assert_param_grads, gradcheck
from autograder.errors import CheckFailed
from autograder.grading import runner
from autograder.sandbox import wire
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits

LIMITS = Limits(call_timeout=20, load_timeout=20)

CODE = '''
import torch

def cube(x):
    return x ** 3

def cube2(x):
    return x ** 3

def cut_cube(x):  # forward right, graph cut: autograd sees only the `0 * x` term
    return x.detach() ** 3 + 0 * x

def fixed_device(x):  # works on the CPU, breaks on a GPU
    return x + torch.zeros(x.shape)

def float32_out(x):  # hard-coded dtype
    return torch.zeros(x.shape) + x.float()

def half_softmax(x):  # computed in float16
    return torch.softmax(x.half(), -1)

def almost(x):  # wrong by 2e-4 relative: inside float16's tolerance, far outside float64's
    return x * 1.0002

class Scale(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, n))

    def forward(self, x):
        return torch.tanh(x * self.w)

class CutScale(Scale):  # the parameter's gradient is cut
    def forward(self, x):
        return torch.tanh(x * self.w.detach()) + 0 * self.w
'''

# Replaces the worker's vjp: gradients fabricated to agree with finite differences along the
# direction of the last forward calls it saw (enough to fool a check that perturbs first and asks
# for the vjp after), and a vjp "output" that is not the forward's.
FAKE_VJP = '''
import sys
import torch
_W = sys.modules["autograder.sandbox.worker"].Worker
_real_call, _real_vjp = _W.op_call, _W.op_vjp
_seen = []

def _spy_call(self, msg, arrays):
    args = self.decode(msg.get("args", []), arrays)
    if args and isinstance(args[0], torch.Tensor):
        _seen.append(args[0].detach().clone())
    return _real_call(self, msg, arrays)

def _fake_vjp(self, msg, arrays):
    if msg["target"].get("name") == "cube2":  # right gradients, an output that is not the forward's
        got = _real_vjp(self, msg, arrays)
        got["output"] = got["output"] + 1.0
        return got
    fn = self.target(msg["target"])
    args = list(self.decode(msg["args"], arrays))
    u = self.decode(msg["cotangent"], arrays)
    grads = []
    for i in msg.get("wrt", []):
        x = args[i].detach()
        others = [s for s in _seen if s.shape == x.shape and not torch.equal(s, x)]
        if others:
            v = others[-1] - x
            eps = 1e-6
            plus = list(args); plus[i] = x + eps * v / v.norm()
            minus = list(args); minus[i] = x - eps * v / v.norm()
            slope = float(((fn(*plus) - fn(*minus)) * u).sum()) / (2 * eps)
            grads.append(slope * v / v.norm())
        else:
            grads.append(u.clone() if u.shape == x.shape else torch.full_like(x, float(u.mean())))
    params = {n: torch.ones_like(p) for n, p in fn.named_parameters()} if isinstance(fn, torch.nn.Module) else {}
    out = fn(*args)
    return {"output": out, "input_grads": grads, "param_grads": params}

_W.op_call, _W.op_vjp = _spy_call, _fake_vjp
'''

FAKE_DEVICE = '''
import sys
_W = sys.modules["autograder.sandbox.worker"].Worker
_wire = sys.modules["autograder.sandbox.wire"]
_real_device, _real_encode = _W.op_device, _wire.encode

def _fake_device(self, msg, arrays):  # "it ran on the device": every run is really on the CPU
    return _real_device(self, dict(msg, simulated=False), arrays)

def _fake_encode(value, arrays, *, make_handle=None, depth=0):  # and every tensor says it is on the device
    tree = _real_encode(value, arrays, make_handle=make_handle, depth=depth)
    if isinstance(tree, dict) and "__tensor__" in tree:
        tree["device"] = "accel:0"
    return tree

_W.op_device, _wire.encode = _fake_device, _fake_encode
'''

# The encoder sends float16 results as float64 (to look precise) and everything else as float16
# (to claim float16's loose tolerance).
FAKE_ENCODE = '''
import sys
import torch
_wire = sys.modules["autograder.sandbox.wire"]
_real_encode = _wire.encode

def _fake_encode(value, arrays, *, make_handle=None, depth=0):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        value = value.detach().double() if value.dtype == torch.float16 else value.detach().half()
    return _real_encode(value, arrays, make_handle=make_handle, depth=depth)

_wire.encode = _fake_encode
'''

LIAR = '''
import torch

class Liar(torch.Tensor):  # says float64 on the grading device, holds float32
    @property
    def dtype(self):
        return torch.float64

    @property
    def device(self):
        return torch.device("cpu")

def lying_almost(x):
    return (x * 1.0002).half().as_subclass(Liar)

def lying_cube(x):
    return (x.float() ** 3).as_subclass(Liar)
'''


def student_box(*sources: str) -> Sandbox:
    cells = [{"index": i, "number": i + 1, "source": textwrap.dedent(s)} for i, s in enumerate((CODE,) + sources)]
    return Sandbox(cells, import_torch=True, limits=LIMITS)


def x64(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def outcome(fn) -> str:
    """'pass' or the start of the failure: what a check would conclude."""
    try:
        fn()
    except CheckFailed as exc:
        return f"fail: {str(exc)[:60]}"
    return "pass"


def gradient_outcomes(student) -> dict:
    ref = Scale(4).double()
    return {
        "cube": outcome(lambda: gradcheck(student.cube, [x64(3, 4)], [0], "cube")),
        "cut_cube": outcome(lambda: gradcheck(student.cut_cube, [x64(3, 4)], [0], "cut_cube")),
        "Scale": outcome(lambda: assert_param_grads(_module(student.Scale), ref, [x64(2, 4)], "Scale",
                                                     rng=np.random.default_rng(0))),
        "CutScale": outcome(lambda: assert_param_grads(_module(student.CutScale), ref, [x64(2, 4)], "CutScale",
                                                        rng=np.random.default_rng(0))),
    }


class Scale(torch.nn.Module):  # the trusted reference of the student's Scale
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, n))

    def forward(self, x):
        return torch.tanh(x * self.w)


def _module(cls):
    module = cls(4)
    module.double()
    return module


@pytest.fixture(scope="module")
def honest_box():
    with student_box(LIAR) as box:
        yield box


@pytest.fixture(scope="module")
def honest(honest_box):
    """What the grader concludes about the same code without any attack."""
    student = Student(honest_box, timeout=20)
    return {"gradients": gradient_outcomes(student),
            "meta": outcome(lambda: assert_device_agnostic(student.fixed_device, [x64(2, 3)], "fixed_device")),
            "dtype": outcome(lambda: assert_device_agnostic(student.float32_out, [x64(2, 3)], "float32_out"))}


def test_honest_code_is_judged_as_expected(honest):
    assert honest["gradients"]["cube"] == "pass" and honest["gradients"]["Scale"] == "pass"
    assert honest["gradients"]["cut_cube"].startswith("fail")
    assert honest["gradients"]["CutScale"].startswith("fail")
    assert honest["meta"].startswith("fail") and honest["dtype"].startswith("fail")


def test_a_replaced_op_vjp_gains_nothing(honest):
    with student_box(FAKE_VJP) as box:
        student = Student(box, timeout=20)
        got = gradient_outcomes(student)
        with pytest.raises(CheckFailed, match="plain call"):
            gradcheck(student.cube2, [x64(3, 4)], [0], "cube2")
    assert all(v.startswith("fail") for v in got.values()), got  # fabricated gradients never pass
    gains = [k for k, v in got.items() if v == "pass" and honest["gradients"][k] != "pass"]
    assert gains == []


def test_a_replaced_device_op_earns_only_a_note(honest):
    with student_box(FAKE_DEVICE) as box:
        student = Student(box, timeout=20)
        note = assert_device_agnostic(student.fixed_device, [x64(2, 3)], "fixed_device")
        # what only the worker can see is a note, never a basis for points
        assert "not verified, not scored" in note
        # a hard-coded dtype is seen by the grader itself in the real call's output: still fails
        assert outcome(lambda: assert_device_agnostic(student.float32_out, [x64(2, 3)], "float32_out")) == honest["dtype"]
        assert "not scored" in assert_device_agnostic(student.cube, [x64(2, 3)], "cube")  # honest code: a note too


def test_a_replaced_encoder_or_a_lying_tensor_loosens_no_tolerance(honest_box):
    x = x64(4, 6)
    student = Student(honest_box, timeout=20)
    for name, expected in (("half_softmax", torch.softmax(x, -1)), ("almost", x)):  # without the attack
        with pytest.raises(CheckFailed, match="differ"):
            assert_close(getattr(student, name)(x), expected, name)
    lying = student.lying_almost(x)
    assert lying.dtype == torch.float16  # the dtype is the data's, not the tensor's claim
    with pytest.raises(CheckFailed, match="rtol=1e-07"):
        assert_close(lying, x, "lying_almost")
    with pytest.raises(CheckFailed, match="float32"):  # the grader sees float32 data, whatever was claimed
        gradcheck(student.lying_cube, [x], [0], "lying_cube")
    with student_box(FAKE_ENCODE) as box:
        student = Student(box, timeout=20)
        upcast = student.half_softmax(x)
        assert upcast.dtype == torch.float64  # the encoder's upcast worked on the wire ...
        with pytest.raises(CheckFailed, match="differ"):  # ... and bought nothing: float16 values fail float64
            assert_close(upcast, torch.softmax(x, -1), "half_softmax")
        downcast = student.almost(x)
        assert downcast.dtype == torch.float16  # sent as float16 ...
        with pytest.raises(CheckFailed, match="rtol=1e-07"):  # ... judged at the expected float64's tolerance
            assert_close(downcast, x, "almost")


def test_a_device_claim_only_fails_or_notes():
    t = torch.zeros(2)
    t.lmgrade_device = "cuda:0"
    with pytest.raises(CheckFailed, match="came back on cuda"):
        assert_on_device(t, "cpu", "f")  # self-incriminating: believed
    t.lmgrade_device = "cpu"
    assert "not verified" in assert_on_device(t, "cpu", "f")


# ---- replies that balloon ------------------------------------------------------------------
HUGE_REPLY = '''
import os, struct, sys
_W = sys.modules["autograder.sandbox.worker"].Worker
_real_send = _W.send

def _send(self, message, arrays):
    if message.get("value") == "HUGE":  # 15 MB of "[],": 5 million lists in json.loads
        body = b'{"event": "done", "output": "", "value": [' + b"[]," * 5_000_000 + b"[]]}"
    elif message.get("value") == "BOMB":  # a deflated npz member declaring 100 MB of zeros
        import io, zipfile, numpy as np
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            with z.open("arr_0.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (12_500_000,)})
                for _ in range(10):
                    f.write(bytes(10_000_000))
        blob = buf.getvalue()
        body = b'{"event": "done", "output": "", "value": {"__array__": 0, "scalar": false}}'
        data = struct.pack(">QQ", len(body), len(blob)) + body + blob
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]
        return
    else:
        return _real_send(self, message, arrays)
    data = struct.pack(">QQ", len(body), 0) + body
    view = memoryview(data)
    while view:
        view = view[os.write(self.wfd, view):]

_W.send = _send

def huge():
    return "HUGE"

def small():
    return 8.0

def bomb():
    return "BOMB"
'''


def test_a_ballooning_reply_is_refused_before_it_is_built():
    with Sandbox([{"index": 0, "number": 1, "source": HUGE_REPLY}], limits=LIMITS) as box:
        student = Student(box, timeout=20)
        for name in ("huge", "bomb"):
            tracemalloc.start()
            try:
                with pytest.raises(StudentCrash) as info:
                    getattr(student, name)()
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert "the reply was too large" in str(info.value)
            # the bytes read (15 MB, or 0.1 MB compressed), never the 100-300 MB they would become
            assert peak < 50 << 20, f"{name}: peak {peak >> 20} MiB"
        assert student.small() == 8.0  # the restarted worker answers


def test_array_element_bound(monkeypatch):
    monkeypatch.setattr(wire, "MAX_REPLY_ARRAY_ELEMENTS", 1000)
    arrays = [np.zeros(600), np.zeros(600)]
    data = wire.pack({"value": 1}, arrays)
    n_json, _ = wire.header_lengths(data[:wire.HEADER_SIZE])
    body, blob = data[wire.HEADER_SIZE:wire.HEADER_SIZE + n_json], data[wire.HEADER_SIZE + n_json:]
    with pytest.raises(wire.WireError, match="too large"):
        wire.unpack(body, blob)
    assert len(wire.unpack(body, blob, bounded=False)[1]) == 2  # the worker reading the grader's requests


# ---- a toy assignment: cached thresholds and blame ---------------------------------------------
TOY_CHECKS = '''
from autograder.checking.checks import check
from autograder.errors import CheckFailed


@check(1, 1, "double(3) is 6", uses=("double",))
def doubles(t):
    if t.student.double(3) != 6:
        raise CheckFailed("double(3) should be 6")


@check(2, 1, "score() stays under the reference's limit", uses=("score",), needs=("double",))
def under_limit(t):
    limit = t.cached("limit", lambda: t.ref.limit())
    got = t.student.score()
    if not got <= limit:
        raise CheckFailed(f"score() = {got} is above the limit {limit}")
'''

FORGER = '''
import glob, json, os

def double(x):
    return 2 * x

def score():
    for path in glob.glob(os.path.join({folder!r}, "*.json")):  # the grader's cache, writable here
        with open(path, "w") as f:
            json.dump(1e9, f)
    return 50.0
'''


def toy_assignment(root: Path) -> Assignment:
    folder = root / "assignments" / "toy"
    folder.mkdir(parents=True)
    (folder / "meta.toml").write_text('title = "toy"\n[questions]\n1 = "double"\n2 = "score"\n')
    (folder / "public_checks.py").write_text("")
    (folder / "hidden_checks.py").write_text(TOY_CHECKS)
    (root / "solutions").mkdir()
    (root / "solutions" / "toy.py").write_text("def double(x):\n    return 2 * x\n\n\ndef limit():\n    return 10.0\n")
    return Assignment("toy", root)


@pytest.mark.usefixtures("policy_off")
def test_a_worker_writing_the_cache_changes_no_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(reference_results, "_REFERENCE_RESULTS", {})  # a fresh grader process
    cache = tmp_path / "cache"
    monkeypatch.setenv("LMGRADE_CACHE", str(cache))
    toy = toy_assignment(tmp_path / "root")
    unconfined = Limits(call_timeout=10, load_timeout=10, confine=False)  # the worker can write the cache
    honest = tmp_path / "honest.py"
    honest.write_text("def double(x):\n    return x + x\n\n\ndef score():\n    return 5.0\n")
    forger = tmp_path / "forger.py"
    forger.write_text(FORGER.format(folder=str(cache / "reference")))
    assert runner.grade(honest, toy, limits=unconfined).score == 2.0  # computes the limit, writes the file
    (written,) = (cache / "reference").glob("*.json")
    assert json.loads(written.read_text()) == 10.0
    report = runner.grade(forger, toy, limits=unconfined)
    # a root grader's worker has a uid of its own and cannot write root's cache at all; where one could
    # (the same uid), the file is what it wrote: forge it here to stand for that worker
    assert json.loads(written.read_text()) in (10.0, 1e9)
    assert report.score == 1.0 and "above the limit 10.0" in report.results[1].output  # it gained nothing
    written.write_text(json.dumps(1e9))
    report = runner.grade(forger, toy, limits=unconfined)
    assert report.score == 1.0 and "above the limit 10.0" in report.results[1].output  # nor from a forged file
    assert runner.grade(honest, toy, limits=unconfined).score == 2.0  # nor did the next student lose


def test_a_check_that_needs_a_failing_function_blames_it(tmp_path, monkeypatch):
    monkeypatch.setattr(reference_results, "_REFERENCE_RESULTS", {})
    monkeypatch.setenv("LMGRADE_CACHE", str(tmp_path / "cache"))
    toy = toy_assignment(tmp_path / "root")
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def double(x):\n    return x * x\n\n\ndef score():\n    return 50.0\n")
    report = runner.grade(wrong, toy, limits=LIMITS)
    assert [r.passed for r in report.results] == [False, False]
    assert "`double` (Q1) fails its own checks; fix it first." in report.results[1].output
    assert "fix it first" not in report.results[0].output
    right = tmp_path / "right.py"
    right.write_text("def double(x):\n    return x * 2\n\n\ndef score():\n    return 50.0\n")
    report = runner.grade(right, toy, limits=LIMITS)
    assert [r.passed for r in report.results] == [True, False]
    assert "fix it first" not in report.results[1].output  # Q2 is wrong on its own


# ---- the same attack on a real assignment ------------------------------------------------------
CUT_MHA = '''

_lmgrade_forward = MultiHeadAttention.forward


def _no_grad_forward(self, *args, **kwargs):  # right values, no graph
    with torch.no_grad():
        return _lmgrade_forward(self, *args, **kwargs)


MultiHeadAttention.forward = _no_grad_forward
'''


@pytest.mark.usefixtures("policy_off")
def test_a_replaced_op_vjp_gains_nothing_in_the_attention_assignment(tmp_path):
    from autograder.authoring import assignments
    from tests.helpers import solution_text

    attention = assignments.get("attention")
    scores = {}
    for name, extra in (("honest", CUT_MHA), ("attack", CUT_MHA + FAKE_VJP)):
        path = tmp_path / f"{name}.py"
        path.write_text(solution_text("attention") + extra)
        report = runner.grade(path, attention, questions={"4"}, limits=LIMITS)
        scores[name] = {r.name: r.passed for r in report.results}
        outputs = {r.name: r.output for r in report.results}
    assert scores["honest"]["mha_gradients"] is False  # the cut graph is caught ...
    assert scores["attack"]["mha_gradients"] is False  # ... and fabricated gradients do not hide it
    # the fabricated gradients were checked, and failed: against central differences of the forward, or (the
    # matrix's `extremes`, which run first) against the reference's gradients
    out = outputs["mha_gradients"]
    assert "finite differences" in out or ("property `extremes`" in out and "the gradient w.r.t." in out), out
    assert sum(scores["attack"].values()) <= sum(scores["honest"].values())


def test_blame_names_only_functions_that_fail_on_their_own():
    """A check of two functions that fails blames neither when each passes its own check."""
    from autograder.checking.checks import CheckSpec

    def spec(name, question, uses, needs=()):
        return CheckSpec(name=name, question=question, points=1, title=name, uses=uses, needs=needs)

    def result(s, passed):
        return runner.CheckResult(s.name, s.question, s.title, 0, 1, passed, "x", False)

    specs = [spec("softmax_alone", "1", ("softmax",)), spec("loss_alone", "1", ("loss",)),
             spec("both", "1", ("softmax", "loss")), spec("later", "2", ("train",), needs=("softmax", "loss"))]
    results = [result(specs[0], True), result(specs[1], False), result(specs[2], False), result(specs[3], False)]
    runner._blame_earlier_functions(results, specs, specs)
    assert "`loss` (Q1) fails its own checks" in results[3].output
    assert "`softmax`" not in results[3].output


def test_blame_in_a_one_question_run_names_no_function_whose_own_checks_did_not_run():
    """Grading only Q2: a failing check of several functions there says nothing of a Q1 function."""
    from autograder.checking.checks import CheckSpec

    def spec(name, question, uses, needs=()):
        return CheckSpec(name=name, question=question, points=1, title=name, uses=uses, needs=needs)

    everything = [spec("norm_alone", "1", ("norm",)), spec("model", "2", ("norm", "model")),
                  spec("train", "2", ("train",), needs=("norm", "model"))]
    ran = everything[1:]
    results = [runner.CheckResult(s.name, s.question, s.title, 0, 1, False, "x", False) for s in ran]
    runner._blame_earlier_functions(results, ran, everything)
    assert "`norm`" not in results[1].output and "`model` (Q2) fails its own checks" in results[1].output


def test_graded_code_that_reaches_the_engine_is_not_run(tmp_path):
    """Replacing `Worker.op_device` to hide a hard-coded device: the statements that would do it, at load,
    are outside the graded-code subset and are not run, so the probe sees the student's own code."""
    from autograder.authoring import assignments
    from tests.helpers import solution_text
    attention = assignments.get("attention")
    forged = tmp_path / "forged.py"
    forged.write_text(solution_text("attention") + "\n\nimport sys\n" + FAKE_DEVICE.split("import sys", 1)[-1])
    honest = runner.grade(attention.reference_path, attention, questions={"7"}, limits=LIMITS)
    report = runner.grade(forged, attention, questions={"7"}, limits=LIMITS)
    probed = {fn.__name__ for fn in attention.checks() if fn.lmgrade_check.question == "7"
              and "assert_device_agnostic" in inspect.getsource(fn)}
    assert all(r.passed for r in honest.results) and probed
    assert {r.name for r in report.results if r.passed} == {r.name for r in honest.results if r.passed}
    not_run = [note for note in report.notes if note.startswith("Not run: ")]
    shown = [note.split(" (")[0] for note in not_run]
    assert shown[:2] == ["Not run: `import sys`", "Not run: `sys`"] and shown[-1] == "Not run: `_W.op_device`", shown


SEAL_CHECKS = '''
from autograder.checking.checks import check


@check(1, 1, "before the student sees held-out text", uses=("leak",))
def before(t):
    t.student.leak("train words")


@check(1, 1, "after", uses=("leak",))
def after(t):
    t.student.within(5).seal()  # a copy made by within() seals the check's student too
    t.student.leak("HELDOUT words")
'''


def test_after_seal_prints_and_error_messages_stay_out_of_feedback(tmp_path, monkeypatch):
    monkeypatch.setenv("LMGRADE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "root" / "assignments" / "toy"
    folder.mkdir(parents=True)
    (folder / "meta.toml").write_text('title = "toy"\n[questions]\n1 = "leak"\n')
    (folder / "public_checks.py").write_text("")
    (folder / "hidden_checks.py").write_text(SEAL_CHECKS)
    (tmp_path / "root" / "solutions").mkdir()
    (tmp_path / "root" / "solutions" / "toy.py").write_text("")
    leaker = tmp_path / "leaker.py"
    leaker.write_text("def leak(x):\n    print('PRINTED', x)\n    raise RuntimeError('MSG ' + x)\n")
    before, after = runner.grade(leaker, Assignment("toy", tmp_path / "root"), limits=LIMITS).results
    assert "MSG train words" in before.output and "PRINTED train words" in before.output
    assert not after.passed and "HELDOUT" not in after.output and "not shown for this check" in after.output


def test_only_the_first_loads_words_reach_the_notes_shown_at_once(tmp_path):
    """A reload after a restart ran after checks handed the worker inputs: its errors are never shown."""
    from types import SimpleNamespace

    from autograder.sandbox import extract
    path = tmp_path / "submission.py"
    path.write_text("def f(x):\n    return x\n")
    sub = extract.read_submission(path)
    index = sub.cells[0].index
    first = {"index": index, "error": {"type": "ValueError", "message": "from the first load"}}
    reload = {"index": index, "error": {"type": "ValueError", "message": "HIDDEN input seen by a call"}}
    box = SimpleNamespace(first_load=({}, [first]), skip={index: "timeout"}, cell_errors=[reload])
    notes = "\n".join(runner._load_notes(sub, box))
    assert "from the first load" in notes and "HIDDEN" not in notes and "skipped" not in notes
    assert "HIDDEN" not in runner._explain_missing("g", sub, box)
