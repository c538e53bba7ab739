"""Graded code is plain Python the grader can read: every staff solution and every correct variant
is inside the subset; reflection, run-time code, patched libraries and imports from outside the
allowlist are refused with a message that says what, where and what to write instead, and cost
exactly the checks of the code that holds or reaches them. (Banned routines reached by readable
code: tests/test_forbidden.py.)"""
import importlib
import tempfile
from pathlib import Path

import pytest

from autograder.authoring import assignments, build
from autograder.checking.checks import CheckSpec
from autograder.sandbox import policy
from autograder.sandbox.extract import Cell, read_submission
from tests.helpers import edited_solution

IDS = [a.id for a in assignments.available()]
CLEAN = "import torch\ndef clean(x):\n    return torch.softmax(x, -1)"


def cells(*sources, first=1):
    return [Cell(index=i, number=first + i, source=s) for i, s in enumerate(sources)]


def refused(*sources, assignment="attention"):
    return policy.refused(cells(*sources), assignments.get(assignment))


@pytest.mark.parametrize("assignment_id", IDS)
def test_staff_solutions_and_starters_are_inside_the_subset(assignment_id):
    assignment = assignments.get(assignment_id)
    assert policy.refused(read_submission(assignment.reference_path).cells, assignment) == {}
    with tempfile.TemporaryDirectory() as folder:
        for variant in ("solution", "starter"):
            path = Path(folder) / f"{variant}.ipynb"
            path.write_text(build.notebook(assignment, variant))
            sub = read_submission(path)
            assert sub.cells, variant
            assert policy.refused(sub.cells, assignment) == {}, variant


def _replacements(value):
    """The (old, new) edits of a variant, however its table nests them."""
    if isinstance(value, list) and all(isinstance(e, tuple) and len(e) == 2 and all(isinstance(s, str) for s in e)
                                       for e in value):
        return value
    for item in value if isinstance(value, tuple) else ():
        found = _replacements(item)
        if found is not None:
            return found
    return None


def _correct_variants():
    for assignment_id in IDS:
        module = importlib.import_module(f"tests.test_{assignment_id}_variants")
        for table, variants in vars(module).items():
            if table.isupper() and "CORRECT" in table and isinstance(variants, dict):
                for name, value in variants.items():
                    yield pytest.param(assignment_id, _replacements(value), id=f"{assignment_id}: {name}")


@pytest.mark.parametrize("assignment_id, replacements", list(_correct_variants()))
def test_correct_variants_are_inside_the_subset(assignment_id, replacements):
    assert replacements is not None
    text = edited_solution(assignment_id, replacements)
    assert policy.refused(cells(text), assignments.get(assignment_id)) == {}


def test_a_local_named_lstm_in_hidden_grad_norms_is_fine():
    """The old scanner withheld a correct `hidden_grad_norms` for a local variable called `lstm`."""
    from autograder.sandbox import forbidden
    rnn_lm = assignments.get("rnn_lm")
    text = edited_solution("rnn_lm", [(
        "        hs = []\n        for t in range(x.size(1)):\n            state = cell(x[:, t], state)\n",
        "        hs = []\n        lstm = cell\n        for t in range(x.size(1)):\n            state = lstm(x[:, t], state)\n")])
    assert "lstm = cell" in text.split("def hidden_grad_norms")[1]
    assert policy.refused(cells(text), rnn_lm) == {}
    assert forbidden.tainted_names(cells(text), rnn_lm.forbidden) == {}


