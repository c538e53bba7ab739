"""Which of the student's names rely on a library routine the assignment asks them to write.

Why static, on the trusted side: the answer must not depend on code the student controls at run
time. The scan reads the graded cells' syntax trees. A banned routine counts as used when it is

* reached as an attribute, under any alias (`F.scaled_dot_product_attention`, `G.…` after
  `import torch.nn.functional as G`, `torch.ops.aten._scaled_dot_product_flash_attention`);
* imported by name (`from torch.nn import MultiheadAttention as M`), or used as a bare name that a
  star import (`from torch.nn.functional import *`) can have bound;
* named by a string anywhere in graded code: a literal containing the name as a word, literals
  folded together (`"scaled_dot_" + "product_attention"`, f-strings, `"".join([...])`, `[::-1]`),
  or pieces that only spell it when put side by side. Docstrings (the first statement of a module,
  cell, class or function) and the message of a raised built-in exception are text, not lookups;
* looked up by a name the grader cannot read: `getattr(module, computed)`, `vars(module)`,
  `module.__dict__`, `__getattribute__`, `operator.attrgetter(computed)`, `eval`/`exec`/
  `import_module` of a computed string, or `getattr`/`vars` passed around as values.

A student's own function with the same name is not a use. Names are tainted through the student's
own helpers (a class that calls a helper that calls the built-in), through globals a tainted
function changes (`_impl.append(F.…)`, `Cls.forward = …`, `global x`), and a top-level statement
that rewrites namespaces (`globals()`, `setattr`, `sys.modules`, `exec`) taints every name. What
this cannot see (a name computed at run time and reached by a route not listed) is covered by the
policy stated in the starter: getting round the ban counts as not attempting the question.
"""
from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass

from autograder.extract import Cell

# The grader's own code in the worker: graded code that names it may rewrite what the worker reports.
ENGINE_NAMES = frozenset({"autograder", "lmgrade", "Worker", "op_meta", "op_vjp", "op_call", "op_getattr",
                          "place_tensors", "CappedWriter"})
# Reading or rewriting namespaces from the top level: such a statement can rebind any name.
NAMESPACE_TOOLS = {"globals", "locals", "setattr", "exec", "eval", "compile", "builtins", "__builtins__", "sys"}
NAMESPACE_ATTRS = {"__builtins__", "__globals__", "f_globals", "modules", "__setattr__"}
# Calls that look a name up; with a computed (non-literal) name they can reach anything.
LOOKUP_CALLS = {"getattr", "attrgetter", "methodcaller", "getattr_static", "eval", "exec", "compile",
                "import_module", "__import__", "getmembers"}
BUILTIN_EXCEPTIONS = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                      and issubclass(getattr(builtins, n), BaseException)}


@dataclass(frozen=True)
class Use:
    api: str  # the banned identifier as written, or the computed lookup (`vars(F)`)
    cell: int  # cell number a student sees
    line: int  # line within the cell
    how: str = ""  # "" for a direct use; else why the grader counts it

    def __str__(self) -> str:
        how = f": {self.how}" if self.how else ""
        return f"`{self.api}` (graded cell {self.cell}, line {self.line}{how})"


def _word(name: str) -> re.Pattern:
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")


def _root(node: ast.AST) -> ast.AST:
    """`a` for `a.b[c].d(e).f`: what an attribute chain starts from."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _text_constants(tree: ast.AST) -> set[int]:
    """ids of string constants that are text, not data: docstrings, and the messages of `raise
    <built-in exception>(...)`, `assert ..., msg`, `print(...)` and `warnings.warn(...)`.

    Why these are safe to skip: such a string only reaches the exception, the assertion or the
    output; reading it back into a lookup (`getattr(F, e.args[0])`) is a computed lookup, which
    counts. Only constants and the literal parts of f-strings given directly are text.
    """
    text: set[int] = set()

    def message(node) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text.add(id(node))
        elif isinstance(node, ast.JoinedStr):
            text.update(id(v) for v in node.values if isinstance(v, ast.Constant))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                text.add(id(first.value))
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            if isinstance(func, ast.Name) and func.id in BUILTIN_EXCEPTIONS and not node.exc.keywords:
                for arg in node.exc.args:
                    message(arg)
        elif isinstance(node, ast.Assert) and node.msg is not None:
            message(node.msg)
        elif isinstance(node, ast.Call) and not node.keywords and (
                (isinstance(node.func, ast.Name) and node.func.id == "print")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings")):
            for arg in node.args:
                message(arg)
    return text


def _fold(node: ast.AST) -> str | None:
    """The string a constant expression evaluates to, for `+`, f-strings, `sep.join([...])` and `[::-1]`."""
    if isinstance(node, ast.Constant):
        return _text(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left), _fold(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [_fold(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))):
        sep, items = _fold(node.func.value), [_fold(e) for e in node.args[0].elts]
        return sep.join(items) if sep is not None and all(i is not None for i in items) else None
    if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is None
            and node.slice.upper is None and isinstance(node.slice.step, ast.UnaryOp)):
        inner = _fold(node.value)
        step = node.slice.step
        if inner is not None and isinstance(step.op, ast.USub) and isinstance(step.operand, ast.Constant) \
                and step.operand.value == 1:
            return inner[::-1]
    return None


def _text(value) -> str | None:
    """A constant's text: a str, or bytes read as latin-1 (`b"scaled..."` spells the name too)."""
    if isinstance(value, str):
        return value
    return value.decode("latin-1") if isinstance(value, bytes) else None


