"""The engine's layout holds as docs/architecture.md draws it: folders import only the folders below
them, and the worker process loads nothing of the grader's side."""
import ast
import subprocess
import sys
from pathlib import Path

import autograder

# bottom to top, as docs/architecture.md lists them; a module may import its own floor and those below
FLOORS = (("errors", "data"), ("sandbox",), ("checking",), ("authoring",), ("grading",), ("student",),
          ("cli", "__main__"))
FLOOR_OF = {part: level for level, parts in enumerate(FLOORS) for part in parts}


def engine_imports():
    """(importing module's part, imported part, where) for every import of the engine, at any depth."""
    for path in sorted(autograder.PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(autograder.PACKAGE_DIR)
        if rel.parts == ("__init__.py",):
            continue  # the package hands check_notebook / export_answers to notebooks, lazily
        part = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "autograder":
                names = [node.module + "." + a.name if node.module == "autograder" else node.module for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.split(".")[0] == "autograder"]
            for name in names:
                target = name.split(".")[1] if "." in name else None
                if target in FLOOR_OF:
                    yield part, target, f"{rel}:{node.lineno}"


def test_imports_only_go_down():
    upward = [(where, f"{part} imports {target}") for part, target, where in engine_imports()
              if FLOOR_OF[target] > FLOOR_OF[part]]
    assert upward == []


def test_every_engine_folder_has_a_floor():
    folders = {p.name for p in autograder.PACKAGE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    files = {p.stem for p in autograder.PACKAGE_DIR.glob("*.py") if p.stem != "__init__"}
    assert folders | files <= set(FLOOR_OF)


def test_the_worker_loads_nothing_of_the_graders_side():
    """The untrusted process imports the worker, support, wire and its guard, never the checks, grading or psutil."""
    code = ("import sys, autograder.sandbox.worker, autograder.sandbox.support, autograder.sandbox.simulated_device; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('autograder') or m == 'psutil')))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                cwd=Path(autograder.PACKAGE_DIR).parent).stdout.split())
    assert loaded == {"autograder", "autograder.sandbox", "autograder.sandbox.worker", "autograder.sandbox.support",
                      "autograder.sandbox.wire", "autograder.sandbox.simulated_device", "autograder.sandbox.guard"}


def test_the_fork_server_loads_only_the_sandbox():
    """A forked worker holds what its server imported: the sandbox's own files, never the checks or psutil."""
    code = ("import sys, autograder.sandbox.forkserver, autograder.sandbox.worker, autograder.sandbox.support; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('autograder') or m == 'psutil')))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                cwd=Path(autograder.PACKAGE_DIR).parent).stdout.split())
    assert {"autograder.sandbox.forkserver", "autograder.sandbox.confine"} <= loaded
    assert all(m == "autograder" or m.startswith("autograder.sandbox") for m in loaded), loaded
