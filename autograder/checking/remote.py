"""Proxies that make calls into the worker read like ordinary code in a check.

`student.count_ngrams(sentences, 2)` sends a request and returns plain data; an object that is not
plain data (a model) comes back as a `Remote` whose methods are again remote calls. Failures
become `CheckFailed` subclasses with a message a student can act on.
"""
from __future__ import annotations

import hashlib

import numpy as np

from autograder.errors import CheckFailed
from autograder.sandbox import wire
from autograder.sandbox.lifecycle import WorkerFailure


class StudentError(CheckFailed):
    """The student's code raised an exception."""


class MissingName(CheckFailed):
    """The submission does not define what the check calls."""


class StudentCrash(CheckFailed):
    """The student's process timed out or died during the call."""


class NotCalledAgain(StudentCrash):
    """The function ran past its time limit earlier in this grading, so it is not called again."""


def value_digest(value) -> str:
    """A digest of a decoded value: equal exactly when the values are (arrays by dtype, shape and bytes)."""
    digest = hashlib.sha256()

    def feed(v) -> None:
        if isinstance(v, Remote):  # first: a proxy answers every attribute
            digest.update(f"r{v._type}".encode())
        elif isinstance(v, np.ndarray):
            digest.update(f"a{v.dtype}{v.shape}".encode())
            digest.update(np.ascontiguousarray(v).tobytes())
        elif hasattr(v, "numpy") and hasattr(v, "dtype") and hasattr(v, "shape"):  # a decoded tensor
            digest.update(f"t{v.dtype}{tuple(v.shape)}".encode())
            digest.update(np.ascontiguousarray(v.detach().cpu().numpy()).tobytes())
        elif isinstance(v, dict):
            digest.update(b"d%d" % len(v))
            for key in sorted(v, key=repr):
                feed(key)
                feed(v[key])
        elif isinstance(v, (list, tuple)):
            digest.update(b"l%d" % len(v))
            for item in v:
                feed(item)
        else:
            digest.update(f"{type(v).__name__}:{v!r}".encode())

    feed(value)
    return digest.hexdigest()[:16]


class InProcessChannel:
    """Answers requests with a trusted module in this process: the reference, for fixtures and tests."""

    def __init__(self, module, device: str = "cpu"):
        from autograder.sandbox.worker import Worker
        self.worker = Worker(module=module)
        self.worker.device = device

    def request(self, message: dict, arrays: list, timeout: float) -> tuple[dict, list]:
        reply, reply_arrays = self.worker.handle(*_roundtrip(message, arrays, bounded=False))
        try:
            return _roundtrip(reply, reply_arrays)
        except wire.WireError as exc:  # as Sandbox.request reports it
            raise WorkerFailure("broken", str(exc)) from None


def _roundtrip(message, arrays, bounded: bool = True):
    """Same bytes as over a pipe, so in-process answers have exactly the types remote ones have."""
    data = wire.pack(message, arrays)
    n_json, n_npz = wire.header_lengths(data[:wire.HEADER_SIZE], bounded=bounded)
    body = data[wire.HEADER_SIZE:wire.HEADER_SIZE + n_json]
    return wire.unpack(body, data[wire.HEADER_SIZE + n_json:], bounded=bounded)


