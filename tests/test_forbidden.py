"""Forbidden built-ins are found by names resolved as Python resolves them: a name or attribute
chain that reaches a banned routine through an import taints the names that use it (and only
those); the student's own names, locals and strings do not. Spellings that hide the routine from
the grader (reflection, run-time code, modules as values) are refused by the policy instead
(tests/test_policy.py): either way, none of them gains a point."""
import pytest

from autograder.authoring import assignments
from autograder.sandbox import policy
from autograder.sandbox.extract import Cell
from autograder.sandbox.forbidden import tainted_names

ATTENTION = assignments.get("attention")
RNN_LM = assignments.get("rnn_lm")
OWN_SDPA = ("import math\nimport torch\n\ndef scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)\n    return w @ v, w\n")
CLEAN = "import torch\ndef clean(x):\n    return torch.softmax(x, -1)"


def cells(*sources):
    return [Cell(index=i, number=i + 1, source=s) for i, s in enumerate(sources)]


def tainted(*sources, assignment=ATTENTION):
    return tainted_names(cells(*sources), assignment.forbidden)


def withheld(*sources, assignment=ATTENTION) -> set[str]:
    """The names whose checks get no points, as the runner decides: a banned use or a refused construct."""
    found = set(tainted(*sources, assignment=assignment))
    refused = policy.refused(cells(*sources), assignment)
    return found | set(refused) - {policy.NOT_RUN}


