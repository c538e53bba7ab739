"""Each worker's cgroups (Linux): made below the grader's own cgroup in every hierarchy where the
grader may make one, joined by the worker before anything of the student's runs, read by the clock,
killed and removed with the worker.

Why: the kernel counts and bounds a cgroup's processes together, whatever they did to hide (setsid,
a double fork, a nested user namespace), so a fork bomb or CPU-burning orphans take their own
worker's share and no one else's, their CPU counts against their worker's call, and `cgroup.kill`
ends all of them at once.

Where a cgroup can be made:
  * v1 hierarchies (`pids`, `cpu`, `cpuacct`, `memory`), as root;
  * cgroup v2, as root, and as a user whose own cgroup was delegated to them (`systemd-run --user
    --scope -p Delegate=yes`, or a Slurm or container cgroup the user owns). A v2 cgroup always
    gives `cgroup.kill`, its member list and `cpu.stat`; its limits (`pids.max`, `memory.max`) need
    the grader's cgroup to hand those controllers to its children. The kernel lets a cgroup other
    than the root hand controllers on only while it holds no process itself, so when the grader's
    cgroup offers controllers it does not yet hand on, and every process in it is the grader's own
    (a container, a Slurm job step, a delegated scope), the grader moves them to a leaf of their own
    (`lmgrade-grader-<pid>`) and enables the controllers, as container runtimes do. Where another
    process shares that cgroup (a root shell's systemd session scope), nobody is moved: the worker's
    v2 cgroup still counts and kills, without limits (docs/security.md says what holds then).
"""
from __future__ import annotations

import errno
import os
import tempfile
import time
from pathlib import Path

from autograder.sandbox.limits import is_root
from autograder.sandbox.linux import HAVE_PROC
from autograder.sandbox.processes import alive, children

WORKER_PREFIX = "lmgrade-worker-"  # + the grader's pid + "-" + random: whose it was, for the start-up sweep
GRADER_LEAF_PREFIX = "lmgrade-grader-"  # + the grader's pid: where the grader moved itself to hand on controllers
V1_CONTROLLERS = ("pids", "cpu", "cpuacct", "memory")
_swept: set[Path] = set()  # bases swept of leftovers by this process
_handed: set[Path] = set()  # v2 bases whose controllers this process handed on (or tried to)


def worker_cgroups(tasks: int, memory: int | None) -> list[Path]:
    """A new cgroup for one worker in every hierarchy where one can be made (see the module's
    docstring), each below the grader's own cgroup there: at most `tasks` processes and `memory`
    bytes for all of them together where the controller is there, an equal CPU share (the default
    weight). Empty where none can be made (a user without a delegated cgroup, no cgroup file system,
    a read-only one)."""
    if not HAVE_PROC:
        return []
    try:
        own = own_cgroups(Path("/proc/self/cgroup").read_text())
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    made = []
    for line in mounts:
        fields = line.split()
        kind = fields[fields.index("-") + 1] if "-" in fields else ""
        if kind == "cgroup" and is_root():
            options = fields[-1].split(",")
            wanted = [c for c in V1_CONTROLLERS if c in options and c in own]
            if not wanted:
                continue
            base = Path(fields[4]) / own[wanted[0]].lstrip("/")
            settings = {"pids.max": str(tasks)} if "pids" in wanted else {}
            if "memory" in wanted and memory is not None:
                settings["memory.limit_in_bytes"] = str(memory)
        elif kind == "cgroup2" and "" in own:
            base = v2_base(Path(fields[4]) / own[""].lstrip("/"))
            if base is None:
                continue
            handed = read_words(base / "cgroup.subtree_control")
            settings = {"pids.max": str(tasks)} if "pids" in handed else {}
            if "memory" in handed and memory is not None:
                settings["memory.max"] = str(memory)
        else:
            continue
        sweep(base)
        try:
            group = Path(tempfile.mkdtemp(prefix=f"{WORKER_PREFIX}{os.getpid()}-", dir=base))
        except OSError:
            continue
        try:
            for name, value in settings.items():
                (group / name).write_text(value)
        except OSError:
            remove_cgroups([group])
            continue
        made.append(group)
    return made


def own_cgroups(text: str) -> dict[str, str]:
    """The grader's cgroup path per v1 controller, and under "" in v2, from /proc/self/cgroup's text."""
    own = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def read_words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def v2_base(own: Path) -> Path | None:
    """The v2 cgroup below which this grader makes its workers' cgroups, with the controllers it
    offers handed on where they can be; None where this process may not make cgroups there.

    A grader that moved itself to its leaf (or a grader started by one, in a batch) makes them
    beside that leaf, in the cgroup it came from."""
    base = own.parent if own.name.startswith(GRADER_LEAF_PREFIX) else own
    if not os.access(base / "cgroup.procs", os.W_OK) or not os.access(base, os.W_OK):
        return None  # not root and not delegated to us
    if base not in _handed:  # once per process: where it could not, it will not later either
        _handed.add(base)
        hand_on_controllers(base)
    return base


