"""Which layer of the worker's box keeps CUDA from working: each layer left out in turn.

Why: a worker on a GPU machine answered every call with "Error 304 from cudaGetDeviceCount" while
the grader itself saw the GPU; the box has a dozen layers, and a lease has minutes. Each line says
whether a worker (or a plain process) with that change finds the GPU.

    python bench/gpu_diagnose.py
"""
import functools
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.checking.remote import Student  # noqa: E402
from autograder.sandbox import confine, lifecycle, namespaces  # noqa: E402
from autograder.sandbox.linux import LIBC, check  # noqa: E402
from autograder.sandbox.lifecycle import Sandbox  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402

PROBE = """
import os, torch
def probe():
    seen = {}
    for path, flags in (("/dev/nvidiactl", os.O_RDWR), ("/dev/nvidia0", os.O_RDWR), ("/dev/nvidia-uvm", os.O_RDWR),
                        ("/proc/driver/nvidia/params", os.O_RDONLY), ("/dev/shm/probe", os.O_RDWR | os.O_CREAT)):
        owner = os.stat(path).st_uid if os.path.exists(path) else None
        try:
            os.close(os.open(path, flags, 0o600))
            seen[path] = f"open, owner {owner}"
        except OSError as exc:
            seen[path] = f"errno {exc.errno}, owner {owner}"
    seen["pid"] = (os.getpid(), os.readlink("/proc/self"))
    try:
        seen["cuda"] = (torch.cuda.device_count(), torch.ones(2, device="cuda").sum().item())
    except Exception as exc:
        seen["cuda"] = str(exc)[:70]
    return seen
"""
PLAIN = "import torch; print(torch.cuda.device_count(), torch.ones(2, device='cuda').sum().item())"


def plain(env: dict) -> str:
    proc = subprocess.run([sys.executable, "-c", PLAIN], env=env, capture_output=True, text=True, timeout=120)
    return (proc.stdout.strip() or proc.stderr.strip().splitlines()[-1]) if proc.returncode == 0 or proc.stderr else "?"


def boxed(limits: Limits = Limits(), patches=(), own_uid=None) -> str:
    """What the probe says from a CUDA worker with `limits`, `patches` applied and, if given, `own_uid`."""
    def probe() -> str:
        try:
            with Sandbox([{"index": 0, "number": 1, "source": PROBE}], device="cuda", import_torch=True,
                         limits=limits) as box:
                if own_uid is not None:
                    box.own_uid = own_uid
                return repr(Student(box, timeout=60).probe())
        except Exception as exc:  # noqa: BLE001 - a diagnosis reports every failure
            return f"{type(exc).__name__}: {str(exc)[:300]}"
    return patched(patches, probe)


def patched(patches, case):
    """`case()` with each (target, value) of `patches` in place."""
    with ExitStack() as stack:
        for target, value in patches:
            stack.enter_context(mock.patch(target, value))
        return case()


def main() -> None:
    print({k: v for k, v in os.environ.items() if any(s in k for s in ("CUDA", "NVIDIA", "LD_", "PATH"))})
    print(subprocess.run("ldconfig -p | grep -i -E 'libcuda|libnvidia-ml' | head -4; "
                         "ls /proc/driver/nvidia 2>&1 | head; cat /proc/self/cgroup | head -3; "
                         "ls -l /dev/nvidia-caps 2>&1; grep -i devicefile /proc/driver/nvidia/params",
                         shell=True, capture_output=True, text=True).stdout)
    worker_env = confine.worker_env("/tmp", True)
    Plan = confine.Plan
    # each layer of the box: (Limits fields, own uid, patches) that leave it out
    layers = {
        "landlock": ({"confine": False}, None, []),
        "own uid": ({}, False, []),
        "pid/ipc namespace": ({}, None, [("autograder.sandbox.lifecycle.Plan", functools.partial(Plan, pid_namespace=False))]),
        "network namespace": ({"isolate_network": False}, None, []),
        "cgroups": ({}, None, [("autograder.sandbox.lifecycle.worker_cgroups", lambda *a: [])]),
    }

    def without(names):
        fields, own, patches = {}, None, []
        for name in names:
            f, o, p = layers[name]
            fields.update(f)
            own = o if o is not None else own
            patches += p
        return lambda: boxed(Limits(**fields), patches, own)

    cases = [
        ("plain process, the grader's environment", lambda: plain(dict(os.environ))),
        ("plain process, the worker's environment", lambda: plain(worker_env)),
        ("worker, the full box", without([])),
    ]
    if "--layers" in sys.argv:
        cases.append(("worker, every layer off", without(list(layers))))
    from autograder.sandbox.landlock import FS_EXECUTE, PathBeneathAttr, landlock_fs_rights
    every_right = lambda: PathBeneathAttr(landlock_fs_rights() & ~FS_EXECUTE, -1)  # noqa: E731
    cases.append(("worker, the full box with every right on its own /proc",
                  lambda: patched([("autograder.sandbox.confine.proc_rule", every_right)], without([]))))
    if "--layers" in sys.argv:  # each layer alone
        cases += [(f"worker, only {name} on", without([n for n in layers if n != name])) for name in layers]
    if "--layers" in sys.argv:
        cases.append(("worker, no Landlock", without(["landlock"])))
    if "--namespaces" in sys.argv:  # the namespaces that come with the PID namespace, one at a time (no Landlock)
        for flag in ("CLONE_NEWPID", "CLONE_NEWIPC", "CLONE_NEWUTS", "CLONE_NEWCGROUP"):
            unshare = (lambda bit: lambda: check(LIBC.unshare(bit)))(getattr(namespaces, flag))
            case = without(["landlock"])
            cases.append((f"worker, no Landlock, of the PID namespace's only {flag}",
                          lambda case=case, unshare=unshare: patched(
                              [("autograder.sandbox.confine.own_pid_namespace", unshare)], case)))
    # Landlock widened (no PID namespace)
    real_ruleset = lifecycle.landlock_ruleset
    writable = [Path(p) for p in ("/dev", "/proc", "/sys", "/tmp", "/run") if os.path.exists(p)]
    widen = {"nothing more": real_ruleset}
    for path in writable:  # each folder writable in turn
        widen[f"{path} writable"] = (lambda path: lambda r, w, d, **k: real_ruleset(r, w + [path], d, **k))(path)
    for name, ruleset in widen.items() if "--landlock" in sys.argv else ():
        case = without(["pid/ipc namespace"])
        cases.append((f"worker, no PID namespace, Landlock with {name}",
                      lambda case=case, ruleset=ruleset: patched([("autograder.sandbox.lifecycle.landlock_ruleset",
                                                                   ruleset)], case)))
    for name, case in cases:
        print(f"{name}: {case()}", flush=True)


if __name__ == "__main__":
    main()
