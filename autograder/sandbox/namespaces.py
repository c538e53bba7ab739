"""What keeps workers apart from each other (Linux): a user namespace of each worker's own, a pids
cgroup as root, an empty session keyring; and finding every process in a worker's user namespace.

Why a file of its own: two students' workers run side by side in a batch, often as the same uid;
the kernel keeps keyrings and the RLIMIT_NPROC count per user namespace, and every process a
worker starts (an orphan that left with setsid included) carries its namespace, so the grader
counts its CPU time and kills it by that. The mount and network namespace flags the worker's
start unshares are here too.
"""
from __future__ import annotations

import ctypes
import os
import tempfile
from pathlib import Path

from autograder.sandbox.limits import is_root
from autograder.sandbox.linux import HAVE_PROC, LIBC, PR_SET_DUMPABLE, check

CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_CLONE_NEWUSER = 0x10000000
_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 280, "s390x": 280}.get(os.uname().machine
                                                                                            if hasattr(os, "uname") else "")
_KEYCTL_JOIN_SESSION_KEYRING = 1


def own_user_namespace(ids: tuple[int, int]) -> bool:
    """In the child before exec: a new user namespace in which it keeps its own uid and gid (best effort).

    Why: the kernel keeps user keyrings and the RLIMIT_NPROC count per user namespace and uid, so a
    worker gets keyrings no other worker or root's shell can see and a process limit of its own,
    even as uid 0 (root's own count is exempt from RLIMIT_NPROC); and every process it starts, an
    orphan that left with setsid included, carries the namespace, so the grader counts and kills by it.
    """
    if LIBC is None:
        return False
    try:
        check(LIBC.unshare(_CLONE_NEWUSER))
    except OSError:
        return False  # user namespaces disabled here: one identity per worker user, said in security.md
    # after setuid the process is not dumpable and its /proc files are root's; exec resets this anyway
    LIBC.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    try:  # unmapped ids would only read as 65534 inside: files are still checked against the real ones
        for name, text in (("setgroups", b"deny"), ("uid_map", b"%d %d 1" % (ids[0], ids[0])),
                           ("gid_map", b"%d %d 1" % (ids[1], ids[1]))):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)
    except OSError:
        pass
    return True


def pids_cgroup(limit: int) -> Path | None:
    """As root: a new pids cgroup capped at `limit` tasks (v1, or v2 at the root), else None.

    Why: root's uid is exempt from RLIMIT_NPROC even in a user namespace, so a worker that keeps
    uid 0 gets its process bound here. The worker joins it before exec and cannot leave it
    (writing another cgroup's files needs rights Landlock withholds)."""
    if not is_root() or not HAVE_PROC:
        return None
    try:
        groups = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    base = None
    for line in mounts:
        fields = line.split()
        kind = fields[fields.index("-") + 1] if "-" in fields else ""
        if kind == "cgroup" and "pids" in fields[-1].split(","):
            own = next((g.split(":", 2)[2] for g in groups if "pids" in g.split(":")[1].split(",")), None)
            base = Path(fields[4]) / (own or "/").lstrip("/") if own is not None else None
        elif kind == "cgroup2" and base is None and "0::/" in groups:
            if "pids" in (Path(fields[4]) / "cgroup.subtree_control").read_text().split():
                base = Path(fields[4])
    if base is None:
        return None
    try:
        group = Path(tempfile.mkdtemp(prefix="lmgrade-worker-", dir=base))
        (group / "pids.max").write_text(str(limit))
    except OSError:
        return None
    return group


def new_session_keyring() -> None:
    """In the child before exec: an empty anonymous session keyring, not the grader's (best effort)."""
    if LIBC is not None and _KEYCTL is not None:
        LIBC.syscall(ctypes.c_long(_KEYCTL), ctypes.c_long(_KEYCTL_JOIN_SESSION_KEYRING), None)


def user_namespace(pid: int) -> int | None:
    """The inode of `pid`'s user namespace (None where /proc cannot tell).

    Linux only: psutil has no call for a process's namespaces; elsewhere (no /proc) always None."""
    try:
        return os.stat(f"/proc/{pid}/ns/user").st_ino
    except OSError:
        return None


def in_user_namespace(userns: int) -> list[int]:
    """Every process in that user namespace (Linux only, see `user_namespace`; elsewhere none)."""
    import psutil  # the grader's side only: a worker imports this file to confine itself

    return [pid for pid in psutil.pids() if user_namespace(pid) == userns]
