"""What graded code may do is enforced in the worker where it runs (autograder/sandbox/guard.py).

Every attack here runs in a real sandbox with the text rules switched off (`text_rules_off`), so that
only the worker's guard can stop it: the seven attacks that found the readable subset wanting each
earn nothing, and five more spellings of each class (string evaluation, namespace copying, process
start, module-as-value, dunder reach) fail with the guard's message. Correct code keeps full marks
(the staff solutions, in tests/test_*_grading.py, are graded with the guard on).
"""
import sys

import pytest

from autograder.authoring import assignments
from autograder.checking.remote import Student, StudentError
from autograder.grading import runner
from autograder.sandbox import forbidden, guard, policy
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits
from tests.helpers import solution_text

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the guard runs in POSIX workers")

TRANSFORMER, RNN_LM, ATTENTION = (assignments.get(a) for a in ("transformer", "rnn_lm", "attention"))
SWITCHED_OFF = "switched off in the grader"
RUNTIME = "may not run code made at run time"
PROCESS = "may not start programs or processes"
FRAMES = "may not reach frames"
PATCH = "may not change a library's functions"


@pytest.fixture
def text_rules_off(monkeypatch):
    """Grade as if the text rules accepted everything, so that only the run-time guard stands."""
    monkeypatch.setattr(policy, "refused", lambda cells, assignment: {})
    monkeypatch.setattr(forbidden, "tainted_names", lambda cells, banned: {})
    if hasattr(policy, "loadable"):
        monkeypatch.setattr(policy, "loadable", lambda cells, *args, **kwargs: cells)


def grade_with(tmp_path, assignment, extra: str, questions: set):
    path = tmp_path / "submission.py"
    path.write_text(solution_text(assignment.id) + "\n\n" + extra)
    return runner.grade(path, assignment, device="cpu", questions=questions)


# ---- the seven attacks the issue names: each scored its question's full points before ------------

MATCH_GLOBALS = '''
def _namespace(fn):
    match fn:
        case object(__globals__=ns):
            return ns


class LayerNorm(LayerNorm):
    def forward(self, x):
        return _namespace(F.softmax)["layer_norm"](x, self.weight.shape, self.weight, self.bias, self.eps)
'''

ERR_OBJ = '''
def _torch_module():
    try:
        torch.no_such_name
    except AttributeError as err:
        return err.obj


class LSTMCell(LSTMCell):
    def forward(self, x, state):
        return _torch_module().lstm_cell(x, state, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
'''

UPDATE_WRAPPER = '''
import functools
import torch.nn.functional as F


def _box():
    pass


functools.update_wrapper(_box, F.softmax, assigned=(), updated=("__globals__",))  # F's names into ours
_sdpa = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None):
    _, weights = _sdpa(q, k, v, mask)
    # after the update, this module's `scaled_dot_product_attention` global is torch's again
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights
'''