def hand_on_controllers(base: Path) -> None:
    """Enable for `base`'s children every controller it offers (as a runtime that delegates a subtree
    does), moving the grader's own processes to a leaf first if the kernel asks for it and nobody else
    is in `base`. Never in the machine's root cgroup (it has no `cgroup.type`): that is the system's."""
    offered, handed = read_words(base / "cgroup.controllers"), read_words(base / "cgroup.subtree_control")
    wanted = [c for c in offered if c not in handed]
    if not wanted or not (base / "cgroup.type").exists():
        return
    if _hand_on(base, wanted) != errno.EBUSY:
        return
    members = {int(pid) for pid in read_words(base / "cgroup.procs")}
    if not members or not members <= own_processes():
        return  # someone else lives here (a shell in its session scope): leave everyone where they are
    leaf = base / f"{GRADER_LEAF_PREFIX}{os.getpid()}"
    try:
        leaf.mkdir(exist_ok=True)
        for pid in sorted(members):
            try:
                (leaf / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:  # it ended meanwhile
                pass
    except OSError:
        return
    _hand_on(base, wanted)


def _hand_on(base: Path, wanted: list[str]) -> int:
    """Write `+controller` for each wanted one (one at a time: one the kernel refuses leaves the rest);
    0, or the errno of the first refusal."""
    first = 0
    for controller in wanted:
        try:
            (base / "cgroup.subtree_control").write_text(f"+{controller}")
        except OSError as exc:
            first = first or exc.errno or -1
    return first


def own_processes() -> set[int]:
    """This process and every process it started (the fork server, other graders of a batch)."""
    found, stack = set(), [os.getpid()]
    while stack:
        pid = stack.pop()
        found.add(pid)
        stack += [child for child in children(pid) if child not in found]
    return found


def sweep(base: Path) -> None:
    """Once per base and process: remove the empty cgroups that graders killed with SIGKILL left behind
    (theirs was named after them and they are gone; an unnamed one is from an older release).
    rmdir removes only an empty cgroup, so a live one is never harmed."""
    if base in _swept:
        return
    _swept.add(base)
    try:
        entries = [entry for entry in base.iterdir() if entry.is_dir()]
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(WORKER_PREFIX):
            owner = entry.name[len(WORKER_PREFIX):].split("-")[0]
        elif entry.name.startswith(GRADER_LEAF_PREFIX):
            owner = entry.name[len(GRADER_LEAF_PREFIX):]
        else:
            continue
        if owner.isdigit() and (int(owner) == os.getpid() or alive(int(owner))):
            continue
        remove_cgroups([entry], patience=0)


def cgroup_cpu(groups) -> float | None:
    """CPU seconds used so far by everything that ever ran in the worker's cgroups (v1 `cpuacct.usage`,
    v2 `cpu.stat`'s usage_usec), exited and unreaped processes included; None where none counts CPU."""
    found = None
    for group in groups:
        try:
            if (group / "cpuacct.usage").exists():
                seconds = int((group / "cpuacct.usage").read_text()) / 1e9
            else:
                stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines() if line.strip())
                if "usage_usec" not in stat:
                    continue
                seconds = int(stat["usage_usec"]) / 1e6
        except (OSError, ValueError):
            continue
        found = seconds if found is None else max(found, seconds)
    return found


def cgroup_members(groups: list[Path]) -> set[int]:
    """Every process still in the worker's cgroups or below them (what the grader kills last)."""
    found = set()
    for group in groups:
        for folder in [group, *sorted(p for p in group.rglob("*") if p.is_dir())] if group.is_dir() else []:
            try:
                found.update(int(pid) for pid in (folder / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
    return found


def kill_cgroups(groups: list[Path]) -> None:
    """v2: every process in the cgroups and below, at once (`cgroup.kill`, Linux 5.14+); v1 has none,
    and the caller kills `cgroup_members` one by one."""
    for group in groups:
        try:
            (group / "cgroup.kill").write_text("1")
        except OSError:
            pass


def remove_cgroups(groups: list[Path], patience: int = 50) -> None:
    """Remove the worker's cgroups once they are empty (a killed process leaves them a moment later),
    deepest first: rmdir removes only a cgroup without children."""
    for group in groups:
        try:
            nested = sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        except OSError:
            nested = []
        for folder in [*nested, group]:
            for attempt in range(patience + 1):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt < patience:
                        time.sleep(0.02)
