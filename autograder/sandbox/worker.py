"""The untrusted side: a process that runs the student's graded cells and answers calls.

Why a separate process: student code may loop forever, exhaust memory, exit, patch numpy or
torch, or lie in `__eq__`. Here it can do all of that and the grader only ever receives plain
data (see `wire.py`); scores are computed elsewhere. This module must not import anything that
holds reference solutions or hidden checks.

Started by `lifecycle.py`: forked by `forkserver.py`, or with exec; either way `main` serves the grader.
"""
from __future__ import annotations

import io
import linecache
import os
import random
import sys
import traceback
import types

import numpy as np

try:
    import resource
except ImportError:  # Windows: the worker runs without limits there, and says so
    resource = None

from autograder.sandbox import guard, support, wire  # noqa: F401 - support: loaded before the guard

CELL_PREFIX = "<graded cell "
OUTPUT_LIMIT = 4000  # characters of student output kept per request


class CappedWriter(io.TextIOBase):
    """A stdout replacement that keeps the first few thousand characters and counts the rest."""

    def __init__(self, limit: int = OUTPUT_LIMIT):
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def take(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += f"\n... ({self.dropped} more characters of output not shown)"
        self.parts, self.kept, self.dropped = [], 0, 0
        return out


class Worker:
    def __init__(self, rfd: int = -1, wfd: int = -1, module: types.ModuleType | None = None):
        self.rfd, self.wfd = rfd, wfd
        self.module = module or types.ModuleType("submission")
        self.objects: dict[int, object] = {}
        self.next_id = 1
        self.device = "cpu"
        self.out = CappedWriter()
        self.guarded = False  # the guard (guard.py) is installed: once per process

    # ---- framing -------------------------------------------------------------------------
    def read_exact(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = os.read(self.rfd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> tuple[dict, list]:
        n_json, n_npz = wire.header_lengths(self.read_exact(wire.HEADER_SIZE), bounded=False)
        return wire.unpack(self.read_exact(n_json), self.read_exact(n_npz), bounded=False)  # the grader's own

    def reply(self, message: dict, value=None, has_value: bool = False) -> tuple[dict, list]:
        arrays: list = []
        if has_value:
            try:
                message["value"] = wire.encode(value, arrays, make_handle=self.make_handle)
            except BaseException as exc:  # noqa: BLE001 - also a hostile __int__ or __torch_function__
                arrays = []
                err = describe(exc)
                text = err["message"] if isinstance(exc, wire.WireError) else f"{err['type']}: {err['message']}"
                message = {"event": "error", "error": {
                    "type": "UnreadableResult", "message": text, "traceback": err["traceback"]}}
        message["output"] = self.out.take()
        return message, arrays

    def send(self, message: dict, arrays: list) -> None:
        try:
            data = wire.pack(message, arrays)
        except (ValueError, TypeError, RecursionError) as exc:  # e.g. an int too long for JSON
            data = wire.pack({"event": "error", "output": str(message.get("output", "")), "error": {
                "type": "UnreadableResult", "message": str(exc)[:2000], "traceback": ""}}, [])
        view = memoryview(data)
        while view:
            written = os.write(self.wfd, view)
            view = view[written:]

    # ---- objects -------------------------------------------------------------------------
    def make_handle(self, obj) -> wire.Handle:
        handle_id = self.next_id
        self.next_id += 1
        self.objects[handle_id] = obj
        return wire.Handle(handle_id, type(obj).__name__)

    def resolve(self, handle: wire.Handle):
        if handle.id not in self.objects:
            raise LookupError("an object from an earlier step is no longer available")
        return self.objects[handle.id]

    def decode(self, tree, arrays):
        value = wire.decode(tree, arrays, resolve_handle=lambda handle: _Held(self.resolve(handle)))
        return self.place_tensors(value)

    def place_tensors(self, value):
        """Tensors arrive on the CPU; move them to the grading device with their dtype.

        Containers the grader sent are rebuilt; an object passed by handle is the worker's own and is
        handed over as it is (never a copy), so a check can see what a call did to its argument.
        """
        if type(value) is _Held:
            return value.obj
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            t = value.to(self.device)
            return t.requires_grad_(True) if getattr(value, "lmgrade_requires_grad", False) else t
        if type(value) is list:
            if all(type(v) in _PLAIN for v in value):  # token lists: nothing to place
                return value
            return [self.place_tensors(v) for v in value]
        if type(value) is tuple:
            return tuple(self.place_tensors(v) for v in value)
        if type(value) is dict:
            return {self.place_tensors(k): self.place_tensors(v) for k, v in value.items()}
        return value

    def target(self, spec: dict):
        """The callable or object a request names: a module-level name, or a handle."""
        if "handle" in spec:
            obj = self.resolve(wire.Handle(spec["handle"]))
        else:
            name = spec["name"]
            if not hasattr(self.module, name):
                raise _Missing(name)
            obj = getattr(self.module, name)
        for attr in spec.get("attrs", []):
            obj = getattr(obj, attr)
        return obj

    # ---- operations ----------------------------------------------------------------------
    def op_load(self, msg, arrays):
        self.device = msg.get("device", "cpu")
        skip = set(msg.get("skip", []))
        if msg.get("import_torch"):
            import torch  # noqa: F401 - imported before student code so seeding and devices work

            from autograder.sandbox import simulated_device  # before the guard: `op_device` needs it
            if self.device.startswith("cuda"):  # a second backend would take CUDA's place in autograd
                simulated_device.settle_dynamo_wrappers()  # (pytorch#161129): on a GPU, probes use the GPU
            else:
                simulated_device.install()  # before any backward: autograd sizes its device queues once
        bound_address_space(msg.get("memory_bytes"))
        errors = []
        ns = self.module.__dict__
        ns["__name__"] = guard.SUBMISSION
        sys.modules["submission"] = self.module
        if msg.get("guard") is not None and not self.guarded:  # before any graded cell runs, for good
            sources = tuple(c["source"] for c in msg["cells"] if c["index"] not in skip)
            guard.install(ns, sources, msg["guard"], trusted=(describe.__code__,))
            self.guarded = True
        seen: set[str] = set()
        for cell in msg["cells"]:
            if cell["index"] in skip:
                continue
            # tracebacks name the cell by what Jupyter shows of it ("graded cell defining `f`"), not
            # by a position that counts markdown cells; a name two cells share gets the position too
            name = str(cell.get("name") or "")
            name = name if name.startswith("graded cell ") and name not in seen else f"graded cell {cell['number']}"
            seen.add(name)
            filename = f"<{name}>"
            linecache.cache[filename] = (len(cell["source"]), None, cell["source"].splitlines(True), filename)
            self.send({"event": "progress", "cell": cell["index"]}, [])
            try:
                exec(compile(cell["source"], filename, "exec"), ns)  # noqa: S102 - this is the sandbox
            except BaseException as exc:  # noqa: BLE001 - SystemExit etc. must not end the worker
                errors.append({"index": cell["index"], "error": describe(exc)})
        names = sorted(k for k in ns if not k.startswith("__"))
        return {"defined": names, "cell_errors": errors}

    def op_seed(self, msg, arrays):
        seed = int(msg["seed"])
        random.seed(seed)
        np.random.seed(seed % (1 << 32))
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.manual_seed(seed)
            if self.device.startswith("cuda"):
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
        return None

    def op_call(self, msg, arrays):
        fn = self.target(msg["target"])
        if msg.get("map"):
            calls = self.decode(msg["args"], arrays)
            return [fn(*args) for args in calls]
        args = self.decode(msg.get("args", []), arrays)
        kwargs = self.decode(msg.get("kwargs", {"__dict__": []}), arrays)
        value = fn(*args, **kwargs)
        if isinstance(fn, type) and self.device.startswith("cuda"):  # a module the grader builds lives where
            torch = sys.modules.get("torch")  # its inputs will (as `model.to(device)` in a training script)
            if torch is not None and isinstance(value, torch.nn.Module):
                value = value.to(self.device)
        return value

    def op_getattr(self, msg, arrays):
        return self.target(msg["target"])

    def op_support(self, msg, arrays):
        """Create one of the grader's plain helper objects (see support.py) inside this process."""
        from autograder.sandbox import support
        factory = support.FACTORIES[msg["name"]]
        return self.make_handle(factory(*self.decode(msg["args"], arrays)))

    def op_put(self, msg, arrays):
        return self.make_handle(self.decode(msg["value"], arrays))

    def op_vjp(self, msg, arrays):
        """Output and vector-Jacobian products of a student's torch function, for gradient checks:
        w.r.t. the arguments `wrt`, the parameters of the module called and those of each module
        argument (named "arg<i>.<parameter>").

        Nothing here decides, and nothing here is believed: a graded cell can replace this method.
        The grader checks the output against a plain call and the gradients against its own finite
        differences of the student's forward and the reference (torch_checks.gradcheck).
        """
        import torch
        fn = self.target(msg["target"])
        args = list(self.decode(msg["args"], arrays))
        wrt = msg.get("wrt", [])
        for i in wrt:
            args[i] = args[i].detach().clone().requires_grad_(True)
        with torch.enable_grad():  # also when answered in-process from inside a grader's backward
            out = fn(*args)
            if isinstance(out, (tuple, list)):
                out = out[msg.get("output_index", 0)]
            cotangent = self.decode(msg["cotangent"], arrays)
            # the parameters of the module called, and of modules passed to it (`lm_loss(model, ...)`)
            modules = [("", fn)] if isinstance(fn, torch.nn.Module) else []
            modules += [(f"arg{i}.", a) for i, a in enumerate(args) if isinstance(a, torch.nn.Module)]
            params = [(prefix + n, p) for prefix, m in modules for n, p in m.named_parameters() if p.requires_grad]
            inputs = [args[i] for i in wrt] + [p for _, p in params]
            grads = torch.autograd.grad((out * cotangent.to(out.dtype)).sum(), inputs, allow_unused=True)
        grads = [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]
        return {"output": out, "input_grads": grads[:len(wrt)],
                "param_grads": {n: g for (n, _), g in zip(params, grads[len(wrt):])}}

    def op_device(self, msg, arrays):
        """Run a student's function or module on a simulated non-CPU device (the GPU when grading on
        one), or, for the grader's comparison, the same way on the CPU, and hand back what it returned.

        Why: code that makes a tensor without `device=` (`torch.zeros(T, T)` inside forward) works on
        the CPU and breaks on a GPU. On the simulated device (simulated_device.py) tensors hold real
        values, so training loops, `.item()` and generators run as on a GPU, while mixing a device
        tensor with a CPU one raises as CUDA does. Floats go in `dtype`; modules (the target and any
        argument) are deep copies moved like `model.to(device)`, so the grader's objects are left
        alone; without `move_data` only modules move (a training loop's data stay on the CPU, where a
        caller keeps them beside a model on a GPU). With `seed`, torch's, Python's and numpy's global
        generators are seeded first, so a CPU run and a device run draw the same numbers. Returns {"outputs": the call's value, "states": the state dict of every
        module copy after the call}. Nothing here is believed: the grader compares the values with
        the CPU run, and a report from here can only fail a check (a graded cell can replace this).
        """
        import torch

        from autograder.sandbox import simulated_device

        dtype = getattr(torch, msg["dtype"]) if msg.get("dtype") else None  # None: each value keeps its own
        fn = self.target(msg["target"])
        args = self.decode(msg.get("args", []), arrays)
        kwargs = self.decode(msg.get("kwargs", {"__dict__": []}), arrays)
        if msg.get("seed") is not None:  # the CPU generator is the simulated device's too
            torch.random.default_generator.manual_seed(int(msg["seed"]))
            random.seed(int(msg["seed"]))
            np.random.seed(int(msg["seed"]) % (1 << 32))
        if not msg.get("simulated"):
            place = _on("cpu")
        elif self.device.startswith("cuda"):  # a real GPU: the probe runs there
            place = _on(self.device)
        else:
            place = simulated_device.active(self.module.__dict__)
        with place as device:
            fn, args, kwargs = simulated_device.to_device((fn, args, kwargs), device, dtype,
                                                          modules_only=not msg.get("move_data", True))
            if msg.get("device_arg"):
                kwargs[str(msg["device_arg"])] = device
            out = fn(*args, **kwargs)
            modules = [m for m in (fn, *args, *kwargs.values()) if isinstance(m, torch.nn.Module)]
            states = [dict(m.state_dict()) for m in modules]  # in the device's modes, as the reply (see `handle`)
        return {"outputs": out, "states": states}

    def handle(self, msg: dict, arrays: list) -> tuple[dict, list]:
        """Answer one request with a reply message and its arrays."""
        ops = {"load": self.op_load, "seed": self.op_seed, "call": self.op_call,
               "getattr": self.op_getattr, "put": self.op_put, "support": self.op_support,
               "vjp": self.op_vjp, "device": self.op_device}
        op = ops.get(msg.get("op"))
        try:
            if op is None:
                raise ValueError(f"unknown request {msg.get('op')!r}")
            value = op(msg, arrays)
        except _Missing as exc:
            return self.reply({"event": "missing", "name": exc.args[0]})
        except BaseException as exc:  # noqa: BLE001 - report everything, including SystemExit
            return self.reply({"event": "error", "error": describe(exc)})
        if msg.get("op") == "device" and msg.get("simulated") and not self.device.startswith("cuda"):
            # Read the simulated device's tensors back inside its modes: outside them, torch's C++
            # asks each tensor subclass whether it is a DTensor, and the first ask imports
            # torch.distributed.tensor and sympy (39 MiB and 0.6 s of CPU in every worker).
            from autograder.sandbox import simulated_device
            with simulated_device.active(self.module.__dict__):
                return self.reply({"event": "done"}, value, has_value=True)
        return self.reply({"event": "done"}, value, has_value=True)

    def serve(self) -> None:
        while True:
            try:
                msg, arrays = self.receive()
            except EOFError:
                return
            self.send(*self.handle(msg, arrays))


class _on:
    """A real device for `op_device`: the CPU (the comparison run: the same copies and placement) or the GPU."""

    def __init__(self, device: str):
        self.device = device

    def __enter__(self):
        return self.device

    def __exit__(self, *exc) -> None:
        return None


_PLAIN = (str, int, float, bool, type(None))


class _Held:
    """An object resolved from a handle while decoding: placed as it is, not rebuilt."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return type(other) is _Held and other.obj is self.obj


class _Missing(Exception):
    """The submission does not define a name the grader asked for."""


def describe(exc: BaseException) -> dict:
    """Exception type, message and the student's own frames only (no grader internals)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(CELL_PREFIX)]
    lines = [f'  {f.filename.strip("<>")}, line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}'
             for f in frames[-6:]]
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "(the exception's message could not be printed)"
    return {"type": type(exc).__name__, "message": message[:2000], "traceback": "\n".join(lines)}


def bound_address_space(budget: int | None) -> None:
    """RLIMIT_AS: what this process has mapped before any graded cell runs, plus `budget`.

    Why measured here and not fixed: a CUDA build of torch maps about 3 GiB of libraries at import
    (a CPU build 0.6 GiB), and a fixed limit left such a worker no room for a thread's stack or a
    module. What graded code may add is the same on every build. Lowering a limit needs no right."""
    if budget is None or resource is None:  # CUDA reserves far more address space than it uses
        return
    try:
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        mapped = 0
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = mapped + budget
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft == resource.RLIM_INFINITY or wanted < soft:  # only ever lowered: a second load keeps the first
        resource.setrlimit(resource.RLIMIT_AS, (wanted, wanted))


def main(argv: list[str]) -> None:
    """argv: [site dir, read fd, write fd, modules to import before the first request ("torch")]."""
    rfd, wfd = int(argv[1]), int(argv[2])
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # C-level writes and os.write(1, ...) go nowhere
        os.dup2(devnull, fd)
    worker = Worker(rfd, wfd)
    sys.stdout = sys.stderr = worker.out
    sys.stdin = io.StringIO("")
    if "torch" in argv[3:]:  # while the grader prepares: `op_load` would import it before any cell anyway
        import torch  # noqa: F401
    worker.serve()


if __name__ == "__main__":
    main(sys.argv)
