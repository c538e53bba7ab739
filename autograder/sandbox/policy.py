"""Graded code is plain Python the grader can read; anything outside that subset earns nothing.

Why an allowlist: a list of banned spellings loses to the next spelling (a computed `getattr` on a
loop variable, a `__subclasses__()` walk, `f.__globals__`, a marshalled code object,
`pickle.loads`, `__builtins__["getattr"]` all earned points). Here the grader refuses what it
cannot read, so that the names it resolves (autograder.sandbox.forbidden) are all the code can reach.
The subset is about readability, and generous: ordinary Python (`enum`, `operator`, `dataclasses`,
`functools`, a dtype or a device kept in `self.`, `type(self).__name__`, `__constants__`) is inside.

* no reflection: `getattr`/`hasattr` only with a literal name, `setattr`/`getattr`/`hasattr` on a
  method's own `self` with a literal name or a loop over literal names, a dict display's literal keys
  included (`for name, value in dict(n=n, k=k).items()`), and `object.__setattr__(self, "name", v)` in
  a method of the student's own dataclass (a frozen one's `__post_init__`): the same code as
  `self.w_q = ...` written out; `vars(self)` and `self.__dict__` read where a method takes them (in an
  f-string, copied, iterated: plain data, never stored, returned or written); no other `setattr`, no
  `delattr`, `vars`, `globals`, `locals`,
  `dir`, `operator.attrgetter`/`methodcaller`/`setitem`/`delitem`; no double-underscore names
  beyond the data-model methods in `DUNDERS`, read-only `DESCRIBING` ones (`__name__`,
  `__class__`, ...); no frames or code objects, no metaclasses;
* no code made or loaded at run time: `eval`, `exec`, `compile`, `__import__`, the library routes
  from data to code (`torch.load`, `torch.jit`, `np.load`, ...: `RUNTIME_MODULES`,
  `RUNTIME_ROUTINES`), a library's private names (`torch._C`, `torch._VF`, `F._in_projection`), or
  a module a library imported for itself (`torch.os`);
* no patching: nothing is assigned into an imported module or a library class (`torch.x = ...`,
  `nn.Module.__call__ = ...`, `C = nn.Linear; C.forward = ...`, `self.kind = nn.Linear;
  self.kind.forward = ...`), and a module is used only as `module.name` (never stored, passed or
  returned, so no name can hide one). An object's own attributes are its own: `self.dtype =
  torch.float32` makes `self` no alias of a library;
* imports only from `BASE_IMPORTS`, torch where the assignment runs torch, and the assignment's
  own `imports = [...]` in meta.toml; the grader's own `autograder` never.

What a violation costs (`refused`): the top-level names whose code holds it, and every name that
refers to them or is changed by them (forbidden.spread); a check whose `uses` or `needs` holds one
of them is not graded (`withheld`), so refused code never runs in a check. Code that would run while
the cells load (a top-level statement, a class body, a decorator, a default) and holds a violation,
calls refused code, calls a routine the assignment bans (the worker's guard would make it raise and
stop the rest of the cell) or needs a name left unbound is not run at all: `loadable` gives the
worker the cells with that top-level statement replaced by `pass` on the same lines, so the rest of
its cell loads, and the statement costs only the names it binds, changes or uses (a star import or
`globals()`: the names it could bind). A disallowed import is left out of its statement and costs
the names it binds. Nothing at load zeroes a whole notebook; each statement not run is reported
(`NOT_RUN`) with its cell and line. The starter states the rules; getting round them counts as not
attempting the question.

How the two layers share the work: the worker's guard (autograder/sandbox/guard.py: a CPython
audit hook, raising kernels at torch's dispatcher) refuses capabilities where they run, whatever
the spelling. A text rule that only listed one more spelling of such a capability is relaxed where
the guard covers it, and says so where it was (`typing.get_type_hints`, `typing.ForwardRef`: the
hook refuses the `compile`/`exec` of a string from graded code). Every other relaxation above is of
code the grader can read as written. The text rules stay wherever they are the only layer that
sees the code (assignment into a library module or class, and a module used as a value, which would
let a parameter carry a module into such an assignment; the guard does not see module attributes
being set), wherever they keep the code readable for the banned-routine scan (reflection, names
from strings), and wherever a refusal gives a clear early message (`eval`, `exec`, `torch.jit`).

Known limit: a library class handed to a parameter of the student's own function and patched
there (`def f(c): c.forward = ...`, `f(nn.Linear)`) is not seen; the patch rule sees modules,
library paths, `type(...)`/`.__class__`/`.mro()` results and names or attributes bound from them.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import importlib
import types
import warnings

from autograder.sandbox.extract import Cell
from autograder.sandbox.forbidden import (Banned, Program, Use, bound_names, import_binding, import_paths, label,
                                          literal_getattr, spread)

NOT_RUN = "<not run>"  # key of `refused`: the statements the worker does not run (never a student's name)

# What ordinary code of any assignment imports: numerics, containers and the plain helpers students reach for
# (a deep copy of a beam's state, bisect over a cumulative sum, a heap, a timer or a progress bar in a training
# loop, Python's own random, an abstract base class: `ABC.register` is a global registry and a `metaclass=`
# keyword a class keyword, both refused below). Capabilities are the guard's business wherever these run; `queue` and
# `threading` stay out (threads the worker would have to count).
BASE_IMPORTS = frozenset({"numpy", "math", "collections", "itertools", "functools", "typing", "dataclasses",
                          "warnings", "enum", "operator", "copy", "bisect", "heapq", "random", "time", "tqdm", "abc",
                          "statistics", "contextlib"})
FUTURE = "__future__"  # `from __future__ import annotations`: compiler switches, always allowed
TORCH = "torch"  # importable where the worker runs torch (meta.toml `uses_torch`)

# Double-underscore names a graded cell may define, read or call: the ordinary data model.
DUNDERS = frozenset({
    "__init__", "__call__", "__repr__", "__str__", "__len__", "__getitem__", "__setitem__", "__delitem__",
    "__contains__", "__iter__", "__next__", "__reversed__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__bool__", "__enter__", "__exit__", "__post_init__", "__slots__", "__missing__",
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__matmul__", "__truediv__",
    "__neg__", "__float__", "__int__", "__index__", "__pos__", "__abs__", "__invert__", "__floordiv__", "__mod__",
    "__pow__", "__rtruediv__", "__rmatmul__", "__iadd__", "__isub__", "__imul__", "__format__",
    "__constants__", "__match_args__", "__all__",  # plain class or module attributes (`__constants__ = ["eps"]`)
    # the rest of the operator, conversion and copy protocols (a micrograd-style `Value.__rpow__`, a mask's
    # `__and__`, `__deepcopy__`, `__array__` for `np.asarray`): each is the operation itself, written out
    "__rpow__", "__rfloordiv__", "__rmod__", "__divmod__", "__rdivmod__", "__itruediv__", "__ifloordiv__",
    "__imod__", "__ipow__", "__imatmul__", "__and__", "__or__", "__xor__", "__rand__", "__ror__", "__rxor__",
    "__iand__", "__ior__", "__ixor__", "__lshift__", "__rshift__", "__round__", "__floor__", "__ceil__",
    "__trunc__", "__complex__", "__copy__", "__deepcopy__", "__array__", "__length_hint__",
})
# Double-underscore attributes that only describe an object (strings, or its class, as `type(x)` gives it):
# readable anywhere (`type(self).__name__` in a `__repr__`, `print(LayerNorm.__name__)`), never written.
DESCRIBING = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__class__"})
REFLECTION = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars", "globals", "locals", "dir",
                        "breakpoint", "help"})  # help("x") imports module x
# Reflection on a method's own instance with names the grader can read (a literal, or a loop over
# literal names: `for name in ("w_q", "w_k"): setattr(self, name, nn.Linear(d, d))`): it is the
# same code as `self.w_q = ...` written out. Built-in -> the argument counts allowed.
SELF_REFLECTION = {"setattr": (3,), "getattr": (2, 3), "hasattr": (2,)}
# Reading a method's own instance's attribute dict (`vars(self)`, `self.__dict__`, in a `__repr__`, say) is
# plain data: allowed where the dict is only read where it is made (formatted, copied, iterated, its
# `items()`/`keys()`/`values()` taken), never stored, returned or written (a write is `setattr` with any name).
READS_OF_OWN_DICT = frozenset({"items", "keys", "values", "copy"})
COPIES_OF_OWN_DICT = frozenset({"repr", "str", "dict", "list", "sorted", "len", "print", "tuple", "set", "format"})
NAMESPACES = frozenset({"globals", "locals", "vars", "setattr", "delattr"})  # can bind any name
MAKES_CODE = frozenset({"eval", "exec", "compile", "__import__"})
MODULE_NAME = "__name__"  # the bare name (`if __name__ == "__main__":`) is only a string
FRAME_ATTRS = frozenset({"f_back", "f_builtins", "f_code", "f_globals", "f_locals", "gi_frame", "gi_code",
                         "cr_frame", "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next"})
# Library routes from data to code (deserializers, compilers, kernel registries, loaders of native
# code) and to other processes: these modules with everything under them, and these routines.
RUNTIME_MODULES = frozenset({
    "torch.jit", "torch.compiler", "torch.package", "torch.hub", "torch.ops", "torch.library", "torch.classes",
    "torch.fx", "torch.export", "torch.onnx", "torch.overrides", "torch.serialization", "torch.multiprocessing",
    "torch.distributed", "torch.cpp", "torch.cuda.jiterator", "torch.utils.benchmark", "torch.utils.bottleneck",
    "torch.utils.bundled_inputs", "torch.utils.cpp_extension", "torch.utils.jit", "torch.utils.mobile_optimizer",
    "torch.utils.model_zoo", "torch.utils.show_pickle", "torch.utils.throughput_benchmark",
    "numpy.ctypeslib", "numpy.f2py", "numpy.lib.format", "numpy.lib.npyio", "numpy.testing.extbuild",
})
RUNTIME_ROUTINES = frozenset({
    "torch.load", "torch.compile", "numpy.load", "numpy.lib.stride_tricks.as_strided", "dataclasses.make_dataclass",
    "string.Formatter",
})
# Relaxed: `typing.get_type_hints` and `typing.ForwardRef` (they evaluate string annotations) were
# listed here, one spelling each among many (`functools.singledispatch` reaches the same `eval`).
# The worker's guard refuses what they do, whatever the spelling: its audit hook sees the `compile`
# and `exec` of a string from graded code (guard.CODE_EVENTS) and raises PermissionError.
# Everything else above stays: loaders of data as code and `as_strided` (raw memory) are not code
# made from a string, and `make_dataclass`/`Formatter` are reflection (names from strings), which
# the guard does not see.
# Library calls that change a library for every caller: global hooks and registries (also
# `register_module_*`: hooks on every nn.Module call), and class decorators applied to a class that
# is not the student's (`dataclass(nn.Linear)` rewrites `nn.Linear.__init__`).
GLOBAL_REGISTRIES = frozenset({"register", "register_kl"})
CLASS_REWRITERS = frozenset({"dataclasses.dataclass", "functools.total_ordering", "abc.update_abstractmethods"})
# `operator` routines that are reflection or assignment in disguise (a name looked up from a string,
# an item written into whatever object is passed): the rest of `operator` (`mul`, `add`, `itemgetter`)
# is ordinary.
OPERATOR_REFLECTION = frozenset({"operator.attrgetter", "operator.methodcaller", "operator.setitem",
                                 "operator.delitem"})
MAX_CHAIN = 24  # attribute steps into a library the grader follows
_MISSING = object()

WHY = {
    "reflection": "reflection (looking names up or rewriting namespaces at run time) is not allowed in graded "
                  "cells; write the attribute or the name itself (`obj.weight = ...`), keep several in a list "
                  "or a dict, or, in a method, loop over literal names (`for name in (\"w_q\", \"w_k\"): "
                  "setattr(self, name, ...)`)",
    "getattr": "`getattr`/`hasattr` is allowed with a literal name (`getattr(obj, \"weight\", None)`), or on "
               "`self` with a loop over literal names; write the attribute itself",
    "dunder": "double-underscore names are reflection, except the data-model methods (`__init__`, `__call__`, "
              "`__len__`, `__getitem__`, `__iter__`, `__repr__`, ...) and reading `__name__`, `__qualname__`, "
              "`__doc__`, `__module__`, `__class__`; write the operation itself (`len(x)`, `x[i]`, `type(x)`, "
              "`isinstance(x, C)`, `super().__init__()`)",
    "frame": "frames and code objects are reflection; pass values as arguments instead",
    "operator": "looks a name up from a string or writes into the object passed; write the attribute "
                "(`obj.weight`), the call or the assignment itself",
    "runtime": "makes or loads code at run time; write the code itself in the graded cell",
    "private": "a library's private names (a leading underscore) are not part of its API; use the public "
               "function",
    "module": "a module is used only as `module.name` (never stored, passed or returned); import what you "
              "need by name (`from torch import nn`, `import torch.nn.functional as F`)",
    "outside": "reaches module `{module}`, which graded cells may not import",
    "patch": "changes a library for every caller; write your own function or subclass instead",
    "import": "graded cells may import only {allowed}",
    "star": "a star import can bind any name; import the names you use (`from torch import nn`)",
    "relative": "relative imports mean nothing in a notebook; import from the library",
    "async": "the grader calls your functions directly; write an ordinary `def`",
    "class": "metaclasses and class keywords change how Python builds the class; write an ordinary class",
    "type": "`type` with three arguments makes a class at run time; write a `class` statement",
    "long": f"an attribute chain of more than {MAX_CHAIN} steps into a library; name what you use",
}


def allowed_imports(assignment) -> frozenset[str]:
    """Top-level modules graded cells of `assignment` may import: the base, torch where it runs, meta.toml's."""
    extra = set(assignment.meta.get("imports", []))
    return BASE_IMPORTS | extra | {FUTURE} | ({TORCH} if assignment.uses_torch else set())