def test_a_match_class_pattern_reaching_a_namespace_earns_nothing(tmp_path, text_rules_off):
    report = grade_with(tmp_path, TRANSFORMER, MATCH_GLOBALS, {"1"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    assert {"public_norms", "layernorm_builtin", "norm_gradients"} <= set(failed)
    assert all(SWITCHED_OFF in failed[name] and "layer_norm" in failed[name]
               for name in ("public_norms", "layernorm_builtin")), failed
    assert report.score < 7


def test_a_module_from_an_attribute_error_earns_nothing(tmp_path, text_rules_off):
    report = grade_with(tmp_path, RNN_LM, ERR_OBJ, {"2"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    lstm = [name for name in failed if "lstm" in name.lower()]
    assert lstm and all(SWITCHED_OFF in failed[name] for name in lstm), failed
    assert not any(r.passed for r in report.results if "lstm" in r.name.lower())


def test_a_namespace_copied_by_update_wrapper_earns_nothing(tmp_path, text_rules_off):
    report = grade_with(tmp_path, ATTENTION, UPDATE_WRAPPER, {"2"})
    assert report.score == 0, [(r.name, r.passed) for r in report.results]
    assert any(SWITCHED_OFF in r.output and "scaled_dot_product_attention" in r.output for r in report.results)


# ---- every other spelling, called in one guarded worker ---------------------------------------------

ATTACKS = '''
import collections
import dataclasses
import functools
import operator
import typing

import numpy as np
import torch
import torch.nn.functional as F

X = torch.randn(2, 4)


def _torch():
    try:
        torch.no_such_name
    except AttributeError as err:
        return err.obj


# string evaluation
def singledispatch_register():
    f = functools.singledispatch(lambda v: v)
    def h(v: "type('C', (), {'f': staticmethod(__import__('torch').nn.functional.layer_norm)})"):
        return v
    f.register(h)
    return list(f.registry)[-1].f(X, (4,))

def type_hints():
    def h(v: "__import__('os').getcwd()"):
        return v
    return typing.get_type_hints(h)

def forward_ref():
    return typing.ForwardRef("__import__('os').getcwd()")._evaluate({}, {}, frozenset())

def runstring():
    ns = {}
    np.testing.runstring("import torch.nn.functional as F; y = F.layer_norm", ns)
    return ns["y"](X, (4,))

def builtins_of_a_module():
    return _torch().__builtins__["eval"]("1 + 1")

def code_from_marshal():
    m = _torch().serialization.pickle
    return m.loads(m.dumps(len))

# namespace copying
def match_globals():
    match F.softmax:
        case object(__globals__=ns):
            return ns["layer_norm"](X, (4,))

def update_wrapper_globals():
    def box():
        pass
    functools.update_wrapper(box, F.softmax, assigned=(), updated=("__globals__",))
    return layer_norm(X, (4,))  # noqa: F821 - a global now

def dunder_globals():
    return F.softmax.__globals__["layer_norm"](X, (4,))

def attrgetter_globals():
    return operator.attrgetter("__globals__")(F.softmax)["layer_norm"](X, (4,))

def module_dict():
    return dict(vars(F))["layer_norm"](X, (4,))

def getattr_computed():
    return getattr(F, "layer" + "_norm")(X, (4,))

# process start
def collect_env_run():
    return _torch().utils.collect_env.run("echo hi")

def child_interpreter():
    import torch.utils.collect_env as env
    return env.subprocess.run([env.sys.executable, "-c", "print(1)"], capture_output=True).stdout

def os_system():
    return _torch().os.system("true")

def os_posix_spawn():
    os = _torch().os
    return os.posix_spawn("/bin/true", ["true"], {})

def os_fork():
    return _torch().os.fork()

def os_exec():
    os = _torch().os
    return os.execv("/bin/true", ["true"])

def multiprocessing_process():
    p = torch.multiprocessing.get_context("fork").Process(target=print)
    p.start()

# module as value
def err_obj():
    return _torch().layer_norm(X, (4,))

def module_in_a_list():
    return [torch][0].native_layer_norm(X, [4], None, None, 1e-5)

def module_as_default(m=torch):
    return m.nn.functional.layer_norm(X, (4,))

def sys_modules():
    return _torch().sys.modules["torch.nn.functional"].layer_norm(X, (4,))

def reduce_getattr():
    return functools.reduce(getattr, ["ops", "aten", "native_layer_norm"], torch)(X, [4], None, None, 1e-5)

def module_class():
    return torch.nn.modules.normalization.LayerNorm(4)(X)

def inference_mode_kernel():
    with torch.inference_mode():
        return torch.ops.aten.layer_norm(X, [4])

def meta_kernel():
    return torch.layer_norm(torch.empty(2, 4, device="meta"), (4,))

def optimizer_step():
    p = torch.nn.Parameter(torch.randn(3))
    p.grad = torch.randn(3)
    torch.optim.AdamW([p]).step()

def python_reference():
    return torch._refs.native_layer_norm(X, [4], None, None, 1e-5)  # torch's own Python version

def sdpa():
    q = torch.randn(1, 2, 3, 4)
    return F.scaled_dot_product_attention(q, q, q)

# dunder reach
def subclasses_walk():
    cls = [c for c in torch.nn.Module.__subclasses__() if c.__name__ == "LayerNorm"][0]
    return cls(4)(X)

def traceback_frame():
    try:
        runstring()
    except PermissionError as err:
        tb = err.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        return tb.tb_frame.f_locals

def generator_frame():
    g = (i for i in range(3))
    return g.gi_frame.f_back

def code_swap():
    def mine(*args, **kwargs):
        return 0
    F.layer_norm.__code__ = mine.__code__

def defaults_swap():
    F.softmax.__defaults__ = (None, 3, None)

def sys_getframe():
    return _torch().sys._getframe(0).f_back

def gc_objects():
    return len(_torch().sys.modules["gc"].get_objects())

def ctypes_memory():
    import torch.utils.collect_env as env
    return env.sys.modules["ctypes"].string_at(0, 1)

def settrace():
    return _torch().sys.settrace(lambda *a: None)

def open_engine():
    return open(_torch().sys.modules["autograder"].__file__).read()

def import_outside():
    import os
    return os.getcwd()

# what correct code does keeps working beside all of this
def honest():
    @dataclasses.dataclass
    class Cfg:
        d: int = 4
    P = collections.namedtuple("P", "a b")
    class N(typing.NamedTuple):
        a: int
    T = typing.TypeVar("T")
    m = (X - X.mean(-1, keepdim=True)) / torch.sqrt(X.var(-1, unbiased=False, keepdim=True) + 1e-5)
    out = F.gelu(torch.nn.Linear(4, 4)(m)).softmax(-1)
    out.sum().backward()
    return [Cfg().d, P(1, 2).b, N(3).a, T.__name__, functools.reduce(operator.mul, [1, 2, 3]),
            round(float(out.sum()), 4)]
'''

EXPECTED = {
    "singledispatch_register": RUNTIME, "type_hints": RUNTIME, "forward_ref": RUNTIME,
"runstring": RUNTIME, "builtins_of_a_module": RUNTIME,
    "code_from_marshal": RUNTIME,
    "match_globals": SWITCHED_OFF, "update_wrapper_globals": SWITCHED_OFF, "dunder_globals": SWITCHED_OFF,
    "attrgetter_globals": SWITCHED_OFF, "module_dict": SWITCHED_OFF, "getattr_computed": SWITCHED_OFF,
    "collect_env_run": PROCESS, "child_interpreter": PROCESS, "os_system": PROCESS, "os_posix_spawn": PROCESS,
    "os_fork": PROCESS, "os_exec": PROCESS, "multiprocessing_process": PROCESS,
    "err_obj": SWITCHED_OFF, "module_in_a_list": SWITCHED_OFF, "module_as_default": SWITCHED_OFF,
    "sys_modules": SWITCHED_OFF, "reduce_getattr": SWITCHED_OFF, "module_class": SWITCHED_OFF,
    "inference_mode_kernel": SWITCHED_OFF, "meta_kernel": SWITCHED_OFF, "optimizer_step": SWITCHED_OFF,
    "python_reference": SWITCHED_OFF, "sdpa": SWITCHED_OFF,
    "subclasses_walk": SWITCHED_OFF, "traceback_frame": FRAMES, "generator_frame": FRAMES,
    "code_swap": PATCH, "defaults_swap": PATCH, "sys_getframe": FRAMES, "gc_objects": FRAMES,
    "ctypes_memory": "may not use ctypes", "settrace": "may not install tracers",
    "open_engine": "may not open the grader's or the course's files", "import_outside": "may import only",
}


def guarded_worker(source: str):
    """A worker with the transformer's rules (layer norms, attention and Adam banned) and `source` loaded."""
    with Sandbox([{"index": 0, "number": 1, "source": source}], import_torch=True,
                 limits=Limits(call_timeout=30)) as box:
        box.guard = guard.rules_for(TRANSFORMER)
        yield Student(box, timeout=30)


@pytest.fixture(scope="module")
def guarded():
    yield from guarded_worker(ATTACKS)


@pytest.fixture(scope="module")
def fresh():
    """The same cell in a worker of its own: an attack that copied a namespace into the cells'
    globals (update_wrapper) renamed their module, which only changes what the attacker's own code sees."""
    yield from guarded_worker(ATTACKS)


@pytest.mark.parametrize("attack", sorted(EXPECTED))
def test_every_spelling_fails_where_it_runs_with_a_clear_message(guarded, attack):
    with pytest.raises(StudentError) as caught:
        getattr(guarded, attack)()
    assert EXPECTED[attack] in str(caught.value), str(caught.value)[:600]


def test_correct_code_beside_the_attacks_runs(fresh):
    d, b, a, name, product, total = fresh.honest()
    assert (d, b, a, name, product) == (4, 2, 3, "T", 6)
    assert total == pytest.approx(2.0, abs=1e-3)  # two rows of a softmax


def test_the_families_switch_off_no_operator_correct_code_needs():
    """The aten operators a family switches off are the banned routines' own; operators correct code
    runs every day stay on (the measured use of every correct variant: bench/runtime_guard_ops.py)."""
    import torch
    cases = {  # assignment: (operators correct code uses, operators that must be off)
        "transformer": ({"softmax", "_softmax", "addmm", "mm", "bmm", "mean", "var", "rsqrt", "embedding", "gelu",
                       "native_dropout", "cat", "tril", "masked_fill"},
                      {"layer_norm", "native_layer_norm", "_fused_rms_norm", "group_norm", "native_batch_norm",
                       "_fused_adamw_", "scaled_dot_product_attention", "_native_multi_head_attention"}),
        "rnn_lm": ({"sigmoid", "tanh", "addmm", "embedding", "cat", "stack", "clamp"},
                 {"lstm_cell", "gru_cell", "_thnn_fused_lstm_cell", "lstm", "gru", "rnn_tanh", "rnn_relu_cell"}),
        "attention": ({"softmax", "_softmax", "bmm", "baddbmm", "masked_fill", "einsum"},
                    {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_attention_math", "_native_multi_head_attention"}),
    }
    for name, (honest, banned) in cases.items():
        assignment = assignments.get(name)
        off = {op.partition(".")[0] for op in guard.banned_ops(torch, forbidden.Banned(assignment.forbidden).routine)}
        assert not off & honest, assignment.id
        assert banned <= off, (assignment.id, banned - off)
