"""The mutation operators `lmgrade mutants` applies to a reference's graded functions.

Why two sources: cosmic-ray's operators (arithmetic, comparisons, booleans, numbers, loops) are the
classic ones, maintained and tested by a mutation-testing project, and work on parso trees, which
keep comments and formatting, so a survivor reads as a one-line diff. They know nothing of tensors,
where the commonest student faults are an axis off by one, a transpose forgotten, a window shifted,
a graph cut or a reduction that keeps or drops an axis. Those are written here in cosmic-ray's own
`Operator` interface, so both kinds are found and applied by one visitor (`mutants.py`).
"""
from __future__ import annotations

import parso
from cosmic_ray.operators.operator import Example, Operator
from cosmic_ray.operators.provider import OperatorProvider

# cosmic-ray's operators kept: those that make code a student could plausibly write. Bit and shift
# operators on float tensors only make mutants that crash on the first call, which inflate a score.
_ARITHMETIC = ("Add", "Sub", "Mul", "Div", "FloorDiv", "Pow")
_KEPT_PREFIXES = tuple(f"ReplaceBinaryOperator_{a}_{b}" for a in _ARITHMETIC for b in _ARITHMETIC if a != b) + (
    "ReplaceComparisonOperator_", "ReplaceUnaryOperator_", "NumberReplacer", "ReplaceTrueWithFalse",
    "ReplaceFalseWithTrue", "ReplaceAndWithOr", "ReplaceOrWithAnd", "AddNot", "ZeroIterationForLoop",
    "ReplaceBreakWithContinue", "ReplaceContinueWithBreak")

# Methods and functions whose first integer argument (or `dim=`/`axis=`) names an axis.
AXIS_METHODS = frozenset({"sum", "mean", "softmax", "log_softmax", "logsumexp", "cumsum", "cumprod", "argmax",
                          "argmin", "max", "min", "amax", "amin", "unsqueeze", "squeeze", "norm", "std", "var",
                          "prod", "all", "any", "size"})
REDUCTIONS = frozenset({"sum", "mean", "logsumexp", "amax", "amin", "max", "min", "norm", "std", "var", "prod",
                        "all", "any"})


def cosmic_ray_operators() -> dict[str, type]:
    """cosmic-ray's operators this tool applies, by name."""
    provider = OperatorProvider()
    return {name: provider[name] for name in provider if name.startswith(_KEPT_PREFIXES)}


def _int_value(node) -> int | None:
    """The integer a literal like `2` or `-1` stands for, else None."""
    text = node.get_code(include_prefix=False).strip()
    try:
        value = int(text, 0)
    except ValueError:
        return None
    return value


def _prefix(node) -> str:
    """The whitespace and comments before a node (parso keeps them on its first leaf)."""
    return node.get_first_leaf().prefix


def _expression(code: str, prefix: str):
    """A parso node for `code`, carrying `prefix` (the whitespace before the node it replaces)."""
    node = parso.parse(code).children[0]
    if node.type == "simple_stmt":
        node = node.children[0]
    node.get_first_leaf().prefix = prefix
    return node


def _replace(old, new) -> None:
    """Put `new` where `old` is in its parent."""
    parent = old.parent
    parent.children[parent.children.index(old)] = new
    new.parent = parent


def _other_axis(value: int) -> int:
    """The neighbouring axis: 0 <-> 1, -1 -> -2, 2 -> 1, -2 -> -1."""
    if value == 0:
        return 1
    if value == -1:
        return -2
    return value - 1 if value > 0 else value + 1


def _call_arguments(trailer) -> list:
    """The argument nodes of a call trailer `( ... )`."""
    if len(trailer.children) < 3:
        return []
    inner = trailer.children[1]
    if inner.type == "arglist":
        return [c for c in inner.children if c.type != "operator"]
    return [inner]


def _method_calls(node):
    """(name leaf, call trailer) for every `.name(...)` step of an atom_expr `node`."""
    if node.type not in ("atom_expr", "power"):
        return
    steps = node.children
    for i in range(len(steps) - 1):
        first, second = steps[i], steps[i + 1]
        name = None
        if first.type == "trailer" and first.children[0].type == "operator" and first.children[0].value == ".":
            name = first.children[1]
        elif i == 0 and first.type == "name":
            name = first
        if name is not None and second.type == "trailer" and second.children[0].value == "(":
            yield name, second