# name: (graded cell defining `mha`, what the message must say). `clean`, in another cell, keeps its points.
ATTACKS = {
    "getattr on a for-loop variable": (
        "import torch\ndef mha(x):\n    for name in ['softmax', 'lstm']:\n        f = getattr(torch, name)\n    return f(x)",
        "literal name"),
    "getattr on a walrus name": (
        "import torch\ndef mha(x):\n    if (n := 'ls' + 'tm'):\n        return getattr(torch, n)(x)", "literal name"),
    "a __subclasses__ walk": (
        "def mha(x):\n    for c in object.__subclasses__():\n        if c.__name__ == 'LSTM':\n            return c\n",
        "`object.__subclasses__`"),
    "f.__globals__": ("def mha(f, x):\n    return f.__globals__['torch'].lstm(x)", "`f.__globals__`"),
    "a marshalled code object": (
        "import marshal, types\ndef mha(x):\n    return types.FunctionType(marshal.loads(x), {})()", "`import marshal`"),
    "pickle.loads": ("import pickle\ndef mha(x):\n    return pickle.loads(x)", "may import only"),
    "__builtins__['getattr']": ("import torch\ndef mha(x):\n    return __builtins__['getattr'](torch, 'lstm')(x)",
                                "`__builtins__`"),
    "importlib.import_module": ("import importlib\ndef mha(x):\n    return importlib.import_module('torch').lstm(x)",
                                "`import importlib`"),
    "sys.modules['torch'].lstm": ("import sys\ndef mha(x):\n    return sys.modules['torch'].lstm(x)", "`import sys`"),
    "assigning torch.softmax": ("import torch\ndef mha(x):\n    torch.softmax = lambda *a, **k: x\n    return x",
                                "changes a library"),
    "import autograder": ("import autograder\ndef mha(x):\n    return autograder.sandbox.worker", "`import autograder`"),
    "from autograder.sandbox.worker import": ("from autograder.sandbox.worker import Worker\ndef mha(x):\n    return Worker",
                                      "`from autograder.sandbox.worker import Worker`"),
    "type(x).__mro__": ("def mha(x):\n    return type(x).__mro__[-1]", "`type(x).__mro__`"),
    "().__class__.__base__.__subclasses__()": (
        "def mha(x):\n    return ().__class__.__base__.__subclasses__()", "`().__class__.__base__`"),
    "eval": ("import torch\ndef mha(x):\n    return eval('torch.l' + 'stm')(x)", "`eval`"),
    "exec": ("def mha(x):\n    exec('y = 1')\n    return x", "makes or loads code"),
    "compile": ("def mha(x):\n    return compile('1', 'f', 'eval')", "`compile`"),
    "vars of a module": ("import torch.nn.functional as F\ndef mha(x, k):\n    return vars(F)[k](x)", "`vars`"),
    "setattr": ("import torch\ndef mha(x):\n    setattr(torch, 'softmax', None)\n    return x", "`setattr`"),
    "globals() in a function": ("def mha(x):\n    return globals()['clean'](x)", "`globals`"),
    "getattr passed as a value": ("import functools\ndef mha(x, path):\n    return functools.reduce(getattr, path, x)",
                                  "`getattr`"),
    "a getattr of a double-underscore literal": ("def mha(x):\n    return getattr(x, '__dict__')", "__dict__"),
    "setattr on self with a computed name": (
        "class mha:\n    def __init__(self, names):\n        for name in names:\n            setattr(self, name, 0)",
        "`setattr`"),
    "setattr on self with a double-underscore name from a literal loop": (
        "class mha:\n    def __init__(self):\n        for name in ('__class__',):\n            setattr(self, name, int)",
        "`setattr`"),
    "getattr on self with a loop name rebound": (
        "class mha:\n    def f(self, k):\n        for name in ('a', 'b'):\n            name = k\n"
        "            return getattr(self, name)", "literal name"),
    "setattr on another object with literal names": (
        "import torch\ndef mha(x):\n    for name in ('softmax',):\n        setattr(torch, name, x)", "`setattr`"),
    "a class patched through __class__": ("def mha(x):\n    x.__class__.softmax = lambda s, d: s\n    return x",
                                          "changes a library"),
    "a library class stored in an attribute, then patched": (
        "from torch import nn\nclass mha:\n    def __init__(self):\n        self.kind = nn.Linear\n"
        "    def f(self):\n        self.kind.forward = lambda s, x: x", "`.kind` holds a library object"),
    "__name__ written": ("from torch import nn\ndef mha(x):\n    nn.Linear.__name__ = 'x'\n    return x",
                         "double-underscore"),
    "operator.attrgetter": ("import operator, torch\ndef mha(x):\n    return operator.attrgetter('lstm')(torch)(x)",
                            "`operator.attrgetter`"),
    "a match class pattern reading __globals__": (
        "import torch\ndef mha(f, x):\n    match f:\n        case object(__globals__=ns):\n            return ns\n",
        "`object(__globals__=...)`"),
    "operator.setitem into a library": (
        "import operator, torch\ndef mha(x):\n    operator.setitem(torch.nn.functional.__all__, 0, x)\n    return x",
        "`operator.setitem`"),
    "a module held in a variable": ("import torch\ndef mha(x):\n    m = torch.nn\n    return m.LSTM(3, 4)(x)",
                                    "a module is used only as `module.name`"),
    "a module passed to a helper": ("import torch\ndef get(m):\n    return m.lstm\ndef mha(x):\n    return get(torch)(x)",
                                    "`torch`"),
    "a module a library imported for itself": ("import torch\ndef mha(x):\n    return torch.os.system('ls')",
                                                "reaches module `os`"),
    "builtins through torch": ("import torch\ndef mha(x):\n    return torch.builtins.eval('1')", "module `builtins`"),
    "torch._VF": ("import torch\ndef mha(x):\n    return torch._VF.lstm(x)", "private"),
    "from torch import _C": ("from torch import _C\ndef mha(x):\n    return _C", "private"),
    "torch.ops": ("import torch\ndef mha(x):\n    return torch.ops.aten.lstm(x)", "`torch.ops` makes or loads code"),
    "torch.load": ("import torch\ndef mha(x):\n    return torch.load(x)", "`torch.load`"),
    "torch.jit": ("import torch\ndef mha(x):\n    return torch.jit.script(x)", "`torch.jit`"),
    "torch.compile": ("import torch\ndef mha(x):\n    return torch.compile(x)", "`torch.compile`"),
    "np.load with pickles": ("import numpy as np\ndef mha(x):\n    return np.load(x, allow_pickle=True)", "`numpy.load`"),
    "a library class patched through an alias": (
        "from torch import nn\nLinear = nn.Linear\ndef mha(x):\n    Linear.forward = lambda self, x: x\n    return x",
        "`Linear` holds a library object"),
    "a class patched through type()": ("def mha(x):\n    type(x).softmax = lambda s, d: s\n    return x",
                                       "changes a library"),
    "a class patched through mro()": (
        "from torch import nn\nclass L(nn.Linear):\n    pass\ndef mha(x):\n    for c in L.mro():\n"
        "        c.forward = lambda self, x: x\n    return x", "`c` holds a library object"),
    "a class got from type() patched later": (
        "def mha(x):\n    t = type(x)\n    t.softmax = lambda s, d: s\n    return x", "`t` holds a library object"),
    "nn.Module.__call__ patched": ("from torch import nn\ndef mha(x):\n    nn.Module.__call__ = lambda *a: x\n    return x",
                                   "changes a library"),
    "a global module hook": (
        "import torch\ndef mha(x):\n    torch.nn.modules.module.register_module_forward_hook(lambda *a: x)\n    return x",
        "changes a library"),
    "a library class rewritten by dataclass()": (
        "import dataclasses\nfrom torch import nn\ndef mha(x):\n    dataclasses.dataclass(nn.Linear)\n    return x",
        "only as `@decorator` on your own class"),
    "an abstract base class registry": (
        "import collections.abc\ndef mha(x):\n    collections.abc.Sequence.register(type(x))\n    return x",
        "changes a library"),
    "a generator's frame": ("def mha(x):\n    g = (i for i in [1])\n    return g.gi_frame.f_back.f_globals",
                            "frames"),
    "type() with three arguments": ("def mha(x):\n    return type('A', (), {})", "`class` statement"),
    # reflection on the student's own objects is allowed only where the grader can read it (below): not these
    "vars(self) returned (its caller may write any name into it)": (
        "class mha:\n    def f(self):\n        return vars(self)", "`vars`"),
    "self.__dict__ written with a computed name": (
        "class mha:\n    def f(self, name, value):\n        self.__dict__[name] = value", "`self.__dict__`"),
    "self.__dict__.update with computed names": (
        "class mha:\n    def f(self, **values):\n        self.__dict__.update(values)", "`self.__dict__`"),
    "vars() of another object in an f-string": ("def mha(x):\n    return f'{vars(x)}'", "`vars`"),
    "object.__setattr__ on a library from a dataclass's __post_init__": (
        "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass mha:\n    def __post_init__(self):\n"
        "        object.__setattr__(torch, 'softmax', len)", "`object.__setattr__`"),
    "object.__setattr__ on self with a computed name": (
        "from dataclasses import dataclass\n@dataclass\nclass mha:\n    name: str = 'w'\n    def __post_init__(self):\n"
        "        object.__setattr__(self, self.name, 0)", "`object.__setattr__`"),
    "object.__setattr__ on self, __class__": (
        "from dataclasses import dataclass\n@dataclass(frozen=True)\nclass mha:\n    def __post_init__(self):\n"
        "        object.__setattr__(self, '__class__', int)", "`object.__setattr__`"),
    "setattr over a dict's items with ** unpacking": (
        "class mha:\n    def __init__(self, extra):\n        for name, value in {'w': 1, **extra}.items():\n"
        "            setattr(self, name, value)", "`setattr`"),
    "setattr over dict(**kwargs).items()": (
        "class mha:\n    def __init__(self, **kwargs):\n        for name, value in dict(**kwargs).items():\n"
        "            setattr(self, name, value)", "`setattr`"),
    "an abstract base class's registry": (
        "import abc\ndef mha(x):\n    abc.ABC.register(type(x))\n    return x", "changes a library"),
    "abc.update_abstractmethods called on a library class": (
        "import abc\nfrom torch import nn\ndef mha(x):\n    abc.update_abstractmethods(nn.Linear)\n    return x",
        "only as `@decorator` on your own class"),
    "a class's __getattr__": ("class mha:\n    def __getattr__(self, name):\n        return name", "`__getattr__`"),
    # the operator protocols are inside (OWN_OBJECTS); the hooks that take over a library's own calls are not
    "__torch_function__ on the student's class": (
        "class mha:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return True", "`__torch_function__`"),
    "__array_ufunc__ on the student's class": (
        "class mha:\n    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):\n        return True",
        "`__array_ufunc__`"),
    "__array_function__ on the student's class": (
        "class mha:\n    def __array_function__(self, func, types, args, kwargs):\n        return True",
        "`__array_function__`"),
    "__reduce__ (what pickle and copy call)": (
        "import torch\nclass mha:\n    def __reduce__(self):\n        return (torch.load, ('x',))", "`__reduce__`"),
    "async": ("async def mha(x):\n    return x", "ordinary `def`"),
    "a relative import": ("from . import worker\ndef mha(x):\n    return worker", "relative"),
}