# (spelling, graded cells): `mha` must gain nothing, `clean` (in another cell) must keep its points.
SPELLINGS = {
    "attribute": "import torch.nn.functional as F\ndef mha(x):\n    return F.scaled_dot_product_attention(x, x, x)",
    "alias module": "import torch.nn.functional as G\ndef mha(x):\n    return G.scaled_dot_product_attention(x, x, x)",
    "alias of the routine": ("import torch.nn.functional as F\nsdpa = F.scaled_dot_product_attention\n"
                             "def mha(x):\n    return sdpa(x, x, x)"),
    "from torch.nn import functional": ("from torch.nn import functional\ndef mha(x):\n"
                                        "    return functional.scaled_dot_product_attention(x, x, x)"),
    "import by name under another name": ("from torch.nn.functional import scaled_dot_product_attention as attend\n"
                                          "def mha(x):\n    return attend(x, x, x)"),
    "star import then the bare name": ("from torch.nn.functional import *\ndef mha(x):\n"
                                       "    return scaled_dot_product_attention(x, x, x)"),
    "star import after the student's own definition": (
        OWN_SDPA + "from torch.nn.functional import *\ndef mha(x):\n    return scaled_dot_product_attention(x, x, x)"),
    "vars(F)[literal]": ('import torch.nn.functional as F\ndef mha(x):\n'
                         '    return vars(F)["scaled_dot_product_attention"](x, x, x)'),
    "vars(F)[computed]": ("import torch.nn.functional as F\ndef mha(x, key):\n    return vars(F)[key](x, x, x)"),
    "F.__dict__[literal]": ('import torch.nn.functional as F\ndef mha(x):\n'
                            '    return F.__dict__["scaled_dot_product_attention"](x, x, x)'),
    "torch.nn.functional.__dict__.get(computed)": (
        "import torch\ndef mha(x, k):\n    return torch.nn.functional.__dict__.get(k)(x, x, x)"),
    "getattr with a constant": ("import torch\ndef mha(x):\n"
                                "    return getattr(torch.nn.functional, 'scaled_dot_product_attention')(x, x, x)"),
    "getattr with a constant held in a global": (
        "import torch\nNAME = 'scaled_dot_product_attention'\ndef mha(x):\n"
        "    return getattr(torch.nn.functional, NAME)(x, x, x)"),
    "getattr with a computed name": ("import torch.nn.functional as F\ndef mha(x, parts):\n"
                                     "    return getattr(F, '_'.join(parts))(x, x, x)"),
    "string concatenation": ('import torch.nn.functional as F\ndef mha(x):\n'
                             '    return getattr(F, "scaled_dot_" + "product_attention")(x, x, x)'),
    "f-string of constants": ('import torch.nn.functional as F\ndef mha(x):\n'
                              '    return getattr(F, f"scaled_dot_{\'product\'}_attention")(x, x, x)'),
    "join of constants": ('import torch\ndef mha(x):\n    name = "_".join(["scaled", "dot", "product", "attention"])\n'
                          '    return torch.ops.aten.__getattr__(name)(x, x, x)'),
    "reversed literal": ('import operator, torch\ndef mha(x):\n'
                         '    f = operator.attrgetter("noitnetta_tcudorp_tod_delacs"[::-1])\n'
                         '    return f(torch.nn.functional)(x, x, x)'),
    "pieces in separate variables": ('import torch.nn.functional as F\nA = "scaled_dot"\nB = "_product_attention"\n'
                                     "def mha(x):\n    return F.__getattribute__(A + B)(x, x, x)"),
    "bytes decoded": ('import torch.nn.functional as F\ndef mha(x):\n'
                      '    return F.__getattribute__(b"scaled_dot_product_attention".decode())(x, x, x)'),
    "a computed string reached through bytes and codecs": (
        "import codecs\nimport torch.nn.functional as F\ndef mha(x):\n"
        "    return getattr(F, codecs.decode('fpnyrq_qbg_cebqhpg_nggragvba', 'rot13'))(x, x, x)"),
    "operator.attrgetter with a literal": ('import operator\nimport torch\ndef mha(x):\n'
                                           '    get = operator.attrgetter("nn.functional.scaled_dot_product_attention")\n'
                                           '    return get(torch)(x, x, x)'),
    "importlib.import_module": ('import importlib\ndef mha(x):\n    m = importlib.import_module("torch.nn.functional")\n'
                                "    return m.scaled_dot_product_attention(x, x, x)"),
    "import_module of a computed name": ("import importlib\ndef mha(x, where, what):\n"
                                         "    return vars(importlib.import_module(where))[what](x, x, x)"),
    "torch.ops.aten.scaled_dot_product_attention": (
        "import torch\ndef mha(x):\n    return torch.ops.aten.scaled_dot_product_attention(x, x, x)"),
    "torch.ops.aten flash kernel": (
        "import torch\ndef mha(x):\n    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(x, x, x)[0]"),
    "torch._native_multi_head_attention": (
        "import torch\ndef mha(x, *w):\n    return torch._native_multi_head_attention(x, x, x, 4, 2, *w)[0]"),
    "nn.MultiheadAttention built in a helper": (
        "from torch import nn\ndef make(d):\n    return nn.MultiheadAttention(d, 2)\n"
        "class mha(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.inner = make(4)"),
    "eval of a literal": ("import torch\ndef mha(x):\n    return eval('torch.nn.functional.scaled_dot_product_attention')(x, x, x)"),
    "eval of a computed string": ("import torch\ndef mha(x, code):\n    return eval(code)(x, x, x)"),
    "getattr passed as a value": ("import functools, torch\ndef mha(x, path):\n"
                                  "    return functools.reduce(getattr, path, torch)(x, x, x)"),
    "global rebound inside a function": (
        "import torch.nn.functional as F\ndef setup():\n    global attend\n    attend = F.scaled_dot_product_attention\n"
        "attend = None\ndef mha(x):\n    return attend(x, x, x)"),
    "a global list filled by a tainted function": (
        "import torch.nn.functional as F\n_impl = []\ndef setup():\n    _impl.append(F.scaled_dot_product_attention)\n"
        "setup()\ndef mha(x):\n    return _impl[0](x, x, x)"),
    "method patched onto the class from the top level": (
        "import torch.nn.functional as F\nclass mha:\n    def forward(self, x):\n        return x\n"
        "mha.forward = lambda self, x: F.scaled_dot_product_attention(x, x, x)"),
    "globals() written at the top level": (
        "import torch.nn.functional as F\nglobals()['attend'] = getattr(F, 'scaled_dot_product_attention')\n"
        "def mha(x):\n    return attend(x, x, x)"),
    "definition nested in an if at the top level": (
        "import torch.nn.functional as F\nif True:\n    def attend(q, k, v):\n"
        "        return F.scaled_dot_product_attention(q, k, v)\ndef mha(x):\n    return attend(x, x, x)"),
    "a string that is not a docstring": (
        "import torch.nn.functional as F\ndef mha(x):\n    'padding'\n    msg = 'call F.scaled_dot_product_attention'\n"
        "    return getattr(F, msg.split('.')[-1])(x, x, x)"),
}
# Code outside the subset that would run while the cells load (a star import, `globals()` at the top
# level) is not run: it costs the names it could bind, and `mha`, which reads one of them.
NOT_RUN = {"star import then the bare name", "star import after the student's own definition",
           "globals() written at the top level"}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_no_spelling_of_a_banned_routine_gains_anything(spelling):
    lost = withheld(SPELLINGS[spelling], CLEAN)
    assert "mha" in lost, f"{spelling}: not caught"
    refused = policy.refused(cells(SPELLINGS[spelling], CLEAN), ATTENTION)
    not_run = [u for u in refused.get(policy.NOT_RUN, []) if not str(u).endswith("this import was not run)")]
    assert bool(not_run) == (spelling in NOT_RUN), refused
    assert "clean" not in lost