class ShiftAxis(Operator):
    """An axis argument moved to its neighbour: `softmax(dim=-1)` -> `softmax(dim=-2)`, `x.sum(1)` -> `x.sum(0)`."""

    def _targets(self, node) -> list:
        if node.type == "argument" and len(node.children) == 3 and node.children[0].type == "name" \
                and node.children[0].value in ("dim", "axis") and _int_value(node.children[2]) is not None:
            return [node.children[2]]
        return [arg for name, call in _method_calls(node) if name.value in AXIS_METHODS
                for arg in _call_arguments(call) if arg.type != "argument" and _int_value(arg) is not None]

    def mutation_positions(self, node):
        for target in self._targets(node):
            yield (target.start_pos, target.end_pos)

    def mutate(self, node, index):
        target = self._targets(node)[index]
        _replace(target, _expression(str(_other_axis(_int_value(target))), _prefix(target)))
        return node

    @classmethod
    def examples(cls):
        return (Example("y = x.softmax(dim=-1)", "y = x.softmax(dim=-2)"), Example("y = x.sum(1)", "y = x.sum(0)"))


class DropTranspose(Operator):
    """A transpose forgotten: `k.transpose(-2, -1)`, `k.mT`, `k.T`, `k.t()` -> `k`."""

    def _spans(self, node) -> list[tuple[int, int]]:
        """Index ranges [i, j) of node.children that make one transpose step."""
        if node.type not in ("atom_expr", "power"):
            return []
        steps, spans = node.children, []
        for i in range(1, len(steps)):
            step = steps[i]
            if step.type != "trailer" or step.children[0].value != "." or len(step.children) != 2:
                continue
            name = step.children[1].value
            if name in ("T", "mT"):
                spans.append((i, i + 1))
            elif name in ("transpose", "t", "swapaxes") and i + 1 < len(steps) and steps[i + 1].type == "trailer" \
                    and steps[i + 1].children[0].value == "(":
                spans.append((i, i + 2))
        return spans

    def mutation_positions(self, node):
        for i, j in self._spans(node):
            yield (node.children[i].start_pos, node.children[j - 1].end_pos)

    def mutate(self, node, index):
        i, j = self._spans(node)[index]
        node.children[i:j] = []
        if len(node.children) == 1:  # only the base is left: the node itself is now just that
            return node.children[0]
        return node

    @classmethod
    def examples(cls):
        return (Example("s = q @ k.transpose(-2, -1)", "s = q @ k"), Example("s = q @ k.mT", "s = q @ k"))


class ShiftSlice(Operator):
    """A window off by one: `x[:, :-1]` -> `x[:, :-2]`, `x[1:]` -> `x[:-1]` (both bounds move together)."""

    def _bounds(self, node) -> tuple | None:
        """(lower, upper) integer bounds of a one-colon slice with literal bounds (None: absent)."""
        if node.type != "subscript":
            return None
        parts = node.children
        colons = [i for i, c in enumerate(parts) if c.type == "operator" and c.value == ":"]
        if len(colons) != 1:  # a step, or no slice
            return None
        lower = parts[:colons[0]]
        upper = parts[colons[0] + 1:]
        if len(lower) > 1 or len(upper) > 1:
            return None
        bounds = tuple(_int_value(side[0]) if side else None for side in (lower, upper))
        if any(side and value is None for side, value in zip((lower, upper), bounds)) or bounds == (None, None):
            return None
        return bounds

    def _shifted(self, node) -> list[str]:
        """The slice moved one step left, and (when it ends before the end) one step right."""
        bounds = self._bounds(node)
        if bounds is None:
            return []
        lo, hi = bounds
        texts = []
        for shift in (-1, +1):
            if hi is None and shift > 0 or hi is not None and hi > 0 and shift > 0 and lo is None:
                continue  # past the end, or a prefix that a step right only lengthens
            new_lo = None if (lo is None and shift < 0) else (lo or 0) + shift
            new_hi = -1 if hi is None else hi + shift
            new_lo = None if new_lo == 0 else new_lo
            new_hi = None if (new_hi == 0 and (hi is None or hi < 0)) else new_hi
            texts.append(f"{'' if new_lo is None else new_lo}:{'' if new_hi is None else new_hi}")
        return texts

    def mutation_positions(self, node):
        for _ in self._shifted(node):
            yield (node.start_pos, node.end_pos)

    def mutate(self, node, index):
        text = self._shifted(node)[index]
        replacement = _expression(f"x[{text}]", "").children[1].children[1]
        replacement.get_first_leaf().prefix = _prefix(node)
        return replacement

    @classmethod
    def examples(cls):
        return (Example("y = x[:, :-1]", "y = x[:, :-2]"), Example("y = x[1:]", "y = x[:-1]"))