# Patching `torch` changes every function that uses torch afterwards: they lose their points too.
COSTS_TORCH_USERS = {"assigning torch.softmax"}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attacks_are_refused_with_a_clear_message(attack):
    source, said = ATTACKS[attack]
    found = refused(CLEAN, source)
    assert "mha" in found, found
    assert all(str(u).endswith("this import was not run)") for u in found.get(policy.NOT_RUN, [])), found
    assert ("clean" in found) == (attack in COSTS_TORCH_USERS), found
    message = str(found["mha"][0])
    assert said in message and "graded cell 2, line " in message, message
    spec = CheckSpec(name="x", question="1", points=1.0, title="x", uses=("mha",))
    assert "Not graded: `mha`" in policy.withheld(spec, found)
    if "clean" not in found:
        assert policy.withheld(CheckSpec(name="y", question="1", points=1.0, title="y", uses=("clean",)), found) is None


# (graded cell 2, the line not run, the names that lose their checks): a statement outside the subset
# that would run while the cells load is not run; the rest of its cell loads and `clean` keeps its points.
NOT_RUN_AT_LOAD = {
    "a library patched at the top level": (
        "import torch\ntorch.softmax = lambda *a, **k: 0\ndef mha(x):\n    return x", 2, set()),
    "a star import": ("from torch.nn.functional import *\ndef mha(x):\n    return scaled_dot_product_attention(x, x, x)",
                      1, {"mha", "scaled_dot_product_attention"}),
    "a call of refused code": ("def setup():\n    exec('import os')\nsetup()\ndef mha(x):\n    return x", 3, {"setup"}),
    "a refused decorator": ("import torch\n@torch.jit.script\ndef mha(x):\n    return x", 2, {"mha"}),
    "a metaclass": ("class Meta(type):\n    pass\nclass mha(metaclass=Meta):\n    pass", 3, {"mha", "Meta"}),
    "a module's __getattr__": ("def __getattr__(name):\n    return name\ndef mha(x):\n    return x", 1,
                               {"__getattr__"}),
    "vars() in a class body": ("class mha:\n    attrs = vars()\n", 2, {"mha"}),
    "a refused import used at load": ("import os\nHOME = os.getcwd()\ndef mha(x):\n    return x", 2, {"os", "HOME"}),
    "globals() written": ("globals()['mha'] = len\ndef other(x):\n    return mha(x)", 1, {"mha", "other"}),
}