class Student:
    """The student's module as seen from a check. Attribute access names a function or class."""

    def __init__(self, channel, *, timeout: float = 20.0, explain_missing=None, explain_name_error=None):
        self._channel = channel
        self._timeout = timeout
        self._explain_missing = explain_missing or (lambda name: f"`{name}` is not defined in a graded cell.")
        self._explain_name_error = explain_name_error or (lambda message: "")
        self._memory_limit_gib = getattr(getattr(channel, "limits", None), "memory_bytes", 3 << 30) / (1 << 30)
        self.printed: list[str] = []  # what the student's code printed during this check
        # Set by the runner when graded code reaches into the engine (forbidden.ENGINE_NAMES): then
        # what the worker reports about itself (device placement) is not believed, even to pass.
        self.tampering: str | None = None
        self.sealed = False  # see `seal`
        self._root = self  # copies made by `within` seal their original and share its marks
        # What ran past a time limit in this grading, by `Remote._mark_key`: (name shown, the message of
        # that timeout, the check it happened in). Kept on the root, for the whole submission: one
        # infinite loop costs one time limit, not one per check that calls it. Set only from a timeout
        # of the grader's own clock (WorkerFailure 'timeout'), never from anything the worker says.
        self._timed_out: dict[tuple, tuple[str, str, object]] = {}
        self._current_check = None  # the runner's CheckSpec of the check running now
        self.transcript: list | None = None  # when a list: (label, digest) of every value read back (mutants.py)
        self.grader_faults: list[str] = []  # what failed on the grader's side during this grading

    def __getattr__(self, name: str) -> "Remote":
        if name.startswith("_"):
            raise AttributeError(name)
        return Remote(self, {"name": name}, name, origin=name)

    def within(self, seconds: float) -> "Student":
        """The same student with another deadline per call: the time-limit primitive."""
        other = Student(self._channel, timeout=seconds, explain_missing=self._explain_missing,
                        explain_name_error=self._explain_name_error)
        other.printed = self.printed
        other.tampering = self.tampering
        other._root = self._root
        return other

    def seal(self) -> None:
        """From now until the check ends the student's code sees held-out text (contexts of test plays):
        what it prints and the messages of its errors stay out of the feedback, so they carry none out."""
        self._root.sealed = True

    def put(self, value, label: str = "data") -> "Remote":
        """Send data once and keep it in the worker, to pass to many calls without resending."""
        return self._request({"op": "put"}, {"value": value}, f"sending {label}")

    def support(self, name: str, *args) -> "Remote":
        """A helper object or data set (autograder/sandbox/support.py), made in the student's process."""
        return self._request({"op": "support", "name": name}, {"args": list(args)}, f"creating {name}")

    def _request(self, message: dict, payload: dict, label: str, timeout: float | None = None, *,
                 mark: tuple | None = None, origin: str | None = None):
        """One request. `mark` names the student's function it runs (see `Remote._mark_key`); objects
        in the reply become Remotes that keep `origin`, the student name their chain started from."""
        root = self._root
        if mark is not None and mark[0] in root._timed_out:
            raise NotCalledAgain(self._not_called_again(*root._timed_out[mark[0]]))
        arrays: list = []
        for key, value in payload.items():
            message[key] = wire.encode(value, arrays, make_handle=_handle_of)
        try:
            reply, reply_arrays = self._channel.request(message, arrays, timeout or self._timeout)
        except WorkerFailure as failure:
            text = _crash_message(failure, label, timeout or self._timeout)
            if failure.kind == "unavailable" and "restarted too many times" not in failure.detail:
                root.grader_faults.append(text)  # the grader's side: no score from this run (runner.grade)
            if failure.kind == "timeout" and mark is not None:  # the grader's clock ran out, nothing else
                root._timed_out.setdefault(mark[0], (mark[1], text, root._current_check))
            raise StudentCrash(text) from None
        if reply.get("output"):
            self.printed.append(str(reply["output"]))
        event = reply.get("event")
        if event == "missing":
            raise MissingName(f"{label}: {self._explain_missing(str(reply.get('name')))}")
        if event == "error":
            err = reply.get("error") if type(reply.get("error")) is dict else {}
            text = f"{label} raised {err.get('type', 'an error')}: {err.get('message', '')}"
            if err.get("type") == "MemoryError":
                text += f" (your code tried to use more than the {self._memory_limit_gib:g} GiB it may use)"
            if err.get("type") == "UnreadableResult":
                text = f"{label} returned a value the grader cannot read: {err.get('message', '')}"
            if err.get("type") == "NotImplementedError":  # the starter's stub: no traceback needed
                raise StudentError(f"{label} is not implemented yet (NotImplementedError: {err.get('message', '')})")
            hint = self._explain_name_error(str(err.get("message", ""))) if err.get("type") == "NameError" else ""
            trace = f"\nTraceback (your code, most recent call last):\n{err['traceback']}" if err.get("traceback") else ""
            raise StudentError(text + (f"\n{hint}" if hint else "") + trace)
        if event != "done":
            raise StudentCrash(f"{label}: the student's process sent an unexpected reply")
        try:
            value = wire.decode(reply.get("value"), reply_arrays,
                                resolve_handle=lambda h: Remote(self, {"handle": h.id}, f"<{h.type_name}>",
                                                                origin=origin, type_name=h.type_name))
        except wire.WireError as exc:
            raise StudentCrash(f"{label}: unreadable reply ({exc})") from None
        if root.transcript is not None:
            root.transcript.append((label, value_digest(value)))
        return value

    def _not_called_again(self, shown: str, text: str, spec) -> str:
        """Why a call fails at once: where its function ran past its limit, and what that check said."""
        if spec is None:
            return f"{shown} ran past its time limit earlier; not called again. There: {text}"
        now = self._root._current_check
        if not spec.public and (now is None or now.public):  # a public check never quotes a hidden one
            return f"{shown} ran past its time limit in a hidden check (Q{spec.question}); not called again."
        title = spec.title if len(spec.title) <= 80 else spec.title[:77] + "..."
        return f'{shown} ran past its time limit in check "{title}" (Q{spec.question}); not called again. There: {text}'


