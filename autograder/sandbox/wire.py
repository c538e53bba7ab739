"""Plain-data encoding for everything that crosses between grader and worker.

Why: the trusted grader must never unpickle what student code produced. Values become a JSON
tree plus numeric arrays in an `.npz` read with `allow_pickle=False`, so the worst a hostile
worker can send is wrong numbers. Anything else (a model object, a closure) stays in the worker
and crosses as an opaque handle.
"""
from __future__ import annotations

import io
import json
import math
import struct

import numpy as np

MAX_DEPTH = 64
MAX_MESSAGE_BYTES = 1 << 30  # 1 GiB: larger messages are treated as a broken worker
# What a reply from the worker may make the grader build (`unpack(..., bounded=True)`, the
# default). Why: json.loads turns "[[],[],...]" into 20 times its size in Python objects, and a
# deflated npz member can declare a gigabyte in a few kilobytes. Arrays are stored uncompressed by
# `pack`, so their decoded size never exceeds the bytes received; JSON is bounded by bytes (which
# also bounds string characters) and by a count of values made before parsing.
MAX_REPLY_JSON_BYTES = 64 << 20
MAX_REPLY_JSON_VALUES = 1_500_000  # values in one reply's JSON (the staff ngram's largest reply: 230,000)
MAX_REPLY_ARRAY_ELEMENTS = 1 << 26  # elements over all arrays of one reply
MAX_REPLY_ARRAY_BYTES = 512 << 20
_HEADER = struct.Struct(">QQ")  # (json bytes, npz bytes)


_PLAIN = (str, int, bool, type(None))  # JSON-native as they are (floats may be NaN: not here)


class WireError(ValueError):
    """A value that cannot cross the process boundary, or a malformed message."""


class Handle:
    """Opaque reference to an object living in the worker (a student's model, say)."""

    __slots__ = ("id", "type_name")

    def __init__(self, id: int, type_name: str = "object"):
        self.id = int(id)
        self.type_name = str(type_name)

    def __repr__(self) -> str:
        return f"<{self.type_name} object in the student's process>"


def encode(value, arrays: list, *, make_handle=None, depth: int = 0):
    """Turn `value` into a JSON-able tree; arrays are appended to `arrays` and referenced by index.

    `make_handle(obj) -> Handle` is used by the worker for objects that are not plain data;
    without it such objects are an error.
    """
    if depth > MAX_DEPTH:
        raise WireError("value is nested too deeply")
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        if math.isfinite(value):
            return value
        return {"__float__": repr(value)}  # 'nan', 'inf', '-inf'
    if isinstance(value, Handle):
        return {"__handle__": value.id, "type": value.type_name}
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        arr = np.array(value, copy=True)  # a plain ndarray even for subclasses
        if arr.dtype.hasobject or arr.dtype.kind not in "biufcU?":
            raise WireError(f"array of dtype {arr.dtype} cannot be graded")
        arrays.append(arr)
        return {"__array__": len(arrays) - 1, "scalar": isinstance(value, np.generic)}
    tensor = _as_tensor(value)
    if tensor is not None:
        t = tensor.detach()
        dtype = str(t.dtype).removeprefix("torch.")
        if t.dtype.is_complex:
            raise WireError("complex tensors cannot be graded")
        if dtype == "bfloat16":
            t = t.float()
        arrays.append(t.to("cpu").contiguous().numpy().copy())
        return {"__tensor__": len(arrays) - 1, "dtype": dtype, "device": str(tensor.device),
                "requires_grad": bool(tensor.requires_grad)}
    if type(value) is list:
        if all(type(v) in _PLAIN for v in value):  # fast path: token lists, counts
            return list(value)
        return [encode(v, arrays, make_handle=make_handle, depth=depth + 1) for v in value]
    if isinstance(value, tuple):  # a NamedTuple or torch's return types too: their items, read as a tuple's
        return {"__tuple__": [encode(v, arrays, make_handle=make_handle, depth=depth + 1)
                              for v in tuple.__iter__(value)]}
    if type(value) in (set, frozenset):  # sorted: set order varies with hash seeds, fixtures must not
        return {"__set__": [encode(v, arrays, make_handle=make_handle, depth=depth + 1) for v in sorted(value, key=repr)]}
    if isinstance(value, dict) and _plain_dict(value):
        return {"__dict__": [[encode(k, arrays, make_handle=make_handle, depth=depth + 1),
                              encode(v, arrays, make_handle=make_handle, depth=depth + 1)]
                             for k, v in dict.items(value)]}
    if isinstance(value, (int, float, str)):  # subclasses (bool excluded above): take the plain value
        base = int if isinstance(value, int) else float if isinstance(value, float) else str
        return encode(base.__new__(base, value) if base is not str else str.__str__(value), arrays,
                      make_handle=make_handle, depth=depth + 1)
    if make_handle is not None:
        return encode(make_handle(value), arrays, depth=depth + 1)
    raise WireError(f"a value of type {type(value).__name__} cannot be sent to the student's code")