@pytest.mark.parametrize("case", sorted(NOT_RUN_AT_LOAD))
def test_code_outside_the_subset_that_runs_at_load_is_not_run_and_costs_only_its_names(case):
    source, line, names = NOT_RUN_AT_LOAD[case]
    found = refused(CLEAN, source)
    assert set(found) - {policy.NOT_RUN} == names, found
    (named,) = [use for use in found[policy.NOT_RUN] if use.line == line]
    assert str(named).startswith(f"`") and f"(graded cell 2, line {line}: " in str(named)
    assert str(named).endswith("this statement was not run)"), named
    assert policy.withheld(CheckSpec(name="y", question="1", points=1.0, title="y", uses=("clean",)), found) is None
    loaded = policy.loadable(cells(CLEAN, source), assignments.get("attention"))
    assert loaded[0].source == CLEAN
    lines = loaded[1].source.split("\n")
    assert len(lines) == len(source.split("\n")) and any(
        lines[i].startswith("pass  # not run") for i in range(line))  # the statement holding that line
    compile(loaded[1].source, "cell", "exec")  # the rest of the cell still loads


def test_a_cell_loads_around_the_statements_not_run():
    """Only the refused statement (and what needs its names at load) is left out; the rest runs, on its lines."""
    source = "import os, math\nX = math.pi\nHOME = os.getcwd()\nY = X * 2; Z = HOME\nW = 'é'; eval('1')\nV = 5"
    (cell,) = policy.loadable(cells(source), assignments.get("attention"))
    names = {}
    exec(cell.source, names)  # noqa: S102 - what the worker would run: nothing refused is left in it
    assert {"math", "X", "Y", "W", "V"} <= set(names) and not {"os", "HOME", "Z"} & set(names)
    assert cell.source.split("\n")[4] == "W = 'é'; pass  # not run: outside what graded code may contain"
    found = refused(source)
    assert set(found) - {policy.NOT_RUN} == {"os", "HOME", "Z"}
    assert [str(u).split(":")[0] for u in found[policy.NOT_RUN]] == [
        "`import os` (graded cell 1, line 1", "`os` (graded cell 1, line 3", "`HOME` (graded cell 1, line 4",
        "`eval` (graded cell 1, line 5"]
    assert str(found[policy.NOT_RUN][0]).endswith("this import was not run)")
    assert policy.loadable(cells(source), assignments.get("attention"), {"x": []}) == cells(source)  # policy off


