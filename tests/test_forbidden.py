"""The static scan for forbidden built-ins: every spelling that reaches a banned routine taints the
names that use it (and only those); the student's own code of the same name, docstrings and the
starter's messages do not."""
import pytest

from autograder import assignments
from autograder.extract import Cell
from autograder.forbidden import tainted_names

BANNED = assignments.get("attention").forbidden
OWN_SDPA = ("import math\nimport torch\n\ndef scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)\n    return w @ v, w\n")


def cells(*sources):
    return [Cell(index=i, number=i + 1, source=s) for i, s in enumerate(sources)]


def tainted(*sources):
    return tainted_names(cells(*sources), BANNED)


# (spelling, graded cells): `mha` must be tainted, `clean` must not.
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


# Code that can rebind any module-level name (globals(), exec, eval) costs every name it could reach.
REBINDS_ANYTHING = {"eval of a literal", "eval of a computed string", "globals() written at the top level"}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_spelling_taints_the_name_that_uses_it_and_nothing_else(spelling):
    found = tainted(SPELLINGS[spelling], "import torch\ndef clean(x):\n    return torch.softmax(x, -1)")
    assert "mha" in found, f"{spelling}: not caught"
    assert ("clean" in found) == (spelling in REBINDS_ANYTHING)


def test_the_use_is_reported_where_it_is():
    found = tainted("def fine(x):\n    return x",
                    "import torch.nn.functional as F\ndef attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)",
                    "class MHA:\n    def forward(self, x):\n        return attend(x, x, x)")
    assert set(found) == {"attend", "MHA"}
    assert str(found["MHA"][0]) == "`scaled_dot_product_attention` (graded cell 2, line 3)"
    computed = tainted("import torch.nn.functional as F\ndef mha(x, key):\n    return vars(F)[key](x)")
    assert "vars(F)" in str(computed["mha"][0]) and "cannot read" in str(computed["mha"][0])


def test_own_code_docstrings_and_exception_messages_are_not_uses():
    found = tainted(
        OWN_SDPA.replace("    w = ", '    """Unlike F.scaled_dot_product_attention, written by hand."""\n    w = '),
        '"""Cell docstring: no nn.MultiheadAttention here."""\nimport torch\n'
        "class MHA:\n    '''Uses my scaled_dot_product_attention, not nn.Transformer.'''\n"
        "    def forward(self, x):\n        '''Docstring.'''\n        return scaled_dot_product_attention(x, x, x)\n"
        "    def backward(self):\n        raise NotImplementedError('MHA.backward: scaled_dot_product_attention')\n",
        "from torch.nn.functional import softmax\nimport torch.nn.functional as F\n"
        "def scores(x):\n    return getattr(torch, 'float64'), F.softmax(x, -1), softmax(x, -1)")
    assert found == {}


def test_messages_naming_the_students_own_function_are_text():
    found = tainted(
        "import torch\nimport warnings\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    assert q.dim() >= 2, 'scaled_dot_product_attention needs q of at least 2 dims'\n"
        "    if q.size(-1) != k.size(-1):\n"
        "        raise ValueError(f'scaled_dot_product_attention: d_k {q.size(-1)} != {k.size(-1)}')\n"
        "    if mask is None:\n        warnings.warn('scaled_dot_product_attention without a mask')\n"
        "    w = torch.softmax(q @ k.transpose(-2, -1), -1)\n    return w @ v, w\n",
        "class MHA(torch.nn.Module):\n    def forward(self, x):\n        self.eval()\n"
        "        f = torch.compile(scaled_dot_product_attention)\n        return f(x, x, x)[0]")
    assert found == {}


def test_a_name_in_an_ordinary_string_counts_even_without_a_lookup():
    found = tainted("def mha(x):\n    label = 'not nn.MultiheadAttention'\n    return x, label",
                    "def other(x):\n    print(f'value {getattr(x, \"scaled_dot_product_attention\")}')\n    return x",
                    "def fine(x):\n    return x")
    assert set(found) == {"mha", "other"}


def test_a_word_inside_a_longer_identifier_is_not_the_banned_name():
    found = tainted("def mha(x):\n    key = 'my_scaled_dot_product_attention_v2'\n    return x",
                    "def other(x):\n    return 'Transformers are fun' and x")
    assert found == {}


def test_the_staff_solution_and_the_starter_are_clean():
    from autograder import extract
    attention = assignments.get("attention")
    for path in (attention.reference_path, attention.starter_path):
        assert tainted_names(extract.read_submission(path).cells, BANNED) == {}, path


def test_aten_names_of_the_builtin_kernels_are_banned():
    import torch
    aten = {n for n in dir(torch.ops.aten) if "attention" in n and not n.endswith("_backward") or "multi_head" in n}
    assert aten <= BANNED, sorted(aten - BANNED)
