"""Landlock: unprivileged file, network and signal confinement of the worker (Linux >= 5.13).

Why a file of its own: it is a ctypes binding to three syscalls whose structures grow with the
kernel's ABI version; the grader builds a ruleset from the rules `files.read_rules` gives, and the
worker's child enforces it just before exec. Nothing here decides what the worker may read.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

from autograder.sandbox.linux import LIBC, PR_SET_NO_NEW_PRIVS, check

READ, LIST = "read", "list"  # what a read rule grants: read+execute below a path, or only listing it
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_V1, _FS_REFER, _FS_TRUNCATE = (1 << 13) - 1, 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_landlock_abi_cache: int | None = None


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, disabled, not Linux)."""
    global _landlock_abi_cache
    if _landlock_abi_cache is None:
        abi = -1
        if LIBC is not None:
            abi = LIBC.syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        _landlock_abi_cache = max(int(abi), 0)
    return _landlock_abi_cache


def landlock_ruleset(readable: list[tuple[Path, str]], writable: list[Path], devices: list[Path],
                     execute: bool = True) -> int | None:
    """A ruleset fd: read+execute (or only list) per `readable` rule, everything but execute below `writable`,
    read/write on the `devices` files alone (no /dev/shm, no terminal); with ABI 4+ no TCP bind or
    connect, with ABI 6+ no signals or abstract sockets beyond the worker's own processes. None
    where Landlock is unavailable (the worker then runs without it). `execute` False: no program may be
    started at all (a forked worker's interpreter is running already; exec's needs the right to start)."""
    abi = landlock_abi()
    if abi < 1:
        return None
    fs = landlock_fs_rights()
    attr = _RulesetAttr(fs, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = LIBC.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return None
    fd = int(fd)
    access = {READ: (FS_EXECUTE if execute else 0) | _FS_READ_FILE | _FS_READ_DIR, LIST: _FS_READ_DIR}
    device = _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    rules = [(p, access[kind]) for p, kind in readable] + [(p, device) for p in devices]
    rules += [(p, fs & ~FS_EXECUTE) for p in writable]  # nothing written there is ever started
    try:
        for path, allowed in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                if not os.path.isdir(path):  # a file takes only file rights
                    allowed &= FS_EXECUTE | _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
                if not allowed & fs:
                    continue
                rule = PathBeneathAttr(allowed & fs, pfd)
                check(LIBC.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(1),
                                   ctypes.byref(rule), ctypes.c_uint32(0)))
            finally:
                os.close(pfd)
    except OSError:
        os.close(fd)
        return None
    return fd


def landlock_fs_rights() -> int:
    """Every file-system right this kernel's Landlock handles (a worker has all but execute below its scratch)."""
    abi = landlock_abi()
    return _FS_ALL_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)


def proc_rule() -> PathBeneathAttr:
    """The worker's own /proc (mounted after its ruleset was made): read, list, and write its own files
    (the NVIDIA driver opens one there with fopen "w", a truncation, as it starts: without the right
    cudaGetDeviceCount fails with Error 304; the kernel's own checks keep everything else closed to a
    uid that is not root)."""
    return PathBeneathAttr(_FS_READ_FILE | _FS_WRITE_FILE | _FS_READ_DIR | (_FS_TRUNCATE if landlock_abi() >= 3 else 0),
                           -1)


def landlock_allow_beneath(ruleset: int, path: bytes, rule: PathBeneathAttr) -> None:
    """In the child: `rule`'s rights below `path` (a file system mounted after the ruleset was made: its
    scratch tmpfs, its /proc; a rule on the folder beneath a mount does not reach into it)."""
    rule.parent_fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        check(LIBC.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(1),
                           ctypes.byref(rule), ctypes.c_uint32(0)))
    finally:
        os.close(rule.parent_fd)


def landlock_restrict(ruleset: int) -> None:
    """In the child: no new privileges (required, and it also stops setuid binaries), then enforce."""
    check(LIBC.prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                     ctypes.c_ulong(0), ctypes.c_ulong(0)))
    check(LIBC.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)))