def test_referring_to_refused_code_at_load_without_running_it_costs_only_the_referrer():
    found = refused(CLEAN, "class Bad:\n    def f(self):\n        return vars(self)\nclass Sub(Bad):\n    pass\n"
                           "ALIAS = Bad\nmodel = Bad.f")
    assert set(found) == {"Bad", "Sub", "ALIAS", "model"}


def test_a_violation_costs_its_function_what_calls_it_and_what_needs_it():
    found = refused("import torch\ndef bad(x):\n    return eval('x')\ndef caller(x):\n    return bad(x) + 1\n"
                    "def other(x):\n    return torch.tanh(x)")
    assert set(found) == {"bad", "caller"}
    needs = CheckSpec(name="z", question="2", points=1.0, title="z", uses=("other",), needs=("bad",))
    assert "`bad`" in policy.withheld(needs, found)
    assert str(found["caller"][0]).startswith("`eval` (graded cell 1, line 3")


def test_a_disallowed_import_costs_only_the_names_it_binds():
    found = refused("import os, torch\ndef uses_os():\n    return os.getcwd()\ndef fine(x):\n    return torch.tanh(x)")
    assert set(found) == {"os", "uses_os", policy.NOT_RUN}
    assert str(found["os"][0]).startswith("`import os` (graded cell 1, line 1: graded cells may import only ")


def test_cells_are_numbered_as_jupyter_numbers_them():
    found = policy.refused(cells("import torch", "def mha(x):\n    y = 1\n    return vars(x)", first=5),
                           assignments.get("attention"))
    assert str(found["mha"][0]).startswith("`vars` (graded cell 6, line 3: reflection")


def test_imports_follow_the_assignment():
    assert not refused("import re\ndef tokenize(s):\n    return re.findall('a', s)", assignment="ngram")
    assert "tokenize" in refused("import re\ndef tokenize(s):\n    return re.findall('a', s)", assignment="attention")
    assert "f" in refused("import torch\ndef f(x):\n    return torch.tanh(x)", assignment="backprop")
    assert not refused("import torch\ndef f(x):\n    return torch.tanh(x)", assignment="rnn_lm")
    for assignment in assignments.available():
        allowed = policy.allowed_imports(assignment)
        assert "autograder" not in allowed and policy.BASE_IMPORTS <= allowed
        assert ("torch" in allowed) == assignment.uses_torch
    # the plain helpers students reach for are ordinary code everywhere; threads are not
    helpers = ("import copy\nimport bisect\nimport heapq\nimport time\nimport random\nfrom tqdm.auto import tqdm\n"
               "def f(xs):\n    started = time.time()\n    for x in tqdm(copy.deepcopy(xs), leave=False):\n"
               "        heapq.heappush(xs, x)\n    return bisect.bisect_right(sorted(xs), random.random()), started\n")
    helpers += ("import statistics\nimport contextlib\n"
                "def mean_loss(losses, quiet=True):\n    with contextlib.nullcontext() if quiet else contextlib.suppress():\n"
                "        return statistics.fmean(losses), statistics.median(losses)\n")
    for assignment in assignments.available():
        assert not refused(helpers, assignment=assignment.id), assignment.id
    assert "f" in refused("import queue\ndef f():\n    return queue.Queue()", assignment="rnn_lm")
    assert "f" in refused("import threading\ndef f():\n    return threading.Thread()", assignment="rnn_lm")