def test_the_use_is_reported_where_it_is():
    found = tainted("def fine(x):\n    return x",
                    "import torch.nn.functional as F\ndef attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)",
                    "class MHA:\n    def forward(self, x):\n        return attend(x, x, x)")
    assert set(found) == {"attend", "MHA"}
    assert str(found["MHA"][0]) == "`scaled_dot_product_attention` (graded cell 2, line 3)"
    aliased = tainted("from torch.nn.functional import scaled_dot_product_attention as sdpa\n"
                      "def mha(x):\n    return sdpa(x, x, x)")
    assert "`sdpa` is `torch.nn.functional.scaled_dot_product_attention`" in str(aliased["mha"][-1])


@pytest.mark.parametrize("source", [
    "import torch\ndef f(lstm, x):\n    return lstm(x)",  # a parameter
    "import torch\ndef f(xs):\n    return [lstm * 2 for lstm in xs]",  # a comprehension variable
    "import torch\ndef f(xs):\n    if (lstm := xs[0]):\n        return lstm",  # a walrus local
    "import torch\ndef lstm(x):\n    return torch.tanh(x)\ndef f(x):\n    return lstm(x)",  # the student's own def
    "import torch\ndef f():\n    lstm = torch.tanh\n    def g(x):\n        return lstm(x)\n    return g",  # a closure
    "from torch import nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.lstm = nn.Linear(3, 4)\n    def forward(self, x):\n        return self.lstm(x)",  # an attribute
    "import torch\nclass M:\n    lstm = 3\n    def f(self):\n        return self.lstm",  # a class attribute
    "import torch\ndef f():\n    try:\n        pass\n    except Exception as gru:\n        return gru",
    "import torch\nf = lambda lstm: lstm + 1",
])
def test_the_students_own_names_are_not_library_routines(source):
    assert tainted(source, assignment=RNN_LM) == {}


@pytest.mark.parametrize("source, names", [
    ("import torch\ndef f(x):\n    return torch.lstm(x)", {"f"}),
    ("import torch.nn.modules.rnn as R\ndef f(x):\n    return R.LSTM(3, 4)", {"f"}),
    ("import torch.nn.functional as F\ndef f(x):\n    return F.torch.lstm(x)", {"f"}),  # torch, reached through F
    ("import torch\ndef f(x):\n    return getattr(torch, 'lstm')(x)", {"f"}),
    ("from torch import lstm\ndef f(x):\n    return lstm(x)", {"lstm", "f"}),
    ("from torch import lstm\ndef f(x):\n    lstm = 3\n    return lstm", {"lstm"}),  # f's `lstm` is its own
    ("import torch\ndef f():\n    global g\n    g = torch.nn.LSTM\ndef h(x):\n    return g(x)", {"f", "g", "h"}),
    ("import torch\nclass M:\n    from torch import lstm\n    def f(self):\n        return 1", {"M"}),
])
def test_names_that_resolve_to_a_banned_routine_are_uses(source, names):
    assert set(tainted(source, assignment=RNN_LM)) == names


def test_own_code_docstrings_and_strings_are_not_uses():
    found = tainted(
        OWN_SDPA.replace("    w = ", '    """Unlike F.scaled_dot_product_attention, written by hand."""\n    w = '),
        '"""Cell docstring: no nn.MultiheadAttention here."""\nimport torch\n'
        "class MHA:\n    '''Uses my scaled_dot_product_attention, not nn.Transformer.'''\n"
        "    def forward(self, x):\n        '''Docstring.'''\n        return scaled_dot_product_attention(x, x, x)\n"
        "    def backward(self):\n        raise NotImplementedError('MHA.backward: scaled_dot_product_attention')\n",
        "from torch.nn.functional import softmax\nimport torch.nn.functional as F\n"
        "def scores(x):\n    return getattr(torch, 'float64'), F.softmax(x, -1), softmax(x, -1)",
        "def mha(x):\n    label = 'not nn.MultiheadAttention'\n    return x, label",
        "def other(x):\n    print(f'value {getattr(x, \"scaled_dot_product_attention\")}')\n    return x",
        "def fine(x):\n    key = 'my_scaled_dot_product_attention_v2'\n    return 'Transformers are fun' and x")
    assert found == {}


def test_the_staff_solution_and_the_starter_are_clean():
    from autograder.sandbox import extract
    for assignment in assignments.available():
        for path in (assignment.reference_path, assignment.starter_path):
            assert tainted_names(extract.read_submission(path).cells, assignment.forbidden) == {}, path


