"""The worker under limits: hostile or broken student code costs only its own call.

Every test starts a tiny worker with short deadlines. Student code is written inline as the
source of graded cells; calls go through `Student`, exactly as checks make them.
"""
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from autograder.checking.remote import MissingName, Remote, Student, StudentCrash, StudentError
from autograder.grading import runner
from autograder.sandbox import extract
from autograder.sandbox.lifecycle import Sandbox, WorkerFailure
from autograder.sandbox.limits import Limits
from tests.helpers import machine_pid

FAST = Limits(call_timeout=2, load_timeout=5)


def cells_of(*sources: str) -> list[dict]:
    return [{"index": i, "number": i + 1, "source": textwrap.dedent(s)} for i, s in enumerate(sources)]


def open_box(*sources: str, limits: Limits = FAST, **kwargs) -> tuple[Sandbox, Student]:
    box = Sandbox(cells_of(*sources), limits=limits, **kwargs)
    return box, Student(box, timeout=limits.call_timeout)


@pytest.fixture
def sandbox():
    """open_box, closed at the end of the test whatever happens."""
    boxes = []

    def make(*sources, **kwargs):
        box, student = open_box(*sources, **kwargs)
        boxes.append(box)
        return box, student

    yield make
    for box in boxes:
        box.close()


def session_members(sid: int) -> list[tuple[int, str]]:
    """(pid, state) of every live (non-zombie) process whose session id is `sid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        state, session = fields[0], int(fields[3])
        if session == sid and state not in ("Z", "X"):
            found.append((int(entry.name), state))
    return found


def wait_until_gone(sid: int, seconds: float = 5.0) -> list:
    deadline = time.monotonic() + seconds
    while (left := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


COMMON = """
import os, sys, signal, time
import numpy as np

def ok(x=1):
    return x + 1

def worker_pid():  # who it is: its PID namespace, its pid there (tests.helpers.machine_pid finds it here), its start
    return os.readlink("/proc/self/ns/pid"), os.getpid(), open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]

def loop():
    while True:
        pass