def test_ordinary_python_is_inside_the_subset():
    found = refused(
        "from __future__ import annotations\nimport math\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
        "from collections import Counter, defaultdict\nfrom dataclasses import dataclass, field\n"
        "@dataclass\nclass Config:\n    d: int = 4\n    names: list = field(default_factory=list)\n"
        "    def __post_init__(self):\n        self.h = getattr(self, 'd', 1) // 2\n"
        "class Block(nn.Module):\n    def __init__(self, d, act=F.gelu):\n        super().__init__()\n"
        "        self.lstm = nn.Linear(d, d)\n        self.act = act\n        self._cache = None\n"
        "    def forward(self, x):\n        assert isinstance(x, torch.Tensor), type(x)\n"
        "        return self.act(self.lstm(x)) * math.sqrt(x.size(-1))\n"
        "    def __len__(self):\n        return 1\n"
        "def table(words):\n    counts = defaultdict(Counter)\n    for a, b in zip(words, words[1:]):\n"
        "        counts[a][b] += 1\n    best = max(counts, key=counts.__getitem__) if counts else None\n"
        "    return {k: dict(v) for k, v in counts.items()}, best\n"
        "def gen(x):\n    yield from (y for y in x)\n"
        "with torch.no_grad():\n    WEIGHTS = torch.zeros(3, dtype=torch.float64)\n"
        "if __name__ == '__main__':\n    print(table(['a', 'b']))\n")
    assert found == {}


# Ordinary Python the policy once refused (blind-spot hunt B5-B9): each is inside the subset, and does what it
# says. name: (graded cell, an expression run after it, its value)
OWN_OBJECTS = {
    "an abstract base class": (
        "from abc import ABC, abstractmethod\nclass LanguageModel(ABC):\n    @abstractmethod\n"
        "    def prob(self, word, context):\n        ...\nclass Uniform(LanguageModel):\n"
        "    def prob(self, word, context):\n        return 0.5\n", "Uniform().prob('a', ())", 0.5),
    "vars(self) in a __repr__": (
        "class NGramLM:\n    def __init__(self, n):\n        self.n = n\n    def __repr__(self):\n"
        "        return f'NGramLM({vars(self)})'\n", "repr(NGramLM(2))", "NGramLM({'n': 2})"),
    "self.__dict__ read in a __repr__": (
        "class NGramLM:\n    def __init__(self, n):\n        self.n, self.counts = n, {}\n    def __repr__(self):\n"
        "        shown = {k: v for k, v in self.__dict__.items() if k != 'counts'}\n"
        "        return f'NGramLM({shown}, {len(vars(self))}, {sorted(self.__dict__)}, {\"n\" in self.__dict__})'\n",
        "repr(NGramLM(2))", "NGramLM({'n': 2}, 2, ['counts', 'n'], True)"),
    "object.__setattr__ in a frozen dataclass's __post_init__": (
        "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Mixture:\n    weights: tuple\n"
        "    def __post_init__(self):\n        total = sum(self.weights)\n"
        "        object.__setattr__(self, 'weights', tuple(w / total for w in self.weights))\n",
        "Mixture((1.0, 3.0)).weights", (0.25, 0.75)),
    "setattr over dict(n=n, ...).items()": (
        "class NGramLM:\n    def __init__(self, n, vocab, k=0.0):\n"
        "        for name, value in dict(n=n, vocab=vocab, k=k).items():\n            setattr(self, name, value)\n",
        "vars(NGramLM(2, {'a'}))", {"n": 2, "vocab": {"a"}, "k": 0.0}),
    # the operator, conversion and copy protocols (the fourth round's hunt: each was refused as a dunder)
    "a micrograd-style Value with __rpow__, __itruediv__ and __round__": (
        "class Value:\n    def __init__(self, data):\n        self.data = data\n    def __rpow__(self, base):\n"
        "        return Value(base ** self.data)\n    def __itruediv__(self, other):\n        self.data /= other\n"
        "        return self\n    def __round__(self, ndigits=None):\n        return round(self.data, ndigits)\n"
        "def halved_power(x):\n    v = 2 ** Value(x)\n    v /= 2\n    return round(v, 3)\n",
        "halved_power(3)", 4),
    "a mask class with __and__, __or__ and __xor__": (
        "class Mask:\n    def __init__(self, bits):\n        self.bits = bits\n"
        "    def __and__(self, other):\n        return Mask(self.bits & other.bits)\n"
        "    def __or__(self, other):\n        return Mask(self.bits | other.bits)\n"
        "    def __xor__(self, other):\n        return Mask(self.bits ^ other.bits)\n",
        "[(Mask(0b1100) & Mask(0b1010)).bits, (Mask(0b1100) | Mask(0b1010)).bits, (Mask(0b1100) ^ Mask(0b1010)).bits]",
        [0b1000, 0b1110, 0b0110]),
    "__copy__ and __deepcopy__ of a model": (
        "import copy\nclass NGramLM:\n    def __init__(self):\n        self.counts = {('a',): [1]}\n"
        "    def __copy__(self):\n        new = NGramLM()\n        new.counts = dict(self.counts)\n        return new\n"
        "    def __deepcopy__(self, memo):\n        new = NGramLM()\n"
        "        new.counts = copy.deepcopy(self.counts, memo)\n        return new\n"
        "def copies():\n    lm = NGramLM()\n    shallow, deep = copy.copy(lm), copy.deepcopy(lm)\n"
        "    return shallow.counts[('a',)] is lm.counts[('a',)], deep.counts[('a',)] is lm.counts[('a',)]\n",
        "copies()", (True, False)),
    "__array__, __floor__ and __ceil__ of a wrapper": (
        "import math\nimport numpy as np\nclass Grads:\n    def __init__(self, values):\n        self.values = values\n"
        "    def __array__(self, dtype=None, copy=None):\n        return np.asarray(self.values, dtype=dtype)\n"
        "    def __floor__(self):\n        return math.floor(sum(self.values))\n"
        "    def __ceil__(self):\n        return math.ceil(sum(self.values))\n",
        "[np.asarray(Grads([0.5, 1.0])).tolist(), math.floor(Grads([0.5, 1.0])), math.ceil(Grads([0.5, 1.0]))]",
        [[0.5, 1.0], 1, 2]),
    "setattr over a dict literal's items": (
        "class NGramLM:\n    def __init__(self, n, vocab):\n"
        "        for name, value in {'n': n, 'vocab': vocab}.items():\n            setattr(self, name, value)\n",
        "vars(NGramLM(2, {'a'}))", {"n": 2, "vocab": {"a"}}),
}