class Remote:
    """A function, class, object or attribute in the worker.

    `origin` is the student's name the chain began with (`NGramLM` for `student.NGramLM(2, v).fit(c)`),
    None for objects the grader made there (`put`, `support`); `type_name` is an object's type.
    """

    def __init__(self, student: Student, target: dict, label: str, *, origin: str | None = None,
                 type_name: str | None = None):
        self._student, self._target, self._label = student, target, label
        self._origin, self._type = origin, type_name

    def __getattr__(self, attr: str) -> "Remote":
        if attr.startswith("_"):
            raise AttributeError(attr)
        target = dict(self._target, attrs=self._target.get("attrs", []) + [attr])
        return Remote(self._student, target, f"{self._label}.{attr}", origin=self._origin, type_name=self._type)

    def _mark_key(self) -> tuple | None:
        """(key, name shown) of the student's function or method this runs, for time-limit marks.

        A module-level name with its attributes (`train_lm`, `NGramLM.from_counts`); a method of an
        object by its type and the name its chain began with, so `lm.prob` of any `NGramLM(...)` is one
        key, while a method of the grader's own helper objects (which run the student's code passed to
        them, whatever it is) is none.
        """
        if self._origin is None:
            return None
        attrs = list(self._target.get("attrs", []))
        if "name" in self._target:
            path = ".".join([str(self._target["name"]), *attrs])
            return ("name", path), f"`{path}`"
        kind = str(self._type)[:60]
        shown = f"`{kind}.{'.'.join(attrs) or '__call__'}`"
        if kind != self._origin:
            shown += f" (of an object `{self._origin}` made)"
        return ("object", self._origin, kind, *attrs), shown

    def _call(self, message: dict, payload: dict, label: str, timeout: float | None = None):
        return self._student._request(message, payload, label, timeout, mark=self._mark_key(), origin=self._origin)

    def __call__(self, *args, **kwargs):
        label = f"{self._label}({describe_args(args, kwargs)})"
        return self._call({"op": "call", "target": self._target}, {"args": list(args), "kwargs": kwargs}, label)

    def map(self, calls: list[tuple], timeout: float | None = None) -> list:
        """Call once per argument tuple, in one round trip (fast for thousands of small calls)."""
        label = f"{self._label}(...) over {len(calls)} inputs"
        return self._call({"op": "call", "target": self._target, "map": True},
                          {"args": [list(c) for c in calls]}, label, timeout)

    def get(self):
        """The attribute's value (plain data, or another Remote)."""
        return self._call({"op": "getattr", "target": self._target}, {}, self._label)

    def vjp(self, args: list, wrt: list[int], cotangent, output_index: int = 0) -> dict:
        """Output and gradients of sum(output * cotangent) w.r.t. args[wrt] and module parameters."""
        label = f"backward through {self._label}({describe_args(args, {})})"
        return self._call({"op": "vjp", "target": self._target, "wrt": wrt, "output_index": output_index},
                          {"args": list(args), "cotangent": cotangent}, label)

    def on_device(self, *args, kwargs: dict | None = None, dtype: str | None = "float32", simulated: bool = True,
                  device_arg: str | None = None, seed: int | None = None, move_data: bool = True) -> dict:
        """Call on a simulated non-CPU device, or (simulated=False) the same way on the CPU, for the
        comparison (see worker.op_device): {"outputs": the value, "states": module state dicts after}.
        `device_arg` names a keyword the worker sets to the device; `move_data=False` moves only the
        modules (a training loop's data stay on the CPU); `seed` seeds torch's global
        generator first; `kwargs` are the call's keyword arguments (a dict: the student's may be
        called `seed` or `dtype` too); `dtype=None` keeps each value's own dtype."""
        kwargs = dict(kwargs or {})
        where = "on a non-CPU device" if simulated else "on the CPU (copies, as on the device)"
        label = f"{self._label}({describe_args(args, kwargs)}) {where}"
        return self._call({"op": "device", "target": self._target, "dtype": dtype, "simulated": simulated,
                           "device_arg": device_arg, "seed": seed, "move_data": move_data},
                          {"args": list(args), "kwargs": kwargs}, label)

    def __repr__(self) -> str:
        return f"<student's {self._label}>"


