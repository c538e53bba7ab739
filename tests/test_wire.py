"""The plain-data wire: what crosses between grader and worker, and what a forged message cannot do."""
import io
import json
import math
import pickle
import zipfile

import numpy as np
import pytest
import torch

from autograder.sandbox import wire
from autograder.sandbox.wire import Handle, WireError


def roundtrip(value, make_handle=None, resolve_handle=None):
    """encode -> pack -> bytes -> unpack -> decode, exactly as over the pipe."""
    arrays: list = []
    tree = wire.encode(value, arrays, make_handle=make_handle)
    data = wire.pack({"value": tree}, arrays)
    n_json, n_npz = wire.header_lengths(data[:wire.HEADER_SIZE])
    assert wire.HEADER_SIZE + n_json + n_npz == len(data)
    body = data[wire.HEADER_SIZE:wire.HEADER_SIZE + n_json]
    message, got_arrays = wire.unpack(body, data[wire.HEADER_SIZE + n_json:])
    return wire.decode(message["value"], got_arrays, resolve_handle=resolve_handle)


def same(a, b) -> bool:
    """Equality that also checks types all the way down (1 == 1.0 == True would hide bugs)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**200, -(3**150), 0.5, -1e-300, 1e308, "", "héllo\n\"quoted\"\x00",
    [], [1, "a", None, True], (), (1, 2.5, "x"), ((1, 2), [3, (4,)]),
    {"a": 1}, {("to", "be"): 3, ("or",): 1}, {1: [1, 2], None: {"x": (1,)}, False: 0.25},
    [[[[1]]]], {"nested": [{"k": ({"deep": [1, 2, {"deeper": None}]},)}]},
])
def test_plain_values_round_trip_with_their_types(value):
    assert same(roundtrip(value), value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_round_trip(value):
    got = roundtrip(value)
    assert type(got) is float
    assert (math.isnan(got) and math.isnan(value)) or got == value
    got = roundtrip([1.0, value, {"k": value}])
    assert got[0] == 1.0 and type(got[1]) is float and type(got[2]["k"]) is float


def test_sets_and_frozensets_arrive_as_sets():
    assert roundtrip({"a", "b", ("c", 1)}) == {"a", "b", ("c", 1)}
    assert roundtrip(frozenset({1, 2})) == {1, 2}
    assert type(roundtrip({1})) is set


def test_counter_and_defaultdict_arrive_as_plain_dicts():
    import collections
    got = roundtrip(collections.Counter({("a", "b"): 2}))
    assert type(got) is dict and got == {("a", "b"): 2}
    got = roundtrip(collections.defaultdict(int, {"x": 1}))
    assert type(got) is dict and got == {"x": 1}


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "int32", "int8", "uint8", "bool",
                                   "complex128", "<U5"])
def test_numpy_arrays_keep_dtype_shape_and_values(dtype):
    rng = np.random.default_rng(0)
    if dtype == "<U5":
        arr = np.array([["ab", "cde"], ["", "x"]], dtype=dtype)
    else:
        arr = (rng.normal(size=(3, 4)) * 10).astype(dtype)
    got = roundtrip(arr)
    assert type(got) is np.ndarray and got.dtype == arr.dtype and got.shape == arr.shape
    np.testing.assert_array_equal(got, arr)


def test_numpy_non_finite_and_empty_and_zero_dim_arrays():
    arr = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    got = roundtrip(arr)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf and np.signbit(got[4])
    empty = roundtrip(np.zeros((0, 3), dtype=np.float32))
    assert empty.shape == (0, 3) and empty.dtype == np.float32
    zero_dim = roundtrip(np.array(3.5))
    assert type(zero_dim) is np.ndarray and zero_dim.shape == () and zero_dim == 3.5


def test_non_contiguous_and_subclass_arrays_arrive_as_plain_arrays():
    base = np.arange(24, dtype=np.int64).reshape(4, 6)
    np.testing.assert_array_equal(roundtrip(base[:, ::2].T), base[:, ::2].T)

    class Lying(np.ndarray):
        def __eq__(self, other):
            return True

    sub = np.arange(3.0).view(Lying)
    got = roundtrip(sub)
    assert type(got) is np.ndarray
    assert not (got == np.array([9.0, 9.0, 9.0])).any()


@pytest.mark.parametrize("scalar", [np.float64(1.5), np.float32(-2.25), np.int64(-3), np.int8(5), np.bool_(True),
                                    np.float64(np.nan)])
def test_numpy_scalars_arrive_as_numpy_scalars(scalar):
    got = roundtrip(scalar)
    assert isinstance(got, np.generic) and got.dtype == scalar.dtype
    assert (np.isnan(got) and np.isnan(scalar)) or got == scalar


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.int64, torch.bool])
def test_torch_tensors_keep_dtype_and_values(dtype):
    t = (torch.randn(2, 3, generator=torch.Generator().manual_seed(0)) * 5).to(dtype)
    got = roundtrip(t)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.shape == t.shape
    assert torch.equal(got, t)
    assert got.lmgrade_device == "cpu" and got.lmgrade_requires_grad is False


def test_bfloat16_tensor_comes_back_as_bfloat16_exactly():
    t = torch.tensor([1.0, 3.140625, -0.0078125, float("inf")], dtype=torch.bfloat16)
    got = roundtrip(t)
    assert got.dtype == torch.bfloat16 and torch.equal(got, t)


def test_tensor_records_device_and_requires_grad():
    t = torch.ones(3, dtype=torch.float64, requires_grad=True) * 2  # non-leaf with grad
    arrays: list = []
    tree = wire.encode(t, arrays)
    assert tree["device"] == "cpu" and tree["requires_grad"] is True and tree["dtype"] == "float64"
    got = roundtrip(t)
    assert got.lmgrade_requires_grad is True and not got.requires_grad  # data only, no graph
    # a tensor reported as living on a GPU keeps that fact even though the data arrive on the CPU
    tree["device"] = "cuda:0"
    got = wire.decode(tree, arrays)
    assert got.device.type == "cpu" and got.lmgrade_device == "cuda:0"


def test_tensor_subclass_and_parameter_are_data():
    p = torch.nn.Parameter(torch.arange(4.0))
    got = roundtrip(p)
    assert type(got) is torch.Tensor and torch.equal(got, torch.arange(4.0))


def test_mixed_nested_structure():
    value = {"logits": torch.zeros(2, 2), "ids": np.array([1, 2]), "meta": ("x", [np.float32(0.5), None])}
    got = roundtrip(value)
    assert torch.equal(got["logits"], torch.zeros(2, 2))
    np.testing.assert_array_equal(got["ids"], [1, 2])
    assert got["meta"][0] == "x" and got["meta"][1][0] == np.float32(0.5) and got["meta"][1][1] is None


def test_int_and_str_subclasses_become_plain_values():
    class MyInt(int):
        def __eq__(self, other):
            return True

    class MyStr(str):
        pass

    got = roundtrip([MyInt(3), MyStr("hi")])
    assert type(got[0]) is int and got[0] == 3 and got[0] != 4
    assert type(got[1]) is str and got[1] == "hi"


class Opaque:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [
    Opaque(), lambda x: x, object(), b"bytes", bytearray(b"x"), np.array([object()], dtype=object),
    np.array([b"ab"]), np.array(["2020-01-01"], dtype="datetime64[D]"), [1, Opaque()], {"k": object()},
    torch.ones(2, dtype=torch.complex64),
])
def test_values_that_are_not_plain_data_are_refused(value):
    with pytest.raises(WireError):
        wire.encode(value, [])


def test_unknown_objects_become_handles_only_where_allowed():
    made = []

    def make_handle(obj):
        made.append(obj)
        return Handle(len(made), type(obj).__name__)

    obj = Opaque()
    got = roundtrip({"model": obj, "n": 2}, make_handle=make_handle)
    assert isinstance(got["model"], Handle) and got["model"].id == 1 and got["model"].type_name == "Opaque"
    assert made == [obj] and got["n"] == 2
    assert "student" in repr(got["model"])
    resolved = roundtrip(Handle(7, "Model"), resolve_handle=lambda h: ("resolved", h.id))
    assert resolved == ("resolved", 7)


def test_too_deep_values_are_refused_on_both_sides():
    value: list = []
    for _ in range(wire.MAX_DEPTH + 5):
        value = [value, None, (1,)]
    with pytest.raises(WireError):
        wire.encode(value, [])
    tree: object = 1
    for _ in range(wire.MAX_DEPTH + 5):
        tree = {"__tuple__": [tree]}
    with pytest.raises(WireError):
        wire.decode(tree, [])


# ---- malformed messages: a hostile worker can write any bytes to its pipe ----------------------
def npz_bytes(**named) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **named)
    return buf.getvalue()


class Boom:
    executed = False

    def __reduce__(self):
        return (exec, ("import tests; Boom.executed = True; raise SystemExit('pickle ran')",))


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe{}", b"[1, 2]", b'"text"', b"", b"[" * 100_000,
                                  b"1" * 5000, b'{"a": ' + b"9" * 10_000 + b"}", b"\x00"])
def test_malformed_json_raises_wire_error(body):
    with pytest.raises(WireError):
        wire.unpack(body, b"")


@pytest.mark.parametrize("blob", [b"not an npz at all", b"PK\x03\x04 truncated zip", npz_bytes(arr_0=np.ones(3))[:-30],
                                  np.lib.format.MAGIC_PREFIX + b"\x01\x00garbage"])
def test_malformed_array_bytes_raise_wire_error(blob):
    with pytest.raises(WireError):
        wire.unpack(b"{}", blob)


def test_pickles_are_never_loaded():
    evil = pickle.dumps(Boom())
    # a bare pickle instead of an npz
    with pytest.raises(WireError):
        wire.unpack(b"{}", evil)
    # an object array (pickled) inside an otherwise valid npz
    with pytest.raises(WireError):
        wire.unpack(b"{}", npz_bytes(arr_0=np.array([Boom()], dtype=object)))
    # a raw pickle stored as a member of the zip
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("arr_0.npy", evil)
    with pytest.raises(WireError):
        wire.unpack(b"{}", buf.getvalue())
    assert Boom.executed is False


def test_npz_with_unexpected_member_names_is_refused():
    with pytest.raises(WireError):
        wire.unpack(b"{}", npz_bytes(other=np.ones(2)))


def test_compressed_arrays_cannot_expand_past_the_message_limit(monkeypatch):
    buf = io.BytesIO()
    np.savez_compressed(buf, np.zeros(4 << 20, dtype=np.uint8))  # 4 MiB of zeros in a few KiB
    assert len(buf.getvalue()) < 64 << 10
    monkeypatch.setattr(wire, "MAX_MESSAGE_BYTES", 1 << 20)
    with pytest.raises(WireError):
        wire.unpack(b"{}", buf.getvalue())


def test_oversized_header_is_refused():
    with pytest.raises(WireError):
        wire.header_lengths(wire._HEADER.pack(wire.MAX_MESSAGE_BYTES, 1))
    assert wire.header_lengths(wire._HEADER.pack(10, 20)) == (10, 20)


@pytest.mark.parametrize("tree", [
    {"__array__": 1}, {"__array__": -1}, {"__array__": "0"}, {"__array__": True}, {"__array__": 0.0},
    {"__tensor__": 5, "dtype": "float32"}, {}, {"unknown": 1}, {"__float__": "1e999999"}, {"__float__": [1]},
    {"__float__": "__import__('os')"}, {"__tuple__": 5}, {"__tuple__": "abc"}, {"__set__": [[1, 2]]},
    {"__set__": {"a": 1}}, {"__dict__": 3}, {"__dict__": [[1]]}, {"__dict__": [[[1], 2]]},
    {"__handle__": "x"}, {"__handle__": None}, [1, {"bad": 0}],
])
def test_malformed_trees_raise_wire_error(tree):
    with pytest.raises(WireError):
        wire.decode(tree, [np.zeros(2)], resolve_handle=lambda h: h)


def test_string_array_sent_as_tensor_is_refused():
    with pytest.raises(WireError):
        wire.decode({"__tensor__": 0, "dtype": "float32"}, [np.array(["a"])])


def test_a_forged_message_through_unpack_and_decode():
    """Bytes a worker might forge: valid framing, hostile content, only WireError comes out."""
    body = json.dumps({"event": "done", "value": {"__dict__": [[{"__set__": [[1]]}, 1]]}}).encode()
    message, arrays = wire.unpack(body, b"")
    with pytest.raises(WireError):
        wire.decode(message["value"], arrays)


# ---- committed fixtures ---------------------------------------------------------------------
def test_json_tree_round_trip_is_self_contained_json():
    value = {"probs": np.array([[0.25, np.nan], [np.inf, -np.inf]]), "ids": np.arange(3, dtype=np.int32),
             ("a", "b"): 2, "x": [1.5, math.nan, (None, True)], "t": torch.tensor([1.0, 2.0], dtype=torch.float64),
             "s": {"w"}, "scalar": np.float32(0.5)}
    doc = wire.to_json_tree(value)
    text = json.dumps(doc, allow_nan=False)  # strict JSON: reviewers can read it, every tool can parse it
    got = wire.from_json_tree(json.loads(text))
    np.testing.assert_array_equal(got["probs"], value["probs"])
    assert got["ids"].dtype == np.int32 and got["ids"].tolist() == [0, 1, 2]
    assert got[("a", "b")] == 2 and got["x"][0] == 1.5 and math.isnan(got["x"][1]) and got["x"][2] == (None, True)
    assert got["t"].dtype == torch.float64 and got["t"].tolist() == [1.0, 2.0]
    assert got["s"] == {"w"} and got["scalar"] == np.float32(0.5) and got["scalar"].dtype == np.float32


def test_json_tree_refuses_objects():
    with pytest.raises(WireError):
        wire.to_json_tree({"model": Opaque()})


def test_reply_sizes_are_bounded_before_reading_and_parsing(monkeypatch):
    header = wire._HEADER.pack(wire.MAX_REPLY_JSON_BYTES + 1, 0)
    with pytest.raises(WireError, match="the reply was too large"):
        wire.header_lengths(header)  # a reply: refused before its body is read
    assert wire.header_lengths(header, bounded=False)[0] == wire.MAX_REPLY_JSON_BYTES + 1  # a request
    monkeypatch.setattr(wire, "MAX_REPLY_JSON_VALUES", 100)
    body = json.dumps({"value": [[i] for i in range(60)]}).encode()
    with pytest.raises(WireError, match="the reply was too large"):
        wire.unpack(body, b"")
    assert len(wire.unpack(body, b"", bounded=False)[0]["value"]) == 60
    assert wire.unpack(json.dumps({"value": list(range(90))}).encode(), b"")[0]["value"] == list(range(90))


def test_named_tuples_and_torch_return_types_arrive_as_tuples():
    """A function returning a NamedTuple (or torch.max's result) is graded on its items, not made a handle."""
    from typing import NamedTuple

    class Step(NamedTuple):
        loss: float
        grad: np.ndarray

    got = roundtrip(Step(1.5, np.arange(3.0)))
    assert type(got) is tuple and got[0] == 1.5 and np.array_equal(got[1], np.arange(3.0))
    values, indices = roundtrip(torch.tensor([[1.0, 3.0], [4.0, 2.0]]).max(dim=1))
    assert torch.equal(values, torch.tensor([3.0, 4.0])) and torch.equal(indices, torch.tensor([1, 0]))


def test_a_tuple_subclass_is_read_by_its_stored_items_not_its_own_iteration():
    class Liar(tuple):
        def __iter__(self):
            return iter((0, 0, 0))

    assert roundtrip(Liar((1, 2, 3))) == (1, 2, 3)