@pytest.mark.parametrize("case", sorted(OWN_OBJECTS))
def test_reading_and_setting_the_students_own_attributes_is_ordinary_python(case):
    source, expression, value = OWN_OBJECTS[case]
    for assignment in assignments.available():
        assert refused(source, assignment=assignment.id) == {}, assignment.id
    names = {}
    exec(compile(source, "cell", "exec"), names)  # noqa: S102 - the test's own text
    assert eval(expression, names) == value  # noqa: S307 - the test's own text


def test_every_starter_states_the_rules_with_its_imports():
    for assignment in assignments.available():
        intro = assignment.source_path.read_text().split("\n# %%", 1)[0]
        text = " ".join(line.lstrip("# ") for line in intro.splitlines())
        assert "plain Python the grader can read" in text, assignment.id
        assert "not attempting the question" in text, assignment.id
        missing = [m for m in policy.allowed_imports(assignment) - {policy.FUTURE} if f"`{m}`" not in text]
        assert not missing, (assignment.id, missing)
        assert build.notebook(assignment, "starter").count("plain Python the grader can read") == 1



# Text rules relaxed because the worker's guard (autograder/sandbox/guard.py) refuses the same thing
# where it runs: name -> (graded cell, its function that must be refused when called).
GUARDED = {
    "typing.get_type_hints evaluating a string annotation": (
        "import typing\nclass C:\n    x: \"__import__('os').getcwd()\"\n    y: typing.ForwardRef('len([])')\n"
        "def hints():\n    return typing.get_type_hints(C)\n", "hints"),
}


