"""Which of the student's names rely on a library routine the assignment asks them to write.

Why static, on the trusted side: the answer must not depend on code the student controls at run
time. The graded cells are read as one module and every name is resolved with Python's scoping
rules (`Program`): a banned routine is used where a name or an attribute chain resolves to it
through an import (`F.scaled_dot_product_attention` after `import torch.nn.functional as F`,
`torch.nn.modules.rnn.LSTM`, `from torch.nn import LSTMCell as Cell`, `getattr(torch, "lstm")`).
A local variable, a parameter, an attribute of the student's own object (`self.lstm`) or the
student's own function of the same name is not a use, and neither is a string.

This is sound only for code the grader can read: reflection, code made at run time, modules used
as values and patched libraries are refused outright by `autograder.sandbox.policy`, which leans on the
same resolution. Uses spread from a statement to the names it binds, then to every name that
refers to a tainted name or is changed by a tainted function (`spread`).
"""
from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass, field

from autograder.sandbox.extract import Cell

# The grader's own code in the worker: graded code that imports it may rewrite what the worker reports.
# (The policy refuses such imports outright; this stays for callers that ask who reaches the engine.)
ENGINE_NAMES = frozenset({"autograder", "lmgrade", "Worker", "op_device", "op_vjp", "op_call", "op_getattr",
                          "place_tensors", "CappedWriter"})


@dataclass(frozen=True)
class Use:
    api: str  # the banned identifier, or what the policy refuses, as written
    cell: int  # cell number a student sees
    line: int  # line within the cell
    how: str = ""  # "" for a direct use; else why the grader counts it

    def __str__(self) -> str:
        how = f": {self.how}" if self.how else ""
        return f"`{self.api}` (graded cell {self.cell}, line {self.line}{how})"


@dataclass(eq=False)
class Scope:
    kind: str  # "module", "function" (def and lambda), "class" or "comprehension"
    parent: Scope | None
    bindings: dict[str, set] = field(default_factory=dict)  # name -> import paths bound to it; None: the student's
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)

    @property
    def at_load(self) -> bool:
        """Code in this scope runs when the cells are loaded (not only when a function is called)."""
        scope = self
        while scope is not None:
            if scope.kind == "function":
                return False
            scope = scope.parent
        return True


_LAST: tuple | None = None  # (cells, Program) of the last grade: see Program.of