def _plain_dict(value) -> bool:
    import collections
    return type(value) in (dict, collections.OrderedDict, collections.Counter, collections.defaultdict)


def _as_tensor(value):
    """Return value if it is a torch.Tensor (without importing torch when nobody else did)."""
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value
    return None


def decode(tree, arrays: list, *, resolve_handle=None, depth: int = 0):
    """Inverse of `encode`. Handles become `Handle` objects unless `resolve_handle` maps them."""
    if depth > MAX_DEPTH:
        raise WireError("value is nested too deeply")
    if tree is None or type(tree) in (bool, int, float, str):
        return tree
    if type(tree) is list:
        if all(type(v) in _PLAIN for v in tree):
            return list(tree)
        return [decode(v, arrays, resolve_handle=resolve_handle, depth=depth + 1) for v in tree]
    if type(tree) is not dict or len(tree) == 0:
        raise WireError("malformed value")
    if "__float__" in tree:
        if tree["__float__"] not in ("nan", "inf", "-inf"):  # what encode writes; anything else is forged
            raise WireError("malformed number")
        return float(tree["__float__"])
    if "__array__" in tree:
        arr = _array_at(arrays, tree["__array__"])
        return arr[()] if tree.get("scalar") else arr
    if "__tensor__" in tree:
        import torch
        arr = _array_at(arrays, tree["__tensor__"])
        try:
            t = torch.from_numpy(np.array(arr, copy=True))
        except TypeError:  # e.g. a string array sent as a tensor
            raise WireError("malformed tensor") from None
        if tree.get("dtype") == "bfloat16":
            t = t.to(torch.bfloat16)
        t.lmgrade_device = str(tree.get("device", "cpu"))[:40]  # where the student's tensor lived: a claim
        t.lmgrade_requires_grad = bool(tree.get("requires_grad", False))
        return t
    if "__tuple__" in tree:
        return tuple(decode(v, arrays, resolve_handle=resolve_handle, depth=depth + 1) for v in _items(tree, "__tuple__"))
    if "__set__" in tree:
        try:
            return set(decode(v, arrays, resolve_handle=resolve_handle, depth=depth + 1) for v in _items(tree, "__set__"))
        except TypeError:
            raise WireError("set with an unhashable element") from None
    if "__dict__" in tree:
        out = {}
        for pair in _items(tree, "__dict__"):
            if type(pair) is not list or len(pair) != 2:
                raise WireError("malformed mapping")
            key = decode(pair[0], arrays, resolve_handle=resolve_handle, depth=depth + 1)
            try:
                hash(key)
            except TypeError:
                raise WireError("mapping with an unhashable key") from None
            out[key] = decode(pair[1], arrays, resolve_handle=resolve_handle, depth=depth + 1)
        return out
    if "__handle__" in tree:
        if type(tree["__handle__"]) is not int:
            raise WireError("malformed handle")
        handle = Handle(tree["__handle__"], tree.get("type", "object"))
        return resolve_handle(handle) if resolve_handle else handle
    raise WireError("malformed value")


def _items(tree: dict, key: str) -> list:
    if type(tree[key]) is not list:
        raise WireError("malformed value")
    return tree[key]


def _array_at(arrays, index):
    if type(index) is not int or not 0 <= index < len(arrays):
        raise WireError("malformed array reference")
    return arrays[index]


def pack(message: dict, arrays: list) -> bytes:
    """One framed message: header, JSON, then an npz of the arrays (if any)."""
    body = json.dumps(message, allow_nan=False).encode()
    blob = b""
    if arrays:
        buf = io.BytesIO()
        np.savez(buf, *arrays)
        blob = buf.getvalue()
    return _HEADER.pack(len(body), len(blob)) + body + blob


def header_lengths(header: bytes, *, bounded: bool = True) -> tuple[int, int]:
    """(json bytes, npz bytes) of the message that follows; `bounded` (a reply): refused before reading."""
    n_json, n_npz = _HEADER.unpack(header)
    if n_json + n_npz > MAX_MESSAGE_BYTES:
        raise WireError("message too large")
    if bounded and n_json > MAX_REPLY_JSON_BYTES:
        raise WireError(f"{TOO_LARGE}: {n_json:,} bytes of JSON (at most {MAX_REPLY_JSON_BYTES:,}); "
                        "return smaller results (arrays rather than long lists, summaries rather than everything)")
    if bounded and n_npz > MAX_REPLY_ARRAY_BYTES + (1 << 20):
        raise WireError(f"{TOO_LARGE}: {n_npz:,} bytes of arrays (at most {MAX_REPLY_ARRAY_BYTES:,})")
    return n_json, n_npz


