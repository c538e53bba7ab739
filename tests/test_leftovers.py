"""What a grader killed with SIGKILL leaves behind (its workers' scratch folders, engine copies, the fork
server's copy) is removed by the next grader's start; folders of live graders, of other programs and
links are left alone. (Its cgroups: tests/test_cgroups.py.)"""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from autograder.sandbox import files

KILLED = textwrap.dedent('''
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    from autograder.checking.remote import Student
    from autograder.sandbox.lifecycle import Sandbox
    sandbox = Sandbox([{"index": 0, "number": 1, "source": "def ok():\\n    return 1\\n"}])
    assert Student(sandbox, timeout=10).ok() == 1
    print(os.getpid(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no cleaning up
''')


@pytest.fixture
def own_tmp(monkeypatch):
    """A temp dir of the test's own, which a worker's uid may pass through (as /tmp)."""
    folder = Path(tempfile.mkdtemp(prefix="lmgrade-test-tmp-"))
    os.chmod(folder, 0o711)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setattr(files, "_swept_temp", False)
    yield folder
    files.remove_tree(folder)


def gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_next_grader_removes_what_a_killed_one_left_and_nothing_else(own_tmp):
    dead = gone_pid()
    left = [own_tmp / f"lmgrade-scratch-{dead}-a1", own_tmp / f"lmgrade-forkserver-{dead}-b2",
            own_tmp / f"lmgrade-site-{dead}-c3"]
    kept = [own_tmp / f"lmgrade-scratch-{os.getppid()}-d4",  # a live grader's
            own_tmp / "lmgrade-scratch-k2j3h4g5",  # an older release's name: whose it was is unknown
            own_tmp / f"lmgrade-report-{dead}-e5",  # not a kind the grader makes
            own_tmp / "elsewhere"]
    for folder in left + kept:
        folder.mkdir()
        (folder / "file").write_text("x")
    (own_tmp / f"lmgrade-site-{dead}-link").symlink_to(own_tmp / "elsewhere")
    files.sweep_temp_folders()
    assert [f for f in left if f.exists()] == []
    assert all(f.exists() for f in kept) and (own_tmp / "elsewhere" / "file").exists()
    assert (own_tmp / f"lmgrade-site-{dead}-link").is_symlink()


def test_a_grader_killed_with_sigkill_leaves_nothing_after_the_next_start(own_tmp):
    repo = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", KILLED, repo], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(own_tmp)})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    killed = proc.stdout.split()[0]
    before = [p.name for p in own_tmp.iterdir() if f"-{killed}-" in p.name]
    assert any(name.startswith("lmgrade-scratch-") for name in before), before  # what it left

    from autograder.checking.remote import Student
    from autograder.sandbox.lifecycle import Sandbox
    sandbox = Sandbox([{"index": 0, "number": 1, "source": "def ok():\n    return 2\n"}])
    try:
        assert Student(sandbox, timeout=10).ok() == 2
        assert [p.name for p in own_tmp.iterdir() if f"-{killed}-" in p.name] == []
    finally:
        sandbox.close()


def test_removing_a_folder_never_changes_the_mode_of_its_parent(tmp_path, monkeypatch):
    """A removal that fails at the top (another grader's sweep removed the folder first, or rmdir refused) once
    set the parent, /tmp, to mode 0700: every later worker of another uid then failed to start."""
    parent = tmp_path / "tmp"
    parent.mkdir(mode=0o1777)
    os.chmod(parent, 0o1777)
    for error in (FileNotFoundError, PermissionError):
        folder = parent / "lmgrade-scratch-1-x"
        (folder / "inner").mkdir(parents=True)
        real_rmdir = os.rmdir

        def failing_rmdir(path, *args, **kwargs):
            if os.path.abspath(path) == str(folder):
                raise error(f"{path}: refused once")
            return real_rmdir(path, *args, **kwargs)

        monkeypatch.setattr(os, "rmdir", failing_rmdir)
        files.remove_tree(folder)
        monkeypatch.setattr(os, "rmdir", real_rmdir)
        assert oct(parent.stat().st_mode & 0o7777) == oct(0o1777), error
        assert not (folder / "inner").exists()
        files.remove_tree(folder)
        assert not folder.exists()