class Program:
    """The graded cells as the one module the worker makes of them, with every name resolvable."""

    @classmethod
    def of(cls, cells: list[Cell]) -> "Program":
        """The Program of these cells, built once for the policy and both forbidden scans of a grade
        (building one walks every syntax tree; it is read, never changed, after it is built)."""
        global _LAST
        key = tuple((cell.number, cell.source) for cell in cells)
        if _LAST is None or _LAST[0] != key:
            _LAST = (key, cls(cells))
        return _LAST[1]

    def __init__(self, cells: list[Cell]):
        self.module = Scope("module", None)
        self.stmts: list[tuple[int, ast.stmt]] = []  # (cell number, top-level statement)
        self.scope_of: dict[int, Scope] = {}  # id(node) -> the scope the node is evaluated in
        self._paths: dict[int, set[str]] = {}  # id(node) -> `paths(node)`, once computed
        for cell in cells:
            try:
                tree = ast.parse(cell.source)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # extract leaves such cells out; nothing of them runs
            self.stmts += [(cell.number, stmt) for stmt in tree.body]
            for stmt in tree.body:
                self._visit(stmt, self.module)

    # ---- building the scopes ----
    def _bind(self, scope: Scope, name: str, path: str | None) -> None:
        if name in scope.declared_global:
            scope = self.module
        elif name in scope.declared_nonlocal:
            scope = scope.parent
            while scope.kind == "class":
                scope = scope.parent
        scope.bindings.setdefault(name, set()).add(path)

    def _visit(self, root: ast.AST, scope: Scope) -> None:
        """Give every node under `root` its scope and record every binding (a stack, not recursion: a
        graded cell may nest expressions thousands deep)."""
        todo = [(root, scope)]
        while todo:
            node, scope = todo.pop()
            if node is not None:
                todo += self._enter(node, scope)

    def _enter(self, node: ast.AST, scope: Scope) -> list:
        """Record what `node` binds; return its children, each with the scope it is evaluated in."""
        self.scope_of[id(node)] = scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # decorators, defaults and annotations run where the def is; the body in a scope of its own
            if not isinstance(node, ast.Lambda):
                self._bind(scope, node.name, None)
            args = node.args
            every = [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a]
            outside = [*getattr(node, "decorator_list", []), *args.defaults, *args.kw_defaults,
                       *(a.annotation for a in every), getattr(node, "returns", None)]
            inner = Scope("function", scope)
            for a in every:
                self.scope_of[id(a)] = inner
                self._bind(inner, a.arg, None)
            body = node.body if isinstance(node.body, list) else [node.body]
            self._declare(body, inner)
            return [(n, scope) for n in outside] + [(n, inner) for n in body]
        if isinstance(node, ast.ClassDef):
            self._bind(scope, node.name, None)
            inner = Scope("class", scope)
            self._declare(node.body, inner)
            return [(n, scope) for n in (*node.decorator_list, *node.bases, *node.keywords)] + [
                (n, inner) for n in node.body]
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = Scope("comprehension", scope)
            children = [(node.generators[0].iter, scope)]  # the first iterable is evaluated outside
            for index, gen in enumerate(node.generators):
                self.scope_of[id(gen)] = inner
                children += [(n, inner) for n in ([gen.iter] if index else []) + [gen.target, *gen.ifs]]
            return children + [(n, inner) for n in ([node.key, node.value] if isinstance(node, ast.DictComp)
                                                    else [node.elt])]
        if isinstance(node, ast.NamedExpr):
            target = scope
            while target.kind == "comprehension":  # `:=` binds in the enclosing function or module
                target = target.parent
            self.scope_of[id(node.target)] = target
            self._bind(target, node.target.id, None)
            return [(node.value, scope)]
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            self._bind(scope, node.id, None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    self._bind(scope, *import_binding(node, alias))
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            self._bind(scope, node.name, None)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self._bind(scope, node.rest, None)
        return [(child, scope) for child in ast.iter_child_nodes(node)]

    def _declare(self, body: list, scope: Scope) -> None:
        """`global` / `nonlocal` hold for the whole block, wherever in it they are written."""
        for node in _same_block(body):
            if isinstance(node, ast.Global):
                scope.declared_global.update(node.names)
            elif isinstance(node, ast.Nonlocal):
                scope.declared_nonlocal.update(node.names)

    # ---- resolving ----
    def scope_holding(self, name: str, scope: Scope) -> Scope | None:
        """The scope whose binding `name` read in `scope` refers to; None for a built-in."""
        if name in scope.declared_global:
            return self.module if name in self.module.bindings else None
        if name in scope.bindings and name not in scope.declared_nonlocal:
            return scope
        outer = scope.parent
        while outer is not None and outer.kind != "module":
            if outer.kind != "class" and name in outer.bindings and name not in outer.declared_nonlocal:
                return outer
            if outer.kind != "class" and name in outer.declared_global:
                break
            outer = outer.parent
        return self.module if name in self.module.bindings else None

    def binding_scope(self, node: ast.Name | ast.arg) -> Scope | None:
        """Where the name at `node` is bound (None: a built-in)."""
        name = node.arg if isinstance(node, ast.arg) else node.id
        return self.scope_holding(name, self.scope_of.get(id(node), self.module))

    def binding(self, node: ast.Name) -> set:
        """What the name at `node` can be: import paths and None (the student's); empty: a built-in."""
        scope = self.binding_scope(node)
        return scope.bindings[node.id] if scope is not None else set()

    def is_builtin(self, node: ast.AST, name: str | None = None) -> bool:
        """Is `node` a bare name that only Python's built-ins bind (the student binds it nowhere it is seen)?"""
        return (isinstance(node, ast.Name) and (name is None or node.id == name)
                and not self.binding(node))

    def paths(self, node: ast.AST) -> set[str]:
        """The library paths an expression names: `G.softmax` -> {"torch.nn.functional.softmax"}."""
        chain, start = [], node
        while id(node) not in self._paths:
            name = node.attr if isinstance(node, ast.Attribute) else (
                literal_getattr(node) if isinstance(node, ast.Call) and self.is_builtin(node.func, "getattr") else None)
            if name is None:
                self._paths[id(node)] = ({p for p in self.binding(node) if p is not None}
                                         if isinstance(node, ast.Name) else set())
                break
            chain.append((node, name))
            node = node.value if isinstance(node, ast.Attribute) else node.args[0]
        found = self._paths[id(node)]
        for link, name in reversed(chain):  # from the root outwards
            found = {f"{p}.{name}" for p in found}
            self._paths[id(link)] = found
        return self._paths[id(start)]

    def global_names(self, stmt: ast.stmt) -> set[str]:
        """Names `stmt` reads from the module (or the built-ins): not its locals, parameters or attributes."""
        return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                and self.binding_scope(n) in (self.module, None)}

    def at_load(self, node: ast.AST) -> bool:
        return self.scope_of.get(id(node), self.module).at_load