def _bound_names(stmt: ast.stmt) -> set[str]:
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
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With,
                             ast.AsyncWith, ast.NamedExpr)):
            targets = (node.targets if isinstance(node, ast.Assign) else
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
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.NamedExpr)) or isinstance(child, ast.match_case):
                visit(child, top)
            elif isinstance(child, ast.expr):
                for sub in ast.walk(child):
                    if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                        names.add(sub.target.id)
        if isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)

    visit(stmt, True)
    return names


def _module_aliases(trees: list[ast.Module]) -> set[str]:
    """Names that may hold a module: bound by an import, or assigned from one (`G = torch.nn.functional`)."""
    aliases = {"torch", "F", "nn"}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                aliases.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    assigns = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            root = _root(node.value)
            from_module = (isinstance(root, ast.Name) and root.id in aliases) or (
                isinstance(node.value, ast.Call) and _call_name(node.value) in {"import_module", "__import__"})
            if not from_module:
                continue
            for target in node.targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name) and sub.id not in aliases:
                        aliases.add(sub.id)
                        changed = True
    return aliases


def _from_module(node: ast.AST, aliases: set[str]) -> bool:
    root = _root(node)
    if isinstance(root, ast.Name) and root.id in aliases:
        return True
    return isinstance(node, ast.Call) and _call_name(node) in {"import_module", "__import__", "type"}


def _label(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a label only
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


class _Scan:
    def __init__(self, banned: set[str], aliases: set[str], library_bound: set[str], text: set[int]):
        self.banned, self.aliases, self.library_bound, self.text = banned, aliases, library_bound, text
        self.words = {b: _word(b) for b in banned}

    def names_in(self, value: str) -> list[str]:
        return [b for b, word in self.words.items() if word.search(value) or word.search(value[::-1])]

    def uses(self, stmt: ast.stmt, cell: int) -> list[Use]:
        """Every way `stmt` reaches a banned routine other than through the student's own names."""
        found: list[Use] = []
        computed = "a lookup by a name the grader cannot read, which could reach built-in attention"
        called = {id(n.func) for n in ast.walk(stmt) if isinstance(n, ast.Call)}
        for sub in ast.walk(stmt):
            line = getattr(sub, "lineno", getattr(stmt, "lineno", 0))
            if isinstance(sub, ast.Attribute):
                if sub.attr in self.banned:
                    found.append(Use(sub.attr, cell, line))
                elif sub.attr in {"__dict__", "__getattr__"} and _from_module(sub.value, self.aliases) or \
                        sub.attr == "__getattribute__":
                    found.append(Use(_label(sub), cell, line, computed))
            elif isinstance(sub, ast.ImportFrom):
                found += [Use(a.name, cell, line) for a in sub.names if a.name in self.banned]
            elif isinstance(sub, ast.Import):
                found += [Use(part, cell, line) for a in sub.names for part in a.name.split(".") if part in self.banned]
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                if sub.id in self.library_bound:
                    found.append(Use(sub.id, cell, line, "a name a star import or no definition of yours gives it"))
                elif sub.id in {"getattr", "vars", "eval", "exec", "attrgetter"} and id(sub) not in called:
                    found.append(Use(sub.id, cell, line, computed))
            elif isinstance(sub, ast.Call):
                found += self._lookup(sub, cell, line, computed)
            elif isinstance(sub, ast.Constant) and _text(sub.value) and id(sub) not in self.text:
                found += [Use(b, cell, line, "named in a string") for b in self.names_in(_text(sub.value))]
            if isinstance(sub, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)):
                value = _fold(sub)
                if value:
                    found += [Use(b, cell, line, "spelled by joining strings") for b in self.names_in(value)]
        return found

    def _lookup(self, call: ast.Call, cell: int, line: int, computed: str) -> list[Use]:
        name = _call_name(call)
        if name not in LOOKUP_CALLS and name != "vars":
            return []
        args = list(call.args)
        if name == "vars":
            return [Use(_label(call), cell, line, computed)] if args and _from_module(args[0], self.aliases) else []
        if name in {"getattr", "getattr_static"}:
            if len(args) >= 2 and _fold(args[1]) is None and _from_module(args[0], self.aliases):
                return [Use(_label(call), cell, line, computed)]
            return []
        if name == "getmembers":
            return [Use(_label(call), cell, line, computed)] if args and _from_module(args[0], self.aliases) else []
        if name in {"eval", "exec", "compile"} and not isinstance(call.func, ast.Name):
            return []  # model.eval(), torch.compile(...): methods, not the built-ins
        if any(_fold(a) is None for a in args) or call.keywords:
            return [Use(_label(call), cell, line, computed)]
        return []