"""


# ---- timeouts and deaths cost only their own call -------------------------------------------
def test_infinite_loop_costs_only_its_call(sandbox):
    box, student = sandbox(COMMON)
    first = student.worker_pid()
    first_here = machine_pid(first)
    started = time.monotonic()
    with pytest.raises(StudentCrash) as info:
        student.loop()
    # 2 CPU seconds: on a loaded machine that takes longer, but never past the wall-clock backstop
    assert time.monotonic() - started < FAST.wall_limit(FAST.call_timeout) + 3
    assert "did not finish within 2 s" in str(info.value) and "loop()" in str(info.value)
    assert student.ok(41) == 42  # restarted automatically, submission reloaded
    assert student.worker_pid() != first
    assert first_here is not None and session_members(first_here) == []  # the old worker is gone


def test_within_sets_a_per_call_deadline(sandbox):
    box, student = sandbox(COMMON)
    with pytest.raises(StudentCrash, match="within 0.5 s"):
        student.within(0.5).loop()
    assert student.within(5).ok(1) == 2


@pytest.mark.parametrize("body", ["os._exit(3)", "os.kill(os.getpid(), signal.SIGKILL)", "signal.raise_signal(signal.SIGSEGV)"])
def test_process_ending_calls_are_reported_and_the_worker_restarts(sandbox, body):
    box, student = sandbox(COMMON + f"\ndef die():\n    {body}\n")
    first = student.worker_pid()
    with pytest.raises(StudentCrash) as info:
        student.die()
    message = str(info.value)
    assert "die() ended the student's process" in message
    if "_exit" in body:
        assert "exited with code 3" in message
    elif "SIGKILL" in body:
        assert "killed" in message
    else:
        assert "segmentation fault" in message
    assert student.ok(1) == 2 and student.worker_pid() != first


@pytest.mark.parametrize("body, kind", [("sys.exit(0)", "SystemExit"), ("sys.exit('bye')", "SystemExit"),
                                        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
                                        ("raise BaseException('base')", "BaseException"),
                                        ("raise GeneratorExit", "GeneratorExit")])
def test_exit_and_base_exceptions_are_errors_without_restart(sandbox, body, kind):
    box, student = sandbox(COMMON + f"\ndef leave():\n    {body}\n")
    first = student.worker_pid()
    with pytest.raises(StudentError) as info:
        student.leave()
    assert f"leave() raised {kind}" in str(info.value)
    assert "graded cell 1" in str(info.value)  # the student's own frame
    assert "autograder" not in str(info.value)  # never the grader's internals
    assert student.worker_pid() == first and box.restarts == 1


def test_too_many_restarts_fail_fast(sandbox):
    box, student = sandbox(COMMON + "\ndef die():\n    os._exit(1)\n", limits=Limits(call_timeout=2, load_timeout=5, max_restarts=2))
    for _ in range(3):  # the first start and two restarts
        with pytest.raises(StudentCrash, match="ended the student's process"):
            student.die()
    with pytest.raises(StudentCrash, match="restarted too many times"):
        student.ok()
    assert box.restarts == 3


# ---- cells that kill the load -------------------------------------------------------------------
def write_percent(tmp_path, *cells: str) -> Path:
    path = tmp_path / "sub.py"
    path.write_text("".join(f'# %% tags=["graded"]\n{textwrap.dedent(c)}' for c in cells))
    return path


@pytest.mark.parametrize("killer, reason", [("import os\nos._exit(5)\n", "exited with code 5"),
                                            ("while True:\n    pass\n", "ran past the time limit"),
                                            ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "killed")])
def test_cell_that_kills_the_load_is_skipped_and_others_still_work(sandbox, tmp_path, killer, reason):
    path = write_percent(tmp_path, "def first():\n    return 1\n",
                         "def doomed():\n    return 2\n" + killer + "def after():\n    return 3\n",
                         "def last():\n    return first() + 3\n")
    sub = extract.read_submission(path)
    limits = Limits(call_timeout=2, load_timeout=2)
    box, _ = sandbox(limits=limits)
    box.cells = [c.wire() for c in sub.cells]
    student = Student(box, timeout=2, explain_missing=lambda name: runner._explain_missing(name, sub, box))
    assert student.first() == 1 and student.last() == 4
    assert list(box.skip) == [1]
    assert reason in runner._skip_reason(box.skip[1]) or reason in box.skip[1]
    for name in ("doomed", "after"):
        with pytest.raises(MissingName) as info:
            getattr(student, name)()
        message = str(info.value)
        assert f"`{name}` is in graded cell 2" in message and "skipped" in message
        assert reason in message
    notes = runner._load_notes(sub, box)
    assert any("Graded cell 2" in n and "skipped" in n for n in notes)


def test_sys_exit_at_import_is_a_cell_error_not_a_skip(sandbox, tmp_path):
    path = write_percent(tmp_path, "def before():\n    return 1\nimport sys\nsys.exit('no')\ndef after():\n    return 2\n",
                         "def other():\n    return 3\n")
    sub = extract.read_submission(path)
    box, _ = sandbox()
    box.cells = [c.wire() for c in sub.cells]
    student = Student(box, timeout=2, explain_missing=lambda name: runner._explain_missing(name, sub, box))
    assert student.before() == 1 and student.other() == 3
    assert box.skip == {} and box.restarts == 1
    with pytest.raises(MissingName, match="graded cell 1 raised SystemExit: no before reaching it"):
        student.after()


def test_a_worker_that_cannot_start_is_a_clear_failure(sandbox, monkeypatch):
    box, student = sandbox(COMMON)
    monkeypatch.setattr("autograder.sandbox.lifecycle.sys.executable", "/bin/false")
    with pytest.raises(StudentCrash, match="could not start"):
        student.ok()


# ---- memory, output, files -------------------------------------------------------------------
def test_memory_bomb_is_a_memory_error_and_the_worker_survives(sandbox):
    box, student = sandbox(COMMON + """