def refused(cells: list[Cell], assignment) -> dict[str, list[Use]]:
    """Top-level name -> the violations it holds or reaches; under `NOT_RUN`, the top-level statements
    the worker does not run (see `loadable`)."""
    result, dropped, stripped = _judge(cells, assignment)
    result = {name: list(uses) for name, uses in result.items()}
    if dropped or stripped:
        result[NOT_RUN] = sorted([*dropped.values(), *(use for _, use in stripped.values())],
                                 key=lambda use: (use.cell, use.line))
    return result


def loadable(cells: list[Cell], assignment, refused_names: dict | None = None) -> list[Cell]:
    """The cells as the worker runs them: each top-level statement outside the subset that would run
    while the cells load is replaced by `pass` (an import, by the import of its allowed names), on the
    same lines, so the rest of its cell loads and every line number stays the student's.

    `refused_names`: what `refused` gave for these cells; where it reports nothing not run (as
    tests of the layers beneath the policy arrange), the cells are left as they are."""
    if refused_names is not None and NOT_RUN not in refused_names:
        return list(cells)
    _, dropped, stripped = _judge(cells, assignment)
    program = Program.of(cells)
    edits: dict[int, list] = {}
    for index, (cell, stmt) in enumerate(program.stmts):
        if index in dropped or index in stripped:
            kept = [a for a in stmt.names if a not in stripped[index][0]] if index in stripped else []
            text = ast.unparse(type(stmt)(**{**{f: getattr(stmt, f) for f in stmt._fields}, "names": kept})) \
                if kept else "pass"
            note = "not run" if index in dropped else "left out: " + ", ".join(a.name for a in stripped[index][0])
            edits.setdefault(cell, []).append((stmt, text, f"  # {note}: outside what graded code may contain"))
    out = []
    for cell in cells:
        lines = cell.source.split("\n")
        for stmt, text, note in sorted(edits.get(cell.number, []), key=lambda e: -e[0].lineno):  # from the end
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            start = 0 if first < stmt.lineno else stmt.col_offset  # offsets count UTF-8 bytes
            head = lines[first - 1].encode()[:start].decode()
            tail = lines[stmt.end_lineno - 1].encode()[stmt.end_col_offset:].decode()
            note = "" if tail.strip() else note
            lines[first - 1:stmt.end_lineno] = [head + text + tail + note] + [""] * (stmt.end_lineno - first)
        out.append(dataclasses.replace(cell, source="\n".join(lines)) if cell.number in edits else cell)
    return out


