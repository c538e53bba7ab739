"""Fixtures shared by test modules."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# One thread per process, before any test imports torch or numpy: pytest-xdist already runs a test
# per core, and torch's default of a thread per core in each of them oversubscribes the machine
# (measured on 2 cores: 1,900 CPU seconds for the suite with the default, 1,160 with one thread).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# The simulated device of the device probes must exist before this process's first backward pass
# (autograd sizes its device queues once); checks answered in-process run probes after other tests.
# Not where CUDA is: a second backend takes CUDA's place in autograd (pytorch#161129), and the GPU
# tests grade in this process; checks answered in-process then probe on the GPU as the worker does.
import torch  # noqa: E402

from autograder.sandbox import simulated_device  # noqa: E402
if not torch.cuda.is_available():
    simulated_device.install()


@pytest.fixture
def policy_off(monkeypatch):
    """Grade code outside the graded-code subset as if it were inside it.

    Why: the policy refuses reflection, `os`, `sys` and patching before anything runs, and the
    worker's guard (sandbox/guard.py) processes, code made at run time and course files while it
    runs; tests of the layers beneath them (worker limits, confinement, what crosses the wire)
    still need hostile code to run, so that each layer holds on its own. `tests/test_policy.py`
    tests the policy itself, `tests/test_runtime_guard.py` the guard.
    """
    from autograder.sandbox import guard, policy
    monkeypatch.setattr(policy, "refused", lambda cells, assignment: {})
    monkeypatch.setattr(guard, "rules_for", lambda assignment: None)  # the worker's guard off too


@pytest.fixture
def course_copy(tmp_path, monkeypatch):
    """A copy of the course files that the engine takes for the checkout, for tests that edit them.

    Why: tests run in parallel (pytest-xdist), so a test that rewrote a committed file and put it
    back would change what the tests beside it read.
    """
    from autograder.authoring import assignments
    root = tmp_path / "course"
    for name in ("assignments", "solutions", "starter_notebooks"):
        shutil.copytree(assignments.ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "requirements.lock"):
        shutil.copy2(assignments.ROOT / name, root / name)
    monkeypatch.setattr(assignments, "ROOT", root)
    return root


@pytest.fixture(scope="session")
def nobody_python():
    """An interpreter `nobody` can run, with this environment's packages: this one when its
    installation is world-readable, else a throw-away venv of a system Python of the same version
    that points at our site-packages (here the grader's Python lives under root's 0700 home)."""
    if os.geteuid() != 0:
        pytest.skip("switching the worker's user needs root (as on Gradescope)")
    import pwd
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user `nobody` on this machine")
    import numpy
    site = Path(numpy.__file__).resolve().parents[1]
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"

    def works(python: str) -> bool:
        try:
            probe = subprocess.run([python, "-I", "-c", f"import sys, numpy; assert sys.version.startswith('{version}')"],
                                   user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[], capture_output=True,
                                   cwd="/", timeout=60)
        except OSError:  # cannot even be started as nobody
            return False
        return probe.returncode == 0

    if works(sys.executable):
        yield sys.executable
        return
    made = Path(tempfile.mkdtemp(prefix="lmgrade-nobody-python-"))
    try:
        os.chmod(made, 0o755)
        for base in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
            if not Path(base).exists():
                continue
            venv = made / Path(base).name
            if subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], capture_output=True).returncode:
                continue
            (venv / "lib" / f"python{version}" / "site-packages" / "lmgrade-test.pth").write_text(f"{site}\n")
            if works(str(venv / "bin" / "python")):
                yield str(venv / "bin" / "python")
                return
        pytest.skip(f"no Python {version} that `nobody` can run with numpy (the grader's is {sys.executable}; "
                    f"its packages are in {site})")
    finally:
        shutil.rmtree(made, ignore_errors=True)


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (setup.cfg): three test processes per two cores.

    Why more than one per core: a test spends part of its time waiting for the worker process it
    started (IPC, start-up, deadlines in wall time), and the suite used only about 60% of two cores
    with one process per core.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores + cores // 2)
