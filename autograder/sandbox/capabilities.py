"""Root's powers, taken away: every capability dropped in a worker that keeps uid 0, and the
grader itself made a non-dumpable child subreaper (Linux; nothing happens elsewhere).

Why a file of its own: uid 0 without capabilities is the confinement of a local batch run as root
without a worker user; what is dropped is prepared here in the grader and applied in the child
before exec, and the grader checks afterwards (`capabilities`) that nothing was kept.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

from autograder.sandbox.linux import LIBC, PR_SET_DUMPABLE, check

_PR_SET_CHILD_SUBREAPER = 36
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
_SECURE_NOROOT_ALL = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80  # no root, no setuid fixup, no ambient: locked
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_hardened = False


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class CapDrop:
    """Everything prepared in the parent; `apply` runs in the child before exec (no allocation)."""

    def __init__(self):
        try:
            last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        except (OSError, ValueError):
            last = 63
        self.caps = list(range(last + 1))
        self.header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        self.data = (_CapData * 2)()  # all zero: no effective, permitted or inheritable capability

    def apply(self) -> None:
        """Securebits (best effort), empty bounding and ambient sets, then no capabilities at all.

        With no-new-privileges set afterwards, exec cannot give uid 0 its capabilities back."""
        LIBC.prctl(ctypes.c_int(_PR_SET_SECUREBITS), ctypes.c_ulong(_SECURE_NOROOT_ALL), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0))
        for cap in self.caps:
            LIBC.prctl(ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
                       ctypes.c_ulong(0))
        LIBC.prctl(ctypes.c_int(_PR_CAP_AMBIENT), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0))
        check(LIBC.capset(ctypes.byref(self.header), self.data))


def capabilities(pid: int) -> int | None:
    """The capabilities a process has or can pass on through exec (None where /proc cannot tell);
    its bounding set only limits what it could gain, and no-new-privileges already stops that.

    Linux only: psutil has no call for capabilities, so /proc/<pid>/status is read; elsewhere None."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    caps = 0
    for line in status.splitlines():
        if line.startswith(("CapEff:", "CapPrm:", "CapInh:", "CapAmb:")):
            caps |= int(line.split()[1], 16)
    return caps


def harden_this_process() -> None:
    """Make the trusted process a child subreaper and non-dumpable (Linux; idempotent).

    Subreaper: a student process that double-forks to leave the worker's session is re-parented
    here rather than to init, so `kill_tree` still finds it. Non-dumpable: code running as the
    same user cannot open /proc/<grader>/mem or /fd (read hidden data, write scores, forge replies).
    """
    global _hardened
    if _hardened or LIBC is None:
        return
    _hardened = True
    for option, value in ((_PR_SET_CHILD_SUBREAPER, 1), (PR_SET_DUMPABLE, 0)):
        LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))
