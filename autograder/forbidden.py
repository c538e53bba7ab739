"""Which of the student's names rely on a library routine the assignment asks them to write.

Why static, on the trusted side: the answer must not depend on code the student controls at run
time. The scan reads the graded cells' syntax trees: a banned routine counts as used when it is
reached as an attribute (`F.scaled_dot_product_attention`), imported by name (`from torch.nn
import MultiheadAttention`) or fetched with a literal string (`getattr(F, "scaled_dot...")`). A
student's own function with the same name is not a use. Names are tainted through the student's
own helpers: a class that calls a helper that calls the built-in is tainted too.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from autograder.extract import Cell, top_level_names


@dataclass(frozen=True)
class Use:
    api: str  # the banned identifier as written
    cell: int  # cell number a student sees
    line: int  # line within the cell

    def __str__(self) -> str:
        return f"`{self.api}` (graded cell {self.cell}, line {self.line})"


def banned_uses(node: ast.AST, banned: set[str], cell: int) -> list[Use]:
    """Every way `node` reaches a banned identifier other than through a plain local name."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in banned:
            found.append(Use(sub.attr, cell, sub.lineno))
        elif isinstance(sub, ast.ImportFrom):
            found += [Use(a.name, cell, sub.lineno) for a in sub.names if a.name in banned]
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found += [Use(b, cell, sub.lineno) for b in banned if b in sub.value and _is_lookup(sub, node)]
    return found


def _is_lookup(constant: ast.Constant, root: ast.AST) -> bool:
    """Is this string an argument of getattr/__import__/import_module (not a docstring or message)?"""
    for sub in ast.walk(root):
        if isinstance(sub, ast.Call) and constant in sub.args:
            func = sub.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            return name in {"getattr", "__import__", "import_module", "eval", "exec"}
    return False


def tainted_names(cells: list[Cell], banned: set[str]) -> dict[str, list[Use]]:
    """Top-level name -> the banned uses it reaches, directly or through other top-level names."""
    if not banned:
        return {}
    direct: dict[str, list[Use]] = {}
    refs: dict[str, set[str]] = {}
    for cell in cells:
        for stmt in ast.parse(cell.source).body:
            defined = top_level_names(ast.Module(body=[stmt], type_ignores=[]))
            uses = banned_uses(stmt, banned, cell.number)
            referenced = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            for name in defined:
                direct.setdefault(name, []).extend(uses)
                refs.setdefault(name, set()).update(referenced - {name})
    tainted = {name: list(uses) for name, uses in direct.items() if uses}
    changed = True
    while changed:  # propagate through helpers until nothing changes
        changed = False
        for name, referenced in refs.items():
            if name in tainted:
                continue
            via = [tainted[r][0] for r in sorted(referenced) if r in tainted]
            if via:
                tainted[name] = via
                changed = True
    return tainted