_JUDGED: tuple | None = None  # (key, verdict) of the last submission judged: `refused` and `loadable` share it


def _judge(cells: list[Cell], assignment):
    """(refused names, {statement index: why} not run, {statement index: (import aliases left out, why)})."""
    global _JUDGED
    forbidden = tuple(sorted(getattr(assignment, "forbidden", ()) or ()))
    key = (tuple((c.number, c.source) for c in cells), allowed_imports(assignment), forbidden)
    if _JUDGED is None or _JUDGED[0] != key:
        _JUDGED = (key, _verdict(cells, frozenset(key[1]), Banned(forbidden)))
    return _JUDGED[1]


def _verdict(cells: list[Cell], allowed: frozenset[str], banned: Banned | None = None):
    """See `_judge`. A violation inside a function costs that function and what reaches it. A top-level
    statement that would run outside the subset while the cells load (a decorator, a class body, a
    default, code at the top level, or a call of refused code) is not run at all; it costs the names
    it binds, changes or uses (not the libraries it names: it changed none), and, if it could bind any
    name (a star import, `globals()`), the names nothing else binds. A disallowed import is left out
    of its statement and costs the names it binds."""
    program = Program.of(cells)
    check = _Checker(program, allowed)
    stmts = program.stmts
    bound_by = [bound_names(stmt) for _, stmt in stmts]
    library = {name for name, paths in program.module.bindings.items() if None not in paths}  # only imports bind
    unbound = {n.id for _, s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
               and program.binding_scope(n) is None and not hasattr(builtins, n.id)}
    uses_of, owners_of = [], []
    dropped: dict[int, Use] = {}
    stripped: dict[int, list] = {}

    def drop(index, use):
        dropped[index] = use
        uses_of[index] = [use, *uses_of[index]]
        owners_of[index] = _load_owners(program, stmts[index][1], bound_by[index], library, unbound)

    for index, (cell, stmt) in enumerate(stmts):
        found, owners, first = [], None, None
        for use, node, kind, binds in check.statement(stmt, cell):
            found.append(use)
            if kind == "import" and node is stmt:  # a top-level import: leave the alias out
                owners = (owners or set()) | binds
                aliases, first_use = stripped.get(index, ([], _not_run(use, "import")))
                stripped[index] = (aliases + [a for a in stmt.names if import_binding(stmt, a)[0] in binds], first_use)
                continue
            # a def runs its body when called; only a module's own `__getattr__`-like hooks act at load
            definition = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
                _dunder(node.name) and program.scope_of[id(node)] is program.module)
            if first is None and (kind == "star" or program.at_load(node) and not definition):
                first = use
        if first is None and banned:
            first = _banned_call_at_load(program, stmt, cell, banned)
        uses_of.append(found)
        owners_of.append(owners)
        if first is not None:
            drop(index, _not_run(first))
    while True:
        result = spread(program, uses_of, owners_of)
        gone = set().union(*(_load_owners(program, stmts[i][1], bound_by[i], library, set()) & bound_by[i]
                             for i in dropped))  # names the worker never binds
        gone |= {import_binding(stmts[i][1], a)[0] for i, (aliases, _) in stripped.items() for a in aliases}
        more = []
        for index, (cell, stmt) in enumerate(stmts):  # load-time code that runs refused code, or needs a name not bound
            if index in dropped:
                continue
            called = _callee_roots(stmt)
            for node in ast.walk(stmt):
                if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                        and (id(node) in called and node.id in result or node.id in gone)
                        and program.at_load(node) and program.binding_scope(node) is program.module):
                    how = (f"runs `{node.id}` while the cells load" if id(node) in called and node.id in result
                           else f"needs `{node.id}` while the cells load")
                    why = f"`{node.id}` relies on {result[node.id][0]}" if node.id in result else \
                        f"`{node.id}` is bound by a statement that was not run"
                    more.append((index, Use(node.id, cell, node.lineno, f"{how}; {why}")))
                    break
        if not more:
            return result, dropped, {i: a for i, a in stripped.items() if i not in dropped}
        for index, use in more:
            drop(index, _not_run(use))