class AddDetach(Operator):
    """A graph cut: `h = torch.tanh(a)` -> `h = (torch.tanh(a)).detach()`; gradients stop there."""

    MARKS = ("torch.", "F.", "@", ".matmul(", ".exp(", ".tanh(", ".softmax(")

    def mutation_positions(self, node):
        if self._value(node) is not None:
            yield (node.start_pos, node.end_pos)

    def _value(self, node):
        if node.type == "expr_stmt" and len(node.children) == 3 and node.children[1].type == "operator" \
                and node.children[1].value == "=":
            value = node.children[2]
        elif node.type == "return_stmt" and len(node.children) == 2:
            value = node.children[1]
        else:
            return None
        code = value.get_code(include_prefix=False)
        if value.type in ("testlist_star_expr", "testlist", "exprlist") or "," in code.split("(")[0]:
            return None  # a tuple: `.detach()` would not apply
        return value if any(mark in code for mark in self.MARKS) else None

    def mutate(self, node, index):
        value = self._value(node)
        _replace(value, _expression(f"({value.get_code(include_prefix=False)}).detach()", _prefix(value)))
        return node

    @classmethod
    def examples(cls):
        return (Example("h = torch.tanh(a)", "h = (torch.tanh(a)).detach()"),)


class FlipKeepdim(Operator):
    """A reduction that keeps or drops its axis the other way: `keepdim=True` <-> `keepdim=False`,
    and `x.amax(dim=-1)` -> `x.amax(dim=-1, keepdim=True)`."""

    def _targets(self, node) -> list:
        if node.type == "argument" and len(node.children) == 3 and node.children[0].type == "name" \
                and node.children[0].value in ("keepdim", "keepdims") and node.children[2].type == "keyword":
            return [("flip", node)]
        found = []
        for name, call in _method_calls(node) or ():
            args = _call_arguments(call)
            if name.value in REDUCTIONS and args and not any(
                    a.type == "argument" and a.children[0].type == "name"
                    and a.children[0].value in ("keepdim", "keepdims") for a in args):
                found.append(("add", call))
        return found

    def mutation_positions(self, node):
        for _, target in self._targets(node):
            yield (target.start_pos, target.end_pos)

    def mutate(self, node, index):
        kind, target = self._targets(node)[index]
        if kind == "flip":
            value = target.children[2]
            value.value = "False" if value.value == "True" else "True"
            return node
        inside = target.get_code(include_prefix=False)[1:-1]
        _replace(target, _expression(f"f({inside}, keepdim=True)", "").children[1])
        return node

    @classmethod
    def examples(cls):
        return (Example("m = x.amax(dim=-1, keepdim=True)", "m = x.amax(dim=-1, keepdim=False)"),)


class ChangeConstant(Operator):
    """A constant of the kind that hides: an epsilon a thousand times larger (`1e-5` -> `0.01`), a
    masking value a million times smaller (`-1e9` -> `-1000.0`)."""

    def _new(self, node) -> str | None:
        if node.type != "number":
            return None
        try:
            value = float(node.value)
        except ValueError:
            return None
        if 0 < value <= 1e-3:
            return repr(value * 1e3)
        if value >= 1e4:
            return repr(value / 1e6)
        return None

    def mutation_positions(self, node):
        if self._new(node) is not None:
            yield (node.start_pos, node.end_pos)

    def mutate(self, node, index):
        return parso.python.tree.Number(self._new(node), node.start_pos, _prefix(node))

    @classmethod
    def examples(cls):
        return (Example("eps = 1e-5", "eps = 0.01"), Example("m = -1e9", "m = -1000.0"))


TENSOR_OPERATORS = {cls.__name__: cls for cls in (ShiftAxis, DropTranspose, ShiftSlice, AddDetach, FlipKeepdim,
                                                   ChangeConstant)}


def all_operators() -> dict[str, type]:
    """Every operator, tensor ones first (they are the ones a sample should not miss)."""
    return {**TENSOR_OPERATORS, **cosmic_ray_operators()}