def import_binding(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    """(name bound, library path it holds): `import a.b` binds `a` to "a"; `import a.b as c`, c to "a.b"."""
    if isinstance(node, ast.Import):
        if alias.asname:
            return alias.asname, alias.name
        root = alias.name.split(".")[0]
        return root, root
    module = "." * node.level + (node.module or "")
    return alias.asname or alias.name, f"{module}.{alias.name}" if node.module else module + alias.name


def import_paths(node: ast.Import | ast.ImportFrom) -> list[tuple[ast.alias, str]]:
    """Every full path an import statement loads: `from a.b import c` loads "a.b.c"."""
    if isinstance(node, ast.Import):
        return [(alias, alias.name) for alias in node.names]
    module = "." * node.level + (node.module or "")
    return [(alias, module if alias.name == "*" else f"{module}.{alias.name}" if node.module else module + alias.name)
            for alias in node.names]


def literal_getattr(node: ast.AST) -> str | None:
    """"x" for `getattr(obj, "x")` / `getattr(obj, "x", default)` / `hasattr(obj, "x")`: a name the grader can read."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"}
            and not node.keywords and 2 <= len(node.args) <= (3 if node.func.id == "getattr" else 2)
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            and node.args[1].value.isidentifier()):
        return node.args[1].value
    return None


def _same_block(body: list):
    """The nodes of one function or class block: nested defs, lambdas and classes are their own blocks."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo += ast.iter_child_nodes(node)


def label(node: ast.AST) -> str:
    """The code of `node`, short enough for a message."""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a label only
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


class Banned:
    """An assignment's `forbidden` list: exact names, and families written as glob patterns.

    Why patterns: a routine has more spellings than a list can hold (torch computes a layer norm
    as `layer_norm`, `native_layer_norm`, and `group_norm` with one group or `instance_norm` on a
    reshaped input), so an assignment bans the family (`*group_norm*`, `*GroupNorm*`). An exact name
    matches any part of an import path (`lr_scheduler` in `torch.optim.lr_scheduler.StepLR`); a
    pattern matches the routine's own name, the last part, so a family never bans the module a
    legitimate helper lives in (`*_rnn*` leaves `torch.nn.utils.rnn.pad_sequence` alone).
    """

    def __init__(self, names):
        names = set(names)
        patterns = sorted(n for n in names if any(c in n for c in "*?["))
        self.exact = names - set(patterns)
        self.family = re.compile("|".join(fnmatch.translate(p) for p in patterns)) if patterns else None

    def __bool__(self) -> bool:
        return bool(self.exact) or self.family is not None

    def routine(self, name: str) -> bool:
        """A banned routine's own name (the last part of a path)."""
        return name in self.exact or (self.family is not None and self.family.match(name) is not None)

    def in_path(self, path: str) -> list[str]:
        """The banned parts of an import path."""
        parts = path.split(".")
        return [p for p in parts[:-1] if p in self.exact] + ([parts[-1]] if self.routine(parts[-1]) else [])


def banned_uses(program: Program, stmt: ast.stmt, cell: int, banned: Banned) -> list[Use]:
    """Where `stmt` reaches a banned routine: an import of it, or a name or attribute chain resolving to it."""
    found = []
    for node in ast.walk(stmt):
        line = getattr(node, "lineno", stmt.lineno)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [Use(part, cell, line) for _, path in import_paths(node) for part in banned.in_path(path)]
        elif isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and not (
                isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)):
            for path in sorted(program.paths(node)):
                last = path.rsplit(".", 1)[-1]
                if banned.routine(last):
                    written = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
                    found.append(Use(last, cell, line, "" if written == last else f"`{label(node)}` is `{path}`"))
    return found


def tainted_names(cells: list[Cell], banned) -> dict[str, list[Use]]:
    """Top-level name -> the banned uses it reaches, directly or through other top-level names.
    `banned`: names and glob patterns (see `Banned`)."""
    banned = banned if isinstance(banned, Banned) else Banned(banned)
    if not banned:
        return {}
    program = Program.of(cells)
    uses_of = [banned_uses(program, stmt, cell, banned) for cell, stmt in program.stmts]
    return spread(program, uses_of)