def _banned_call_at_load(program: Program, stmt: ast.stmt, cell: int, banned: Banned) -> Use | None:
    """A call, while the cells load, of a library routine the assignment bans: the worker's guard makes
    it raise, which would stop the rest of its cell, so the statement is not run at all."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and program.at_load(node):
            for path in sorted(program.paths(node.func)):
                if banned.in_path(path):
                    return Use(label(node.func), cell, node.lineno, "calls a library routine this assignment asks "
                                                                    "you to write yourself while the cells load")
    return None


def _not_run(use: Use, what: str = "statement") -> Use:
    return dataclasses.replace(use, how=f"{use.how}; this {what} was not run" if use.how else
                               f"this {what} was not run")


def _load_owners(program: Program, stmt: ast.stmt, bound: set[str], library: set[str], unbound: set[str]) -> set[str]:
    """The names a top-level statement not run costs: those it binds or changes and the student's
    names it uses; where it could bind any name (a star import, `globals()`, `vars()`), also the names
    read that nothing binds (`unbound`)."""
    owners = {n for n in (bound | program.global_names(stmt)) - library if n in program.module.bindings}
    owners |= {import_binding(n, a)[0] for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))
               for a in n.names if a.name != "*"}
    for node in ast.walk(stmt):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            owners |= unbound | (_exported(node.module or "") & set(program.module.bindings) - library)
        elif isinstance(node, ast.Name) and node.id in NAMESPACES and program.is_builtin(node):
            owners |= unbound
    return owners


def _exported(module: str) -> set[str]:
    """The names `from module import *` binds, where the grader can tell (an allowed library module)."""
    obj = _library_object(module) if module.split(".")[0] in BASE_IMPORTS | {TORCH} else _MISSING
    if not isinstance(obj, types.ModuleType):
        return set()
    names = getattr(obj, "__all__", None)
    return {n for n in names if isinstance(n, str)} if isinstance(names, (list, tuple)) else {
        n for n in dir(obj) if not n.startswith("_")}


def withheld(spec, refused_names: dict[str, list[Use]]) -> str | None:
    """Why a check is not graded, or None: it would run code outside what graded cells may contain."""
    for name in (*spec.uses, *spec.needs):
        if name in refused_names:
            return (f"Not graded: `{name}` relies on code outside what graded code may contain: "
                    f"{refused_names[name][0]}. Graded cells must be plain Python the grader can read (see the "
                    "rules at the top of the notebook), so the points of this check are withheld.")
    return None


def _callee_roots(stmt: ast.stmt) -> set[int]:
    """ids of the names whose code a statement calls: `f` in `f(x)`, `C.make()`, `g()()`, `@deco`."""
    callees = [n.func for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    callees += [d for n in ast.walk(stmt) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                for d in n.decorator_list]
    roots = set()
    for node in callees:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        roots.add(id(node))
    return roots


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _prefixes(path: str):
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@functools.lru_cache(maxsize=4096)
def _library_object(path: str):
    """The real object at `path` in the grader's own libraries, or _MISSING.

    Only attribute lookups and imports of public modules of allowed libraries, never past a refused
    step (`_step` sees to that): nothing of the student's runs, and no module is imported that an
    allowed graded cell could not import itself.
    """
    parts = path.split(".")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases (`np.core`) warn when looked up
        try:
            obj = importlib.import_module(parts[0])
        except Exception:  # noqa: BLE001 - not installed here: nothing to resolve
            return _MISSING
        for index, part in enumerate(parts[1:], 2):
            try:
                obj = getattr(obj, part)
            except Exception:  # noqa: BLE001 - maybe a submodule not imported yet
                try:
                    obj = importlib.import_module(".".join(parts[:index]))
                except Exception:  # noqa: BLE001
                    return _MISSING
    return obj


@functools.lru_cache(maxsize=64)
def _refused_objects(roots: frozenset[str]) -> frozenset[int]:
    """ids of the refused routines and of built-in reflection, to know them under any other path."""
    ids = {id(getattr(builtins, name)) for name in REFLECTION | MAKES_CODE
           if hasattr(builtins, name)}  # `help` exists only when `site` ran (not under python -S)
    for path in RUNTIME_ROUTINES:
        obj = _library_object(path) if path.split(".")[0] in roots else _MISSING
        if obj is not _MISSING:
            ids.add(id(obj))
    return frozenset(ids)


def _runtime(name: str) -> bool:
    return any(p in RUNTIME_MODULES or p in RUNTIME_ROUTINES for p in _prefixes(name))


@functools.lru_cache(maxsize=4096)
def _step(path: str, allowed: frozenset[str]) -> tuple[str, str] | None:
    """(kind, detail) when the last step of library path `path` leaves the subset, given that its
    prefix does not (a refused prefix is reported where it is written, and nothing past it is resolved)."""
    parent, _, last = path.rpartition(".")
    if path.split(".")[0] not in allowed:
        return None
    if path.count(".") > MAX_CHAIN:  # no library is that deep (and the recursion below stays short)
        return "long", path
    if parent and _step(parent, allowed) is not None:
        return None
    if last.startswith("_") and not (parent and (last in DUNDERS or last in DESCRIBING)):
        return ("dunder", path) if _dunder(last) else ("private", path)
    if path in RUNTIME_MODULES or path in RUNTIME_ROUTINES:
        return "runtime", path
    if path in OPERATOR_REFLECTION:
        return "operator", path
    if parent and (last.startswith("register_module_") or last in GLOBAL_REGISTRIES):
        return "patch", path
    obj = _library_object(path)
    if obj is _MISSING:
        return None
    if isinstance(obj, types.ModuleType):
        name = getattr(obj, "__name__", "")
        if name.split(".")[0] not in allowed or any(p.startswith("_") for p in name.split(".")):
            return "outside", name
        if _runtime(name):
            return "runtime", name
    elif id(obj) in _refused_objects(allowed):
        return "runtime", path
    elif _runtime(f"{getattr(obj, '__module__', None) or ''}.{getattr(obj, '__name__', '')}"):
        return "runtime", f"{obj.__module__}.{obj.__name__}"
    return None


def _is_module(path: str, allowed: frozenset[str]) -> bool | None:
    """Whether the library path holds a module; None where it is not resolved (unknown root or a refused step)."""
    if path.split(".")[0] not in allowed:
        return None
    obj = _library_object(path)
    return isinstance(obj, types.ModuleType)


class _Checker:
    """Finds what a top-level statement holds outside the subset, with the node and a kind for its cost."""

    def __init__(self, program: Program, allowed: frozenset[str]):
        self.program, self.allowed = program, allowed
        self.bases: set[int] = set()  # nodes used as `node.attr` (or `getattr(node, "attr")`)
        self.literal_calls: set[int] = set()  # the `getattr` / `hasattr` of calls with a literal name
        self.aliases: set[tuple[int, str]] = set()  # (scope, name) bound to a library object, not a call of one
        # attribute names given a library object (`self.kind = nn.Linear`): assigning into `x.kind.forward`
        # is a patch. Only the bare names a statement binds are aliases: `self.dtype = torch.float32` makes
        # `self` no library alias (an object's own attributes are its own; issue 31's false fail).
        self.attribute_aliases: set[str] = set()
        nodes = [node for _, stmt in program.stmts for node in ast.walk(stmt)]
        for node in nodes:
            if isinstance(node, ast.Attribute):
                self.bases.add(id(node.value))
            elif literal_getattr(node) and program.is_builtin(node.func):
                self.literal_calls.add(id(node.func))
                self.bases.add(id(node.args[0]))
        for node in nodes:
            self._note_alias(node)
        self.own_calls: set[int] = set()  # `setattr`/`getattr`/`hasattr` on `self` with names the grader can read
        self.own_dunders: set[int] = set()  # `self.__dict__` read, `object.__setattr__(self, "name", v)` (see below)
        sites = _binding_sites(program, nodes)
        firsts = set()  # (id of scope, name) of every method's first parameter
        for node in nodes:
            if isinstance(node, ast.FunctionDef) and program.scope_of[id(node)].kind == "class" and (
                    node.args.posonlyargs or node.args.args):
                first = (node.args.posonlyargs or node.args.args)[0]
                firsts.add((id(program.scope_of[id(first)]), first.arg))
        for node in nodes:
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and program.is_builtin(node.func)
                    and len(node.args) in SELF_REFLECTION.get(node.func.id, ()) and not node.keywords
                    and not any(isinstance(a, ast.Starred) for a in node.args)
                    and _own_instance(program, sites, firsts, node.args[0])
                    and _readable_names(program, sites, node.args[1])):
                self.own_calls.add(id(node.func))
                self.bases.add(id(node.args[0]))
        parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
        dataclass_methods = _dataclass_methods(program, nodes)
        for node in nodes:
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars"
                    and program.is_builtin(node.func) and len(node.args) == 1 and not node.keywords
                    and _own_instance(program, sites, firsts, node.args[0]) and _only_read(program, parents, node)):
                self.own_calls.add(id(node.func))
            elif (isinstance(node, ast.Attribute) and node.attr == "__dict__" and isinstance(node.ctx, ast.Load)
                    and _own_instance(program, sites, firsts, node.value) and _only_read(program, parents, node)):
                self.own_dunders.add(id(node))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "__setattr__" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "object" and program.is_builtin(node.func.value)
                    and len(node.args) == 3 and not node.keywords
                    and not any(isinstance(a, ast.Starred) for a in node.args)
                    and _own_instance(program, sites, firsts, node.args[0])
                    and id(program.binding_scope(node.args[0])) in dataclass_methods
                    and _readable_names(program, sites, node.args[1])):
                # a frozen dataclass sets its fields in `__post_init__` so (the documented idiom): it is
                # `self.name = value` written out, and `object.__setattr__` refuses a class (no patching)
                self.own_dunders.add(id(node.func))

    def _class_of(self, node: ast.AST) -> bool:
        """`type(x)`, `x.__class__` or `x.mro()`: a class got at run time, maybe a library's."""
        if isinstance(node, ast.Attribute):
            return node.attr == "__class__"
        return isinstance(node, ast.Call) and (self.program.is_builtin(node.func, "type") and len(node.args) == 1
                                               or isinstance(node.func, ast.Attribute) and node.func.attr == "mro")

    def _library_values(self, expr: ast.AST) -> bool:
        """Does `expr` hold a library object itself (a module, a class, a function) or a class got at run
        time, not only what calling one returns?"""
        called = {id(n.func) for n in ast.walk(expr) if isinstance(n, ast.Call)}
        return any(id(n) not in called and id(n) not in self.bases and (
            isinstance(n, (ast.Name, ast.Attribute)) and self.program.paths(n) or self._class_of(n))
            for n in ast.walk(expr))

    def _note_alias(self, node: ast.AST) -> None:
        pairs = []
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
            pairs = [(t, node.value) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            pairs = [(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars is not None]
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs = list(zip(positional[len(positional) - len(node.defaults):], node.defaults))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
        for target, value in pairs:
            if not self._library_values(value):
                continue
            for attribute in _attribute_targets(target):
                self.attribute_aliases.add(attribute)
            for name in _name_targets(target):
                key = name.arg if isinstance(name, ast.arg) else name.id
                scope = self.program.binding_scope(name)
                if scope is not None:
                    self.aliases.add((id(scope), key))

    def statement(self, stmt: ast.stmt, cell: int):
        """(Use, node, kind, names) for every violation in `stmt`: kind "import" or "star" for an import,
        with the names its offending alias binds; else None."""
        found = []
        for node in ast.walk(stmt):
            for kind, what, why, *binds in self._node(node):
                where = (getattr(node, "lineno", stmt.lineno), getattr(node, "col_offset", 0),
                         getattr(node, "end_col_offset", 0))  # in `a.b.c`, `a.b` first
                found.append((where, Use(what, cell, where[0], why), node,
                              kind if kind in {"import", "star"} else None, set(binds)))
        found.sort(key=lambda f: f[0])  # in reading order: the first is what the student wrote first
        return [f[1:] for f in found]

    def _node(self, node: ast.AST):
        program = self.program
        if isinstance(node, (ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith, ast.Await)):
            yield "async", {ast.AsyncFunctionDef: f"async def {getattr(node, 'name', '')}", ast.AsyncFor: "async for",
                            ast.AsyncWith: "async with", ast.Await: "await"}[type(node)], WHY["async"]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from self._import(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and _dunder(node.name) and node.name not in DUNDERS:
            yield "dunder", node.name, WHY["dunder"]
        if isinstance(node, ast.ClassDef) and node.keywords:
            yield "class", label(node.keywords[0]), WHY["class"]
        elif isinstance(node, ast.Name):
            yield from self._name(node)
        elif isinstance(node, ast.Attribute):
            if id(node) in self.own_dunders:
                pass
            elif _dunder(node.attr) and node.attr not in DUNDERS and not (
                    node.attr in DESCRIBING and isinstance(node.ctx, ast.Load)):
                yield "dunder", label(node), WHY["dunder"]
            elif node.attr in FRAME_ATTRS:
                yield "frame", label(node), WHY["frame"]
            else:
                yield from self._library(node)
            if not isinstance(node.ctx, ast.Load):
                yield from self._patch(node)
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            yield from self._patch(node, aliases=False)
        elif isinstance(node, ast.MatchClass):  # `case C(attr=...)` reads `attr`: the same rules as `x.attr`
            for attr in node.kwd_attrs:
                if _dunder(attr) and attr not in DUNDERS | DESCRIBING:
                    yield "dunder", f"{label(node.cls)}({attr}=...)", WHY["dunder"]
                elif attr in FRAME_ATTRS:
                    yield "frame", f"{label(node.cls)}({attr}=...)", WHY["frame"]
        elif isinstance(node, ast.Call):
            name = literal_getattr(node)
            if name and id(node.func) in self.literal_calls:
                if _dunder(name) and name not in DUNDERS | DESCRIBING:
                    yield "dunder", label(node), WHY["dunder"]
                elif name in FRAME_ATTRS:
                    yield "frame", label(node), WHY["frame"]
                else:
                    yield from self._library(node)
            elif program.is_builtin(node.func, "type") and len(node.args) + len(node.keywords) > 1:
                yield "type", label(node), WHY["type"]
            elif node.args and CLASS_REWRITERS & (program.paths(node.func) | (
                    program.paths(node.func.func) if isinstance(node.func, ast.Call) else set())):
                yield "patch", label(node), "a class decorator called on a class rewrites it; use it only as " \
                                            "`@decorator` on your own class"

    def _name(self, node: ast.Name):
        load = isinstance(node.ctx, ast.Load)
        if _dunder(node.id) and node.id not in DUNDERS and not (load and node.id == MODULE_NAME):
            yield "dunder", node.id, WHY["dunder"]
        elif load and node.id in REFLECTION | MAKES_CODE and self.program.is_builtin(node):
            if id(node) not in self.literal_calls and id(node) not in self.own_calls:
                kind = ("runtime" if node.id in MAKES_CODE else "getattr" if node.id in {"getattr", "hasattr"}
                        else "reflection")
                yield kind, node.id, WHY[kind]
        elif load:
            yield from self._library(node)

    def _library(self, node: ast.AST):
        """A library path written here that leaves the subset, or a module used as a value."""
        for path in sorted(self.program.paths(node)):
            step = _step(path, self.allowed)
            if step is not None:
                kind, detail = step
                why = WHY[kind].format(module=detail)
                yield kind, label(node), why if kind != "runtime" else f"`{detail}` {why}"
            elif id(node) not in self.bases and _is_module(path, self.allowed):
                yield "module", label(node), WHY["module"]

    def _patch(self, target: ast.Attribute | ast.Subscript, aliases: bool = True):
        """Assigning or deleting into an imported module, a library class, or a class got at run time."""
        node = target.value
        while True:
            if self.program.paths(node) or self._class_of(node):
                yield "patch", label(target), WHY["patch"]
                return
            if isinstance(node, ast.Attribute) and aliases and node.attr in self.attribute_aliases:
                yield "patch", label(target), WHY["patch"] + f" (`.{node.attr}` holds a library object)"
                return
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                node = node.value
                continue
            break
        if isinstance(node, ast.Name) and aliases:
            scope = self.program.binding_scope(node)
            if scope is not None and (id(scope), node.id) in self.aliases:
                yield "patch", label(target), WHY["patch"] + f" (`{node.id}` holds a library object)"

    def _import(self, node: ast.Import | ast.ImportFrom):
        for alias, path in import_paths(node):
            binds = import_binding(node, alias)[0]
            written = f"import {alias.name}" if isinstance(node, ast.Import) else \
                f"from {'.' * node.level}{node.module or ''} import {alias.name}"
            if alias.name == "*":
                yield "star", written, WHY["star"], binds
            elif isinstance(node, ast.ImportFrom) and node.level:
                yield "import", written, WHY["relative"], binds
            elif path.split(".")[0] not in self.allowed:
                yield "import", written, WHY["import"].format(allowed=_shown(self.allowed - {FUTURE})), binds
            else:
                for prefix in _prefixes(path)[1:]:
                    step = _step(prefix, self.allowed)
                    if step is not None:
                        kind, detail = step
                        yield "import", written, (WHY[kind].format(module=detail)
                                                  if kind != "runtime" else f"`{detail}` {WHY['runtime']}"), binds
                        break


def _binding_sites(program: Program, nodes: list) -> dict[tuple[int, str], list]:
    """(id of scope, name) -> what binds the name there: a tuple of the literal strings a `for` loop
    (or comprehension) over literal names gives it, or None for any other binding (parameter,
    assignment, import, `except ... as`, def, ...)."""
    sites: dict[tuple[int, str], list] = {}
    looped: set[int] = set()

    def add(scope, name, values):
        if scope is not None:
            sites.setdefault((id(scope), name), []).append(values)

    for node in nodes:
        if isinstance(node, (ast.For, ast.comprehension)):
            for name, values in _loop_literals(program, node.target, node.iter):
                looped.add(id(name))
                add(program.binding_scope(name), name.id, values)
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in looped:
            add(program.binding_scope(node), node.id, None)
        elif isinstance(node, ast.arg):
            add(program.scope_of.get(id(node)), node.arg, None)
        else:
            names = ([node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                       ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name
                     else [node.rest] if isinstance(node, ast.MatchMapping) and node.rest
                     else [import_binding(node, a)[0] for a in node.names if a.name != "*"]
                     if isinstance(node, (ast.Import, ast.ImportFrom)) else [])
            for name in names:
                add(program.scope_holding(name, program.scope_of.get(id(node), program.module)), name, None)
    return sites


def _loop_literals(program: Program, target: ast.AST, iterable: ast.AST):
    """(Name, literal strings) for the loop targets that take only literal names: `for n in ("w", "b")`,
    `for i, n in enumerate([...])`, `for n, d in zip(("w", "b"), dims)`."""
    def strings(node):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            return tuple(e.value for e in node.elts)
        return None

    if isinstance(target, ast.Name):
        values = strings(iterable)
        return [(target, values)] if values is not None else []
    keys = _literal_keys(program, iterable)  # `for name, value in dict(n=n, k=k).items()`: the names are the keys
    if keys is not None:
        return [(target.elts[0], keys)] if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(
            target.elts[0], ast.Name) else []
    if not (isinstance(target, ast.Tuple) and isinstance(iterable, ast.Call)
            and all(k.arg == "strict" for k in iterable.keywords)):
        return []
    if program.is_builtin(iterable.func, "enumerate") and len(target.elts) == 2 and len(iterable.args) == 1:
        values = strings(iterable.args[0])
        return [(target.elts[1], values)] if values is not None and isinstance(target.elts[1], ast.Name) else []
    if program.is_builtin(iterable.func, "zip") and len(target.elts) == len(iterable.args):
        return [(t, strings(a)) for t, a in zip(target.elts, iterable.args)
                if isinstance(t, ast.Name) and strings(a) is not None]
    return []


def _literal_keys(program: Program, iterable: ast.AST) -> tuple | None:
    """The keys of `{"n": n, "k": k}.items()` or `dict(n=n, k=k).items()`: literal names, as a loop over them."""
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and iterable.func.attr == "items"
            and not iterable.args and not iterable.keywords):
        return None
    made = iterable.func.value
    if isinstance(made, ast.Dict) and made.keys and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in made.keys):  # no `**other`
        return tuple(k.value for k in made.keys)
    if (isinstance(made, ast.Call) and program.is_builtin(made.func, "dict") and not made.args and made.keywords
            and all(k.arg is not None for k in made.keywords)):
        return tuple(k.arg for k in made.keywords)
    return None


def _own_instance(program: Program, sites: dict, firsts: set, node: ast.AST) -> bool:
    """Is `node` the first parameter of a method (`self`, `cls`), never rebound in it?

    `setattr(self, "w", v)` is then `self.w = v`, with what that allows and refuses: the patch rule
    sees the library classes a parameter holds no better than for `self.w = v` (see Known limit)."""
    if not isinstance(node, ast.Name):
        return False
    scope = program.binding_scope(node)
    key = (id(scope), node.id)
    return scope is not None and key in firsts and sites.get(key) == [None]


def _only_read(program: Program, parents: dict, node: ast.AST) -> bool:
    """Is the dict `node` gives (`vars(self)`, `self.__dict__`) only read where it is made: formatted in an
    f-string, copied or shown by a built-in (`dict(...)`, `repr(...)`), iterated, tested with `in`, or its
    `items()`/`keys()`/`values()`/`copy()` called? Never stored, returned, passed on, subscripted or written."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.FormattedValue) and parent.value is node:
        return True
    if isinstance(parent, ast.Call) and node in parent.args and not parent.keywords and isinstance(parent.func, ast.Name) \
            and parent.func.id in COPIES_OF_OWN_DICT and program.is_builtin(parent.func):
        return True
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in READS_OF_OWN_DICT:
        call = parents.get(id(parent))
        return isinstance(call, ast.Call) and call.func is parent and not call.args and not call.keywords
    if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node:
        return True
    return isinstance(parent, ast.Compare) and node in parent.comparators and all(
        isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops)


def _dataclass_methods(program: Program, nodes: list) -> set[int]:
    """ids of the scopes of the methods of the student's classes decorated with `dataclasses.dataclass`."""
    scopes = set()
    for node in nodes:
        if isinstance(node, ast.ClassDef) and any(
                "dataclasses.dataclass" in program.paths(d.func if isinstance(d, ast.Call) else d)
                for d in node.decorator_list):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and (item.args.posonlyargs or item.args.args):
                    first = (item.args.posonlyargs or item.args.args)[0]
                    scopes.add(id(program.scope_of[id(first)]))
    return scopes


def _readable_names(program: Program, sites: dict, node: ast.AST) -> bool:
    """A literal attribute name, or a name bound only by loops over literal names; none of them reflection."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        values = (node.value,)
    elif isinstance(node, ast.Name) and program.binding_scope(node) is not None:
        bound = sites.get((id(program.binding_scope(node)), node.id), [None])
        if any(b is None for b in bound):
            return False
        values = tuple(v for b in bound for v in b)
    else:
        return False
    return all(v.isidentifier() and not v.startswith("__") and v not in FRAME_ATTRS for v in values)


def _name_targets(target: ast.AST) -> list:
    """The bare names an assignment target binds: `a`, `a, (b, *c)`; not the `self` of `self.x = ...`."""
    if isinstance(target, (ast.arg, ast.Name)):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for element in target.elts for n in _name_targets(element)]
    if isinstance(target, ast.Starred):
        return _name_targets(target.value)
    return []


def _attribute_targets(target: ast.AST) -> list[str]:
    """The attribute names an assignment target writes: "kind" for `self.kind = ...`, also inside tuples."""
    if isinstance(target, ast.Attribute):
        return [target.attr]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [a for element in target.elts for a in _attribute_targets(element)]
    if isinstance(target, ast.Starred):
        return _attribute_targets(target.value)
    return []


def _shown(names) -> str:
    return ", ".join(f"`{n}`" for n in sorted(names))