@pytest.mark.parametrize("case", sorted(GUARDED))
def test_what_the_text_rules_let_the_guard_refuse_is_refused_where_it_runs(case):
    import subprocess
    import sys
    source, name = GUARDED[case]
    assert refused(source, assignment="ngram") == {}
    probe = ("import sys\nfrom autograder.sandbox import guard\n"
             f"source = {source!r}\nns = {{'__name__': guard.SUBMISSION}}\n"
             "guard.install(ns, (source,), {'family': None, 'exact': [], 'imports': ['typing'], 'deny': []})\n"
             "exec(compile(source, '<graded cell 1>', 'exec'), ns)\n"
             f"try:\n    ns[{name!r}]()\nexcept PermissionError as err:\n    print('refused:', err)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.startswith("refused: graded code may not run code made at run time"), done.stdout + done.stderr


def _run_guarded(source: str, calls: list[str], imports: list[str]) -> str:
    """What each call of the cell's functions gives under the worker's guard, in a fresh interpreter
    (nothing imported before the guard that graded code's imports would load), one line each."""
    import subprocess
    import sys
    probe = ("from autograder.sandbox import guard\n"
             f"source = {source!r}\nns = {{'__name__': guard.SUBMISSION}}\n"
             f"guard.install(ns, (source,), {{'family': None, 'exact': [], 'imports': {imports!r}, 'deny': []}})\n"
             "exec(compile(source, '<graded cell 1>', 'exec'), ns)\n"
             f"for name in {calls!r}:\n    try:\n        print(name, 'gave', ns[name]())\n"
             "    except PermissionError as err:\n        print(name, 'refused:', err)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    return done.stdout + done.stderr


def test_tqdm_auto_loads_under_the_guard_and_code_swaps_stay_refused():
    """`from tqdm.auto import tqdm` imports asyncio, whose `types.coroutine` flags its own functions' code
    while it is imported; the guard once refused that, and the cell holding the import lost every name
    after it (the numpy assignments, where torch has not imported asyncio first). Graded code still may not
    make a code object or give a function other code, a library's function from a library's code included."""
    source = ("from tqdm.auto import tqdm, trange\nimport copy\n"
              "def progress():\n    return sum(tqdm(range(3), disable=True)) + sum(trange(2, disable=True))\n"
              "def swap_library_code():\n    copy.copy.__code__ = copy.deepcopy.__code__\n"
              "def flag_own_code():\n    def gen():\n        yield 1\n"
              "    gen.__code__ = gen.__code__.replace(co_flags=gen.__code__.co_flags | 0x100)\n"
              "def make_code():\n    return progress.__code__.replace(co_name='other')\n")
    out = _run_guarded(source, ["progress", "swap_library_code", "flag_own_code", "make_code"],
                       ["tqdm", "copy", "__future__"])
    assert "progress gave 4" in out, out
    for name, why in (("swap_library_code", "may not change a library's functions"),
                      ("flag_own_code", "may not run code made at run time"),
                      ("make_code", "may not run code made at run time")):
        assert f"{name} refused: graded code {why}" in out, out


def test_a_notebook_with_lines_outside_the_subset_is_graded_around_them(tmp_path):
    """End to end: lines outside the subset that would run at load are not run and named in the notes;
    only the checks of the name one of them changes are withheld, every other check is graded."""
    from autograder.grading import runner
    from tests.helpers import edited_solution
    text = edited_solution("attention", [
        ("def bilinear_attention(h_dec, H_enc, W):\n",
         "import os\nprint(os.getcwd())\nbanner = eval('1')\n\n\ndef bilinear_attention(h_dec, H_enc, W):\n"),
        ('    return torch.einsum("bs,bsd->bd", weights, H_enc), weights\n',
         '    return torch.einsum("bs,bsd->bd", weights, H_enc), weights\n\n\n'
         "bilinear_attention.__dict__['x'] = 1\n")])
    path = tmp_path / "submission.py"
    path.write_text(text)
    patch = "bilinear_attention.__dict__['x'] = 1"
    line = {what: text.split("\n").index(what) + 1 for what in ("import os", "banner = eval('1')", patch)}
    report = runner.grade(path, assignments.get("attention"), device="cpu", questions={"1"})
    results = {r.name: r for r in report.results}
    assert results["dot_product_hidden"].passed, results["dot_product_hidden"].output
    withheld_checks = {name for name, r in results.items() if not r.passed}
    assert withheld_checks and all("Not graded: `bilinear_attention`" in results[n].output for n in withheld_checks)
    assert f"line {line[patch]}: double-underscore" in results["bilinear_hidden"].output
    notes = " ".join(report.notes)
    for what in line.values():
        assert f"(graded cell 1, line {what}: " in notes


def test_a_banned_routine_called_at_load_is_not_run_and_the_rest_of_its_cell_loads():
    """The worker's guard makes a banned routine raise; called at load, it would stop the rest of its
    cell. The statement is not run instead, and costs only the names it binds."""
    source = ("import torch\nimport torch.nn.functional as F\nCHECK = F.layer_norm(torch.ones(2, 3), (3,))\n"
              "def rms(x):\n    return x / x.pow(2).mean(-1, keepdim=True).sqrt()\nprint(rms(torch.ones(3)))\n")
    found = refused(source, assignment="transformer")
    assert set(found) == {"CHECK", policy.NOT_RUN}
    assert str(found["CHECK"][0]).startswith("`F.layer_norm` (graded cell 1, line 3: calls a library routine")
    (cell,) = policy.loadable(cells(source), assignments.get("transformer"), found)
    assert cell.source.split("\n")[2].startswith("pass  # not run") and "def rms(x):" in cell.source
    assert refused(source.replace("CHECK = F.layer_norm(", "CHECK = F.softmax("), assignment="transformer") == {}


def test_statistics_and_contextlib_run_under_the_guard():
    """Base imports since the fourth round of correct styles: a mean of losses by `statistics`, a context chosen
    with `contextlib.nullcontext()` (statistics imports fractions and decimal as it loads)."""
    source = ("import statistics\nimport contextlib\n"
              "def summary():\n    with contextlib.nullcontext():\n"
              "        return statistics.fmean([1.0, 2.0, 4.0]), statistics.median([3, 1, 2]), statistics.stdev([1.0, 3.0])\n")
    out = _run_guarded(source, ["summary"], sorted(policy.BASE_IMPORTS | {policy.FUTURE}))
    import math
    expected = (7 / 3, 2, math.sqrt(2))  # the mean of 1, 2, 4; the median of 3, 1, 2; the sample sd of 1, 3
    assert f"summary gave {expected}" in out, out