def bomb():
    return np.ones(20 * 10**9 // 8).sum()  # 20 GB

def bytes_bomb():
    return len(bytearray(20 * 10**9))

def grow():
    chunks = []
    while True:
        chunks.append(np.ones(50_000_000))  # touches 400 MB per step
""", limits=Limits(call_timeout=10, load_timeout=5, memory_bytes=1 << 30))
    first = student.worker_pid()
    for name in ("bomb", "bytes_bomb", "grow"):
        with pytest.raises((StudentError, StudentCrash)) as info:
            getattr(student, name)()
        assert "MemoryError" in str(info.value) or "killed" in str(info.value)
    assert student.ok(2) == 3
    assert student.worker_pid() == first  # MemoryError is an ordinary exception: no restart needed


def test_huge_output_is_truncated_and_the_protocol_survives(sandbox):
    box, student = sandbox(COMMON + """
def shout():
    print("x" * 50_000_000)
    return "done"

def chatter():
    for i in range(50_000):
        print("line", i, "of chatter that fills the pipe")
    sys.stderr.write("e" * 1_000_000)
    os.write(1, b"raw fd 1 " * 100_000)
    os.write(2, b"raw fd 2 " * 100_000)
    return [1, 2]
""", limits=Limits(call_timeout=10, load_timeout=5))
    assert student.shout() == "done"
    printed = "".join(student.printed)
    assert printed.startswith("xxxx") and len(printed) < 10_000
    assert "more characters of output not shown" in printed
    student.printed.clear()
    assert student.chatter() == [1, 2]
    assert len("".join(student.printed)) < 10_000 and "raw fd" not in "".join(student.printed)
    assert student.ok() == 2


def test_writing_a_huge_file_is_stopped_by_the_file_size_limit(sandbox):
    box, student = sandbox(COMMON + """
def write(n):
    with open("big.bin", "wb") as f:
        for _ in range(n // 65536):
            f.write(b"x" * 65536)
    return os.path.getsize("big.bin")

def size():
    return os.path.getsize("big.bin")
""", limits=Limits(call_timeout=5, load_timeout=5, file_bytes=1 << 20))
    assert student.write(1 << 19) == 1 << 19  # small files are fine
    with pytest.raises((StudentError, StudentCrash)) as info:
        student.write(100 << 20)
    assert "File too large" in str(info.value) or "larger than allowed" in str(info.value)
    assert student.size() <= 1 << 20  # asked in the worker: as root its scratch is a tmpfs of its own
    assert student.ok() == 2


# ---- environment, working directory, import path ---------------------------------------------
def test_cwd_is_a_scratch_dir_and_the_environment_is_clean(sandbox, monkeypatch, tmp_path):
    monkeypatch.setenv("LMGRADE_TEST_SECRET", "hidden-value-42")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    box, student = sandbox(COMMON + """
def where():
    return os.getcwd(), dict(os.environ), list(sys.path), os.path.expanduser("~")

def write_here():
    with open("note.txt", "w") as f:
        f.write("scratch")
    return os.path.abspath("note.txt")
""")
    cwd, env, path, home = student.where()
    assert Path(cwd).resolve() == box.scratch.resolve()
    assert Path(home).resolve() == box.scratch.resolve()
    assert "LMGRADE_TEST_SECRET" not in env and "hidden-value-42" not in "".join(env.values())
    assert "PYTHONPATH" not in env and str(tmp_path) not in path
    assert set(env) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "MPLBACKEND",
                        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "LC_CTYPE", "USER", "LOGNAME"}
    assert env.get("USER") == env.get("LOGNAME") == "lmgrade-worker"  # never the grader's own user
    repo = Path(runner.__file__).resolve().parents[2]
    assert str(repo) not in path and "" not in path and "." not in path
    written = Path(student.write_here())
    assert written.parent.resolve() == box.scratch.resolve()
    box.close()
    assert not box.scratch.exists()  # the scratch dir goes away with the worker


def test_worker_cannot_import_solutions_or_checks(sandbox):
    box, student = sandbox(COMMON + """
def try_import(name):
    import importlib
    try:
        importlib.import_module(name)
    except ImportError as exc:
        return type(exc).__name__
    return "imported"
""")
    for name in ("solutions", "solutions.ngram", "assignments", "assignments.ngram.hidden_checks"):
        assert student.try_import(name) == "ModuleNotFoundError", name
    assert student.try_import("autograder.sandbox.wire") == "imported"  # the engine itself is needed there


# ---- child processes ---------------------------------------------------------------------------
def test_child_processes_die_with_the_worker(sandbox):
    box, student = sandbox(COMMON + """
def children(n, own_group):
    # `n` sleeping children (each in a process group of its own if `own_group`); their machine pids
    r, w = os.pipe()
    for _ in range(n):
        if os.fork() == 0:
            if own_group:
                os.setpgid(0, 0)
            os.write(w, b"%d " % os.getpid())
            time.sleep(100)
            os._exit(0)
    said = b""
    while len(said.split()) < n:
        said += os.read(r, 4096)
    ns = os.readlink("/proc/self/ns/pid")
    return [(ns, int(pid)) for pid in said.split()]

def spawn():
    return children(2, True)

def forks(n):
    return children(min(n, 20), False)
""")
    worker = machine_pid(student.worker_pid())
    children = [machine_pid(child) for child in student.spawn() + student.forks(20)]
    assert len(children) == 22 and None not in children
    assert {pid for pid, _ in session_members(worker)} >= set(children) | {worker}
    with pytest.raises(StudentCrash):
        student.loop()  # timeout: the whole process group is killed
    assert wait_until_gone(worker) == []
    # and after a normal end too
    worker = machine_pid(student.worker_pid())
    student.spawn()
    box.close()
    assert wait_until_gone(worker) == []


def test_worker_exit_with_live_children_is_detected(sandbox):
    """Forked children keep the reply pipe open after the worker exits: its death is still noticed at once."""
    box, student = sandbox(COMMON + """
def fork_and_exit():
    for _ in range(3):
        if os.fork() == 0:
            time.sleep(100)
            os._exit(0)
    os._exit(1)
""", limits=Limits(call_timeout=10, load_timeout=5))
    worker = machine_pid(student.worker_pid())
    started = time.monotonic()
    with pytest.raises(StudentCrash, match="exited with code 1"):
        student.fork_and_exit()
    assert time.monotonic() - started < 6  # not the 10 s deadline
    assert wait_until_gone(worker) == []
    assert student.ok() == 2


# ---- what comes back is data ---------------------------------------------------------------------
ODD_VALUES = COMMON + """
class Sub(np.ndarray):
    def __eq__(self, other):
        return np.ones(self.shape, dtype=bool)

class Liar:
    def __eq__(self, other):
        return True
    def __hash__(self):
        return 0
    def __len__(self):
        return 3

class LyingList(list):
    def __eq__(self, other):
        return True

class BadInt(int):
    def __int__(self):
        raise RuntimeError("no int for you")
    __index__ = __int__

def subclass_array():
    return np.arange(4.0).view(Sub)

def liar():
    return Liar()

def lying_list():
    return LyingList([9])

def non_finite():
    return float("nan"), float("inf"), -float("inf"), np.array([np.nan, np.inf, -np.inf, 1.0]), np.float32("nan")

def huge_int():
    return 10 ** 5000

def bad_int():
    return BadInt(3)

def objects():
    return np.array([object()], dtype=object)

def forge():
    # write a forged reply straight to the pipe the grader reads
    fds = [int(f) for f in os.listdir("/proc/self/fd")]
    for fd in fds:
        try:
            os.write(fd, b"\\x00" * 16 + b"garbage")
        except OSError:
            pass
    return 1
"""


def test_lying_objects_come_back_as_data_or_handles(sandbox):
    box, student = sandbox(ODD_VALUES)
    arr = student.subclass_array()
    assert type(arr) is np.ndarray and arr.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert not (arr == np.array([5.0, 5.0, 5.0, 5.0])).any()
    liar = student.liar()
    assert isinstance(liar, Remote) and not isinstance(liar, (int, float, str, list))
    assert liar != 3 and liar != [1, 2, 3] and not (liar == liar.get())
    assert liar.__eq__(1) is NotImplemented  # no student code runs on the grader's side
    lying = student.lying_list()
    assert isinstance(lying, Remote)  # a list subclass is not trusted as a list
    from autograder.checking.compare import assert_equal
    from autograder.errors import CheckFailed
    with pytest.raises(CheckFailed):
        assert_equal(liar, [1, 2, 3], "liar()")
    with pytest.raises(CheckFailed):
        assert_equal(lying, [1], "lying_list()")


def test_nan_and_inf_arrive_intact(sandbox):
    box, student = sandbox(ODD_VALUES)
    nan, inf, ninf, arr, f32 = student.non_finite()
    assert np.isnan(nan) and inf == float("inf") and ninf == -float("inf")
    assert np.isnan(arr[0]) and arr[1] == np.inf and arr[2] == -np.inf and arr[3] == 1.0 and arr.dtype == np.float64
    assert isinstance(f32, np.float32) and np.isnan(f32)


def test_unreadable_results_are_errors_and_the_worker_survives(sandbox):
    box, student = sandbox(ODD_VALUES)
    first = student.worker_pid()
    for name, words in [("huge_int", "cannot read"), ("bad_int", "no int for you"), ("objects", "dtype object")]:
        with pytest.raises(StudentError) as info:
            getattr(student, name)()
        assert "returned a value the grader cannot read" in str(info.value) and words in str(info.value)
    assert student.worker_pid() == first


def test_a_forged_reply_is_unreadable_not_trusted(sandbox):
    box, student = sandbox(ODD_VALUES)
    with pytest.raises(StudentCrash):
        student.forge()
    assert student.ok(5) == 6


def test_torch_values_and_tensor_subclasses(sandbox):
    torch = pytest.importorskip("torch")
    box, student = sandbox(COMMON + """
import torch

class Sneaky(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(self, dtype=torch.bool)

class Hostile(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "detach":
            raise RuntimeError("hostile tensor")
        return super().__torch_function__(func, types, args, kwargs or {})

def tensors():
    return (torch.arange(3.0).as_subclass(Sneaky), torch.tensor([1.5], dtype=torch.float64),
            torch.tensor([0.5, float("nan")], dtype=torch.bfloat16), torch.ones(2, requires_grad=True) * 2)

def hostile():
    return torch.zeros(2).as_subclass(Hostile)

def double(t):
    return t * 2
""", limits=Limits(call_timeout=5, load_timeout=20), import_torch=True)
    sneaky, f64, bf16, grad = student.tensors()
    assert type(sneaky) is torch.Tensor and sneaky.tolist() == [0.0, 1.0, 2.0]
    assert not torch.equal(sneaky, torch.tensor([7.0, 7.0, 7.0]))
    assert f64.dtype == torch.float64 and bf16.dtype == torch.bfloat16 and torch.isnan(bf16[1])
    assert grad.lmgrade_requires_grad and grad.lmgrade_device == "cpu"
    with pytest.raises(StudentError, match="cannot read.*hostile tensor"):
        student.hostile()
    out = student.double(torch.arange(3, dtype=torch.float64))
    assert out.dtype == torch.float64 and out.tolist() == [0.0, 2.0, 4.0]


# ---- the grader's own comparisons cannot be patched from the worker ---------------------------
PATCHED_NUMPY = '''
import re
import numpy as np
import numpy.testing

np.allclose = lambda *a, **k: True
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
np.testing.assert_array_equal = lambda *a, **k: None

def tokenize(line):
    return line.split()  # wrong: keeps case and punctuation

def build_vocab(sentences, min_count=2):
    return {"</s>", "<unk>"}

def replace_oov(tokens, vocab):
    return list(tokens)
'''


@pytest.mark.usefixtures("policy_off")  # the layer beneath the policy
def test_patching_numpy_in_the_worker_does_not_change_grading(tmp_path):
    path = tmp_path / "patched.py"
    path.write_text(PATCHED_NUMPY)
    import autograder.authoring.assignments as assignments
    report = runner.grade(path, assignments.get("ngram"), questions={"1"}, limits=FAST)
    by_name = {r.name: r for r in report.results}
    assert not by_name["public_tokenize"].passed and not by_name["tokenize_hidden"].passed
    assert "tokenize(" in by_name["public_tokenize"].output
    assert report.score == 0
    assert np.allclose(np.zeros(1), np.ones(1)) is False  # the grader's numpy is untouched


# ---- small protocol smoke tests -------------------------------------------------------------------
def test_map_get_put_support_and_handles(sandbox):
    box, student = sandbox(COMMON + """
class Counter2:
    def __init__(self, start):
        self.total = start
        self.n = 2
    def add(self, x):
        self.total += x
        return self.total

def total_of(c):
    return c.total

def length(data):
    return len(data)

def table_prob(lm, w, ctx):
    return lm.prob(w, ctx)
""")
    assert student.ok.map([(1,), (2,), (3,)]) == [2, 3, 4]
    c = student.Counter2(10)
    assert isinstance(c, Remote)
    assert c.add(5) == 15 and c.total.get() == 15 and c.n.get() == 2
    assert student.total_of(c) == 15  # a handle passed back resolves to the same object
    data = student.put(list(range(1000)))
    assert student.length(data) == 1000
    lm = student.support("TableLM", 2, ["a", "</s>"], {("<s>",): {"a": 0.25, "</s>": 0.75}})
    assert student.table_prob(lm, "a", ("<s>",)) == 0.25
    with pytest.raises(MissingName, match="not defined"):
        student.no_such_function()
    with pytest.raises(StudentError, match="AttributeError"):
        c.no_such_attr.get()
    box.request({"op": "seed", "seed": 3}, [], 2)
    with pytest.raises(WorkerFailure) as info:
        box.request({"op": "call", "target": {"name": "loop"}}, [], 0.3)
    assert info.value.kind == "timeout" and box.proc is None


def test_set_order_is_the_same_in_every_worker(sandbox):
    """Same submission, same score: a function that iterates a set of strings answers alike in every worker."""
    source = "def order():\n    return list({'the', 'of', 'and', 'to', 'a', 'in', 'that', 'is', 'was', 'he', 'for', 'it'})\n"
    orders = [sandbox(source)[1].order() for _ in range(3)]
    assert orders[0] == orders[1] == orders[2]
