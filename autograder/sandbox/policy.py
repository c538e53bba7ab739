"""Graded code is plain Python the grader can read; anything outside that subset earns nothing.

Why an allowlist: a list of banned spellings loses to the next spelling (a computed `getattr` on a
loop variable, a `__subclasses__()` walk, `f.__globals__`, a marshalled code object,
`pickle.loads`, `__builtins__["getattr"]` all earned points). Here the grader refuses what it
cannot read, so that the names it resolves (autograder.sandbox.forbidden) are all the code can reach:

* no reflection: `getattr`/`hasattr` only with a literal name, no `setattr`, `delattr`, `vars`,
  `globals`, `locals`, `dir`, no double-underscore names beyond the data-model methods in
  `DUNDERS`, no frames or code objects, no metaclasses;
* no code made or loaded at run time: `eval`, `exec`, `compile`, `__import__`, the library routes
  from data to code (`torch.load`, `torch.jit`, `np.load`, ...: `RUNTIME_MODULES`,
  `RUNTIME_ROUTINES`), a library's private names (`torch._C`, `torch._VF`, `F._in_projection`), or
  a module a library imported for itself (`torch.os`);
* no patching: nothing is assigned into an imported module or a library class (`torch.x = ...`,
  `nn.Module.__call__ = ...`, `C = nn.Linear; C.forward = ...`), and a module is used only as
  `module.name` (never stored, passed or returned, so no name can hide one);
* imports only from `BASE_IMPORTS`, torch where the assignment runs torch, and the assignment's
  own `imports = [...]` in meta.toml; the grader's own `autograder` never.

What a violation costs (`refused`): the top-level names whose code holds it, and every name that
refers to them or is changed by them (forbidden.spread); a check whose `uses` or `needs` holds one
of them is not graded (`withheld`), so refused code never runs in a check. Code that runs while
the cells load (top-level statements, class bodies, decorators, defaults) and holds a violation,
calls refused code or touches a disallowed import could change anything before any check, so it
costs every check (`EVERYTHING`). A disallowed import costs only the names it binds. The starter
states the rules; getting round them counts as not attempting the question.

Known limit: a library class handed to a parameter of the student's own function and patched
there (`def f(c): c.forward = ...`, `f(nn.Linear)`) is not seen; the patch rule sees modules,
library paths, `type(...)`/`.mro()` results and names bound from them.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib
import types
import warnings

from autograder.sandbox.extract import Cell
from autograder.sandbox.forbidden import Program, Use, import_binding, import_paths, label, literal_getattr, spread

EVERYTHING = "*"  # key of `refused` when code that runs at load is outside the subset: every check is withheld

BASE_IMPORTS = frozenset({"numpy", "math", "collections", "itertools", "functools", "typing", "dataclasses",
                          "warnings"})
FUTURE = "__future__"  # `from __future__ import annotations`: compiler switches, always allowed
TORCH = "torch"  # importable where the worker runs torch (meta.toml `uses_torch`)

# Double-underscore names a graded cell may define, read or call: the ordinary data model.
DUNDERS = frozenset({
    "__init__", "__call__", "__repr__", "__str__", "__len__", "__getitem__", "__setitem__", "__delitem__",
    "__contains__", "__iter__", "__next__", "__reversed__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__bool__", "__enter__", "__exit__", "__post_init__", "__slots__", "__missing__",
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__matmul__", "__truediv__",
    "__neg__", "__float__", "__int__", "__index__",
})
REFLECTION = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars", "globals", "locals", "dir",
                        "breakpoint", "help"})  # help("x") imports module x
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
    "torch.load", "torch.compile", "numpy.load", "numpy.lib.stride_tricks.as_strided", "typing.get_type_hints",
    "typing.ForwardRef", "dataclasses.make_dataclass", "string.Formatter",
})
# Library calls that change a library for every caller: global hooks and registries (also
# `register_module_*`: hooks on every nn.Module call), and class decorators applied to a class that
# is not the student's (`dataclass(nn.Linear)` rewrites `nn.Linear.__init__`).
GLOBAL_REGISTRIES = frozenset({"register", "register_kl"})
CLASS_REWRITERS = frozenset({"dataclasses.dataclass", "functools.total_ordering"})
MAX_CHAIN = 24  # attribute steps into a library the grader follows
_MISSING = object()

WHY = {
    "reflection": "reflection (looking names up or rewriting namespaces at run time) is not allowed in graded "
                  "cells; write the attribute or the name itself (`obj.weight = ...`), or keep several in a list "
                  "or a dict",
    "getattr": "`getattr`/`hasattr` is allowed only with a literal name (`getattr(obj, \"weight\", None)`); "
               "write the attribute itself",
    "dunder": "double-underscore names are reflection, except the data-model methods (`__init__`, `__call__`, "
              "`__len__`, `__getitem__`, `__iter__`, `__repr__`, ...); write the operation itself (`len(x)`, "
              "`x[i]`, `type(x)`, `isinstance(x, C)`, `super().__init__()`)",
    "frame": "frames and code objects are reflection; pass values as arguments instead",
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
    """Top-level name -> the violations it holds or reaches; `EVERYTHING` when code run at load does."""
    allowed = allowed_imports(assignment)
    program = Program.of(cells)
    check = _Checker(program, frozenset(allowed))
    uses_of, owners_of, everything, imported = [], [], [], set()
    for cell, stmt in program.stmts:
        found, owners = [], None
        for use, node, kind, binds in check.statement(stmt, cell):
            # a def runs its body when called; only a module's own `__getattr__`-like hooks act at load
            definition = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
                _dunder(node.name) and program.scope_of[id(node)] is program.module)
            if kind == "star" or (kind is None and program.at_load(node) and not definition):
                everything.append(use)
                continue
            found.append(use)
            if kind == "import" and node is stmt:  # a top-level import costs only the names it binds
                owners = (owners or set()) | binds
                imported |= binds
        uses_of.append(found)
        owners_of.append(owners)
    result = spread(program, uses_of, owners_of)
    for cell, stmt in program.stmts:  # load-time code that calls refused code (or touches a refused import) runs it
        called = _callee_roots(stmt)
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in result
                    and (id(node) in called or node.id in imported)
                    and program.at_load(node) and program.binding_scope(node) is program.module):
                everything.append(Use(node.id, cell, node.lineno,
                                      f"runs `{node.id}` while the cells load; `{node.id}` relies on {result[node.id][0]}"))
    if everything:
        result[EVERYTHING] = everything
    return result


def withheld(spec, refused_names: dict[str, list[Use]]) -> str | None:
    """Why a check is not graded, or None: it would run code outside what graded cells may contain."""
    if EVERYTHING in refused_names:
        return (f"Not graded: code that runs when your graded cells load is outside what graded code may "
                f"contain: {refused_names[EVERYTHING][0]}. Graded cells must be plain Python the grader can read "
                "(see the rules at the top of the notebook), so no check is graded.")
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
    if last.startswith("_") and not (parent and last in DUNDERS):
        return ("dunder", path) if _dunder(last) else ("private", path)
    if path in RUNTIME_MODULES or path in RUNTIME_ROUTINES:
        return "runtime", path
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
        nodes = [node for _, stmt in program.stmts for node in ast.walk(stmt)]
        for node in nodes:
            if isinstance(node, ast.Attribute):
                self.bases.add(id(node.value))
            elif literal_getattr(node) and program.is_builtin(node.func):
                self.literal_calls.add(id(node.func))
                self.bases.add(id(node.args[0]))
        for node in nodes:
            self._note_alias(node)

    def _class_of(self, node: ast.AST) -> bool:
        """`type(x)` or `x.mro()`: a class got at run time, maybe a library's."""
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
            names = [target] if isinstance(target, ast.arg) else [n for n in ast.walk(target) if isinstance(n, ast.Name)]
            for name in names:
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
            if _dunder(node.attr) and node.attr not in DUNDERS:
                yield "dunder", label(node), WHY["dunder"]
            elif node.attr in FRAME_ATTRS:
                yield "frame", label(node), WHY["frame"]
            else:
                yield from self._library(node)
            if not isinstance(node.ctx, ast.Load):
                yield from self._patch(node)
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            yield from self._patch(node, aliases=False)
        elif isinstance(node, ast.Call):
            name = literal_getattr(node)
            if name and id(node.func) in self.literal_calls:
                if _dunder(name) and name not in DUNDERS:
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
            if id(node) not in self.literal_calls:
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
            if self.program.paths(node):
                yield "patch", label(target), WHY["patch"]
                return
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                node = node.value
                continue
            break
        if self._class_of(node):
            yield "patch", label(target), WHY["patch"]
        elif isinstance(node, ast.Name) and aliases:
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


def _shown(names) -> str:
    return ", ".join(f"`{n}`" for n in sorted(names))