def public_torch_routines() -> set[str]:
    """Every public name torch offers where a student would look (modules left out: a module is not a routine)."""
    import importlib
    import inspect

    import torch
    names = {str(n) for n in dir(torch.ops.aten)}
    for where in ("torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.linalg",
                  "torch.optim", "torch.optim.lr_scheduler", "torch.nn.attention", "torch.nn.attention.flex_attention",
                  "torch.nn.attention.bias", "torch.nn.modules", "torch.nn.utils.rnn"):
        module = importlib.import_module(where)
        names |= {n for n in dir(module) if not inspect.ismodule(getattr(module, n, None))}
    return {n for n in names if not n.startswith("_")}


# what each assignment asks students to write, as the words torch's names for it contain (lower case)
FAMILIES = {
    "attention": ("attention", "attn", "transformer"),
    "rnn_lm": ("lstm", "gru", "rnn"),
    "transformer": ("attention", "attn", "transformer", "layer_norm", "layernorm", "rms_norm", "rmsnorm",
                    "group_norm", "groupnorm", "instance_norm", "instancenorm", "batch_norm", "batchnorm",
                    "local_response_norm", "localresponsenorm", "adam", "clip_grad", "total_norm"),
}
HELPERS = {  # routines students may call in these assignments: never banned
    "attention": ("softmax", "log_softmax", "masked_fill", "tril", "triu", "einsum", "bmm", "baddbmm", "linear",
                  "matmul", "dropout", "where"),
    "rnn_lm": ("pad_sequence", "pack_padded_sequence", "embedding", "linear", "tanh", "sigmoid", "cross_entropy",
               "log_softmax", "clip", "topk"),
    "transformer": ("norm", "vector_norm", "matrix_norm", "normalize", "softmax", "tril", "masked_fill", "gelu", "silu",
                    "embedding", "cross_entropy", "rsqrt", "var_mean", "multinomial", "topk", "cumsum", "clip", "clamp"),
}


@pytest.mark.parametrize("assignment_id", sorted(FAMILIES))
def test_every_public_torch_name_of_a_banned_routine_is_banned(assignment_id):
    """A family, not a list of spellings: `group_norm` with one group is a layer norm, `varlen_attn` an
    attention, `quantized_lstm_cell` an LSTM cell, whatever new name torch gives them next."""
    from autograder.sandbox.forbidden import Banned
    banned = Banned(assignments.get(assignment_id).forbidden)
    names = public_torch_routines()
    family = {n for n in names if any(word in n.lower() for word in FAMILIES[assignment_id])}
    missed = sorted(n for n in family if not banned.routine(n))
    assert len(family) > 10 and missed == [], missed
    assert [n for n in HELPERS[assignment_id] if banned.routine(n)] == []
    assert all(n in names for n in HELPERS[assignment_id] if n not in ("pad_sequence", "pack_padded_sequence"))


def test_a_layer_norm_through_group_norm_or_instance_norm_is_banned_in_transformer():
    transformer = assignments.get("transformer")
    found = tainted(
        "import torch\nimport torch.nn.functional as F\n"
        "def layer_norm_by_groups(x, eps=1e-5):\n    d = x.shape[-1]\n"
        "    return F.group_norm(x.reshape(-1, d, 1), 1, eps=eps).reshape(x.shape)\n"
        "def layer_norm_by_instances(x):\n    return F.instance_norm(x.reshape(-1, 1, x.shape[-1])).reshape(x.shape)\n"
        "def layer_norm_by_aten(x, w, b):\n    return torch.ops.aten.native_group_norm(x, w, b, 1, x.shape[-1], 1, 1, 1e-5)[0]\n"
        "def rms(x):\n    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True) * x.shape[-1] ** 0.5\n",
        assignment=transformer)
    assert {name: [u.api for u in uses] for name, uses in found.items()} == {
        "layer_norm_by_groups": ["group_norm"], "layer_norm_by_instances": ["instance_norm"],
        "layer_norm_by_aten": ["native_group_norm"]}


def test_a_family_leaves_the_module_of_a_helper_alone():
    """`rnn` is a module (torch.nn.utils.rnn), not a recurrent layer: its pad_sequence stays allowed."""
    found = tainted("from torch.nn.utils.rnn import pad_sequence\nimport torch.nn.utils.rnn as rnn_utils\n"
                    "def batch(xs):\n    return pad_sequence(xs), rnn_utils.pack_sequence(xs, enforce_sorted=False)\n",
                    assignment=RNN_LM)
    assert found == {}