HEADER_SIZE = _HEADER.size


def unpack(body: bytes, blob: bytes, *, bounded: bool = True) -> tuple[dict, list]:
    """Parse JSON and arrays; never unpickles.

    `bounded` (the grader reading a worker's reply) refuses, before building anything, a reply
    whose JSON or arrays exceed the MAX_REPLY_* limits, with a WireError that says so. The worker
    reading the grader's requests passes `bounded=False`.
    """
    if bounded:
        _check_json_size(body)
    try:
        message = json.loads(body.decode())
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, huge ints, absurd nesting
        raise WireError(f"malformed message: {exc}") from None
    arrays = []
    if blob:
        try:
            with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
                infos = npz.zip.infolist()
                # declared sizes bound what decompression can produce: no zip bombs
                if sum(info.file_size for info in infos) > MAX_MESSAGE_BYTES:
                    raise WireError("arrays too large")
                if bounded:
                    _check_array_sizes(npz, infos, len(blob))
                arrays = [npz[f"arr_{i}"] for i in range(len(npz.files))]
        except WireError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure means a broken message
            raise WireError(f"malformed arrays: {exc}") from None
        if any(type(a) is not np.ndarray for a in arrays):  # np.load gives raw bytes for a non-.npy member
            raise WireError("malformed arrays: a member is not an array")
    if type(message) is not dict:
        raise WireError("malformed message")
    return message, arrays


TOO_LARGE = "the reply was too large"


def _check_json_size(body: bytes) -> None:
    """Bound the Python objects json.loads would build, from the bytes alone (C-speed counts)."""
    if len(body) > MAX_REPLY_JSON_BYTES:
        raise WireError(f"{TOO_LARGE}: {len(body):,} bytes of JSON (at most {MAX_REPLY_JSON_BYTES:,}); "
                        "return smaller results (arrays rather than long lists, summaries rather than everything)")
    # every value but the first follows a ',' or ':' or opens a list or dict: an upper bound
    values = body.count(b",") + body.count(b":") + body.count(b"[") + body.count(b"{") + 1
    if values > MAX_REPLY_JSON_VALUES:
        raise WireError(f"{TOO_LARGE}: up to {values:,} values in nested lists and dicts (at most "
                        f"{MAX_REPLY_JSON_VALUES:,}); return arrays rather than long lists")


def _check_array_sizes(npz, infos, blob_bytes: int) -> None:
    """Arrays decode to at most the bytes received (pack never compresses) and to a bounded count."""
    declared = sum(info.file_size for info in infos)
    if declared > blob_bytes or any(info.compress_type != 0 for info in infos):
        raise WireError(f"{TOO_LARGE}: its arrays declare {declared:,} bytes in {blob_bytes:,} "
                        "(compressed members are not the grader's format)")
    if declared > MAX_REPLY_ARRAY_BYTES:
        raise WireError(f"{TOO_LARGE}: {declared:,} bytes of arrays (at most {MAX_REPLY_ARRAY_BYTES:,})")
    elements = 0
    for name in npz.files:
        with npz.zip.open(name + ".npy") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape = read_header(f, max_header_size=10000)[0]
        elements += math.prod(shape)
        if elements > MAX_REPLY_ARRAY_ELEMENTS:
            raise WireError(f"{TOO_LARGE}: more than {MAX_REPLY_ARRAY_ELEMENTS:,} array elements "
                            "(return smaller arrays)")


def to_json_tree(value):
    """Self-contained JSON form (arrays inline) for committed fixtures that people review."""
    arrays: list = []
    tree = encode(value, arrays)
    return {"value": tree, "arrays": [
        {"dtype": a.dtype.str, "shape": list(a.shape), "data": [_json_number(x) for x in a.ravel().tolist()]}
        for a in arrays]}


def from_json_tree(doc):
    arrays = []
    for spec in doc["arrays"]:
        data = [float(x["__float__"]) if isinstance(x, dict) else x for x in spec["data"]]
        arrays.append(np.array(data, dtype=np.dtype(spec["dtype"])).reshape(spec["shape"]))
    return decode(doc["value"], arrays)


def _json_number(x):
    if isinstance(x, float) and not math.isfinite(x):
        return {"__float__": repr(x)}
    return x