def spread(program: Program, uses_of: list[list], owners_of: list | None = None) -> dict[str, list]:
    """Top-level name -> uses, from the uses found in each top-level statement.

    A statement's uses go to `owners_of[i]` when given, else to the names it binds (a def, a class, an
    assignment, `Cls.forward = ...` changes `Cls`, `global x` in a function), or, binding nothing, to
    the student's names it refers to. They then spread to every name that refers to a tainted name
    and to every global a tainted function changes (`_impl.append(...)`), until nothing changes.
    """
    stmts = [stmt for _, stmt in program.stmts]
    bound_by = [bound_names(stmt) for stmt in stmts]
    student_names = set().union(*bound_by)
    is_import = [isinstance(stmt, (ast.Import, ast.ImportFrom)) for stmt in stmts]
    imports_only = set().union(*(b for b, i in zip(bound_by, is_import) if i)) - set().union(
        *(b for b, i in zip(bound_by, is_import) if not i))
    plain_globals = set().union(*(b for b, s in zip(bound_by, stmts)
                                  if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign))))
    direct: dict[str, list] = {}
    refs: dict[str, set[str]] = {}
    changes: dict[str, set[str]] = {}  # name -> globals its code changes (appends to, assigns into)
    for index, (stmt, bound, uses) in enumerate(zip(stmts, bound_by, uses_of)):
        referenced = program.global_names(stmt)
        changed = _changed_globals(stmt, plain_globals)
        if not is_import[index]:  # `a, b = ...`: tainting one taints the other
            changed |= bound - {getattr(stmt, "name", None)}
        owners = owners_of[index] if owners_of is not None and owners_of[index] is not None else (
            bound or (referenced & student_names) - imports_only)
        for name in owners if uses else ():
            direct.setdefault(name, []).extend(uses)
        for name in bound:
            refs.setdefault(name, set()).update(referenced - {name})
            changes.setdefault(name, set()).update(changed - {name})
    tainted = {name: list(uses) for name, uses in direct.items() if uses}
    changed = True
    while changed:  # propagate through helpers and the globals they change until nothing changes
        changed = False
        for name in list(tainted):
            for target in sorted(changes.get(name, ())):
                if target not in tainted:
                    tainted[target] = tainted[name][:1]
                    changed = True
        for name, referenced in refs.items():
            if name in tainted:
                continue
            via = [tainted[r][0] for r in sorted(referenced) if r in tainted]
            if via:
                tainted[name] = via
                changed = True
    return tainted


def _root(node: ast.AST) -> ast.AST:
    """`a` for `a.b[c].d(e).f`: what an attribute chain starts from."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def bound_names(stmt: ast.stmt) -> set[str]:
    """Module-level names a top-level statement (re)binds or changes, wherever it nests them.

    Includes the root of attribute and item assignments (`Cls.forward = ...` changes `Cls`) and names
    a function declares `global`.
    """
    names: set[str] = set()

    def visit(node, top: bool):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if top:
                names.add(node.name)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Global):
                    names.update(sub.names)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(import_binding(node, a)[0] for a in node.names if a.name != "*")
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With,
                             ast.AsyncWith, ast.NamedExpr, ast.Delete)):
            targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                       [i.optional_vars for i in node.items if i.optional_vars] if isinstance(node, (ast.With, ast.AsyncWith))
                       else [node.target])
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
                root = _root(target)
                if isinstance(root, ast.Name):
                    names.add(root.id)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.NamedExpr, ast.match_case)):
                visit(child, top)
            elif isinstance(child, ast.expr):
                for sub in ast.walk(child):
                    if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                        names.add(sub.target.id)
        if isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)

    visit(stmt, True)
    return names


def _changed_globals(stmt: ast.stmt, plain_globals: set[str]) -> set[str]:
    """Globals a statement's code changes in place: `x.append(...)`, `x[k] = ...`, `Cls.attr = ...`, `global x`."""
    changed = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Global):
            changed.update(node.names)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, (ast.Attribute, ast.Subscript)):
                    root = _root(target)
                    if isinstance(root, ast.Name) and root.id != "self":
                        changed.add(root.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            root = _root(node.func.value)
            if isinstance(root, ast.Name) and root.id in plain_globals:
                changed.add(root.id)
    return changed
