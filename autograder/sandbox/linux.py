"""What several confinement steps share of the Linux kernel: the C library for raw syscalls, the
prctl options more than one of them sets, whether /proc tells about processes, and the POSIX-only
modules (`fcntl`, `resource`; None on Windows).

Why a file of its own: capabilities, namespaces, Landlock and the worker's start all call into
libc; one handle and one errno check keep them from drifting apart. Elsewhere (macOS, Windows)
`LIBC` is None and every caller falls back to what it can do without it.
"""
from __future__ import annotations

import ctypes
import os
import sys

try:  # POSIX only: Windows students still run the public checks, without limits
    import fcntl
except ImportError:
    fcntl = None
try:
    import resource
except ImportError:
    resource = None

LIBC = None
if sys.platform.startswith("linux"):
    try:
        LIBC = ctypes.CDLL(None, use_errno=True)
        LIBC.syscall.restype = ctypes.c_long
    except OSError:
        LIBC = None
# Linux with /proc: the grader can see a worker's user namespace and take the fast paths of processes.py
HAVE_PROC = sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")
# where psutil sees every process's parent and CPU times, the grader keeps CPU-time deadlines and walks
# process trees; elsewhere (Windows) deadlines are wall time and a worker is killed by process group
WALKS_TREES = HAVE_PROC or sys.platform == "darwin"
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38


def check(result: int) -> int:
    """`result` of a libc call, or OSError from errno when it failed (< 0)."""
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result