def _library_bound(stmts: list[ast.stmt], banned: set[str]) -> set[str]:
    """Banned names whose module-level binding, after every graded cell has run, is not the student's."""
    state = {b: "unbound" for b in banned}
    for stmt in stmts:
        if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
            state = {b: "library" for b in banned}
            continue
        for name in _bound_names(stmt) & banned:
            state[name] = "student"
    return {b for b, s in state.items() if s != "student"}


def _split_spellings(pieces: list[tuple[str, int, int, int]], banned: set[str]) -> list[tuple[Use, set[int]]]:
    """Banned names that only appear when the literals of graded code are put side by side.

    pieces: (text, statement index, cell, line) in source order. Case and separators are ignored, so
    `["Multihead", "Attention"]` and `("scaled", "dot", "product", "attention")` count.
    """
    joined, owners = "", []
    for piece, (text, stmt, cell, line) in enumerate(pieces):
        squashed = re.sub(r"[^a-z0-9]", "", text.lower())
        joined += squashed
        owners += [(piece, stmt, cell, line)] * len(squashed)
    found = []
    for name in banned:
        target = re.sub(r"[^a-z0-9]", "", name.lower())
        for haystack, order in ((joined, owners), (joined[::-1], owners[::-1])):
            start = haystack.find(target)
            while start >= 0:
                spanned = order[start:start + len(target)]
                if len({piece for piece, _, _, _ in spanned}) > 1:  # within one literal: the word rule decides
                    _, _, cell, line = min(spanned)
                    found.append((Use(name, cell, line, "spelled by strings put side by side"),
                                  {stmt for _, stmt, _, _ in spanned}))
                start = haystack.find(target, start + 1)
    return found


def tainted_names(cells: list[Cell], banned: set[str]) -> dict[str, list[Use]]:
    """Top-level name -> the banned uses it reaches, directly or through other top-level names."""
    if not banned:
        return {}
    trees, stmts = [], []  # stmts: (cell number, statement)
    for cell in cells:
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        trees.append(tree)
        stmts += [(cell.number, stmt) for stmt in tree.body]
    text = set().union(*(_text_constants(t) for t in trees)) if trees else set()
    imports_only = set()
    for _, stmt in stmts:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports_only |= _bound_names(stmt)
    for _, stmt in stmts:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports_only -= _bound_names(stmt)
    scan = _Scan(banned, _module_aliases(trees), _library_bound([s for _, s in stmts], banned), text)

    uses_of: list[list[Use]] = []
    pieces = []
    for index, (cell, stmt) in enumerate(stmts):
        uses_of.append(scan.uses(stmt, cell))
        literals = [n for n in ast.walk(stmt) if isinstance(n, ast.Constant) and _text(n.value) and id(n) not in text]
        pieces += [(_text(n.value), index, cell, n.lineno)
                   for n in sorted(literals, key=lambda n: (n.lineno, n.col_offset))]
    for use, owners in _split_spellings(pieces, banned):
        for index in owners:
            uses_of[index].append(use)

    student_names = set().union(*(_bound_names(s) for _, s in stmts)) if stmts else set()
    direct: dict[str, list[Use]] = {}
    refs: dict[str, set[str]] = {}
    changes: dict[str, set[str]] = {}  # name -> globals its code changes (appends to, assigns into)
    plain_globals = {n for _, s in stmts if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                     for n in _bound_names(s)}
    for (cell, stmt), uses in zip(stmts, uses_of):
        bound = _bound_names(stmt)
        referenced = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        changed = _changed_globals(stmt, plain_globals) | (bound - {getattr(stmt, "name", None)})
        owners = bound
        if uses and _rewrites_namespaces(stmt):
            owners = student_names  # it can rebind anything
        elif uses and not bound:
            owners = (referenced & student_names) - imports_only
        for name in owners:
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


def _rewrites_namespaces(stmt: ast.stmt) -> bool:
    """Can this statement rebind module-level names by other means than assignment (`globals()[k] = v`)?"""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id in NAMESPACE_TOOLS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in NAMESPACE_ATTRS:
            return True
        if isinstance(node, ast.Call) and _call_name(node) == "vars" and not node.args:
            return True
    return False


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