def _handle_of(value) -> wire.Handle:
    """Objects the student's code returned can be passed back to it; nothing else that is not data."""
    if isinstance(value, Remote) and "handle" in value._target and not value._target.get("attrs"):
        return wire.Handle(value._target["handle"])
    raise wire.WireError(f"a value of type {type(value).__name__} cannot be sent to the student's code")


def describe_args(args, kwargs) -> str:
    """Short description of arguments: types and shapes, never whole (possibly hidden) inputs."""
    parts = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _describe(value) -> str:
    if isinstance(value, Remote):
        return value._label
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    if isinstance(value, np.ndarray):
        return f"array{tuple(value.shape)} {value.dtype}"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"tensor{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, (list, tuple)):
        if len(value) <= 4 and all(isinstance(v, (str, int, float)) for v in value):
            return repr(value) if len(repr(value)) <= 60 else f"{type(value).__name__} of {len(value)}"
        return f"{type(value).__name__} of {len(value)} items"
    if isinstance(value, (set, dict)):
        return f"{type(value).__name__} of {len(value)} items"
    return type(value).__name__


def _crash_message(failure: WorkerFailure, label: str, timeout: float) -> str:
    if failure.kind == "timeout":
        if "wall-clock" in failure.detail:  # the sandbox's backstop: little CPU used, a long wait
            return f"{label} did not finish: {failure.detail} (time.sleep, input(), a lock, a child process?)"
        unit = " of CPU time" if "CPU time" in failure.detail else ""  # limits count CPU seconds where they can
        return (f"{label} did not finish within {timeout:g} s{unit}: an infinite loop, or far too slow "
                "(look for a loop whose condition never changes, or work repeated inside a loop).")
    if failure.kind == "died":
        return f"{label} ended the student's process: {failure.detail}. Other questions are graded in a fresh process."
    if failure.kind == "broken" and failure.detail.startswith(wire.TOO_LARGE):
        return f"{label}: {failure.detail}."
    if failure.kind == "unavailable":
        return f"{label} could not run: {failure.detail}"
    return f"{label}: the student's process sent something unreadable ({failure.detail})."
