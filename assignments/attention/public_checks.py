"""Public checks for `attention`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: fixtures recorded from the reference by `lmgrade
build` (in float64 and rounded once with `float32_of` where the check runs in float32, so they are
the same on every CPU), so these checks run where the reference is not available. Dims are distinct
(B != T != d != heads) so that a transposition cannot pass by accident, and the inputs are chosen
to show the commonest bugs: 4-D queries with T_q != T_k, masks of several shapes, a fully masked
row, huge scores, masks checked as `bool`, a GQA case where dividing the heads the wrong way
shows (6 query heads, 2 key/value heads), positions beyond the first few, float64 in and out.
"""
import torch

from autograder.checking.checks import check
from autograder.checking.compare import assert_close, assert_dtype, assert_equal, assert_finite, assert_shape
from autograder.checking.purity import call_pure
from autograder.checking.torch_checks import (
    assert_device_agnostic, float32_of, gradcheck, linear_state, randn, reference_module, student_module,
)

F32, F64 = torch.float32, torch.float64


def close(got, expected, what: str, dtype=F32, tol: float | None = None) -> None:
    """Student output against the recorded reference value: the output's dtype, then its values."""
    assert_dtype(got, str(dtype).removeprefix("torch."), what)
    tol = tol or (1e-5 if dtype == F32 else 1e-9)
    assert_close(got, expected, what, rtol=tol, atol=tol)


@check(1, 1, "dot_product_attention and bilinear_attention on a small batch", public=True,
       uses=("dot_product_attention", "bilinear_attention"))
def public_dot_product(t):
    h, H = randn(t, 2, 5, dtype=F32), randn(t, 2, 3, 5, dtype=F32)
    got = call_pure(t.student.dot_product_attention, h, H)
    expected = t.expected("out", lambda ref: float32_of(ref.dot_product_attention(h.double(), H.double())))
    close(got[0], expected[0], "dot_product_attention(h (2, 5), H (2, 3, 5)) context")
    close(got[1], expected[1], "dot_product_attention(h (2, 5), H (2, 3, 5)) weights")
    h, H, W = randn(t, 3, 4), randn(t, 3, 6, 5), randn(t, 4, 5, scale=300.0)
    got = call_pure(t.student.bilinear_attention, h, H, W)
    expected = t.expected("bilinear", lambda ref: ref.bilinear_attention(h, H, W))
    what = "bilinear_attention(h (3, 4), H (3, 6, 5), W (4, 5) * 300, float64)"
    close(got[0], expected[0], what + " context", F64)
    close(got[1], expected[1], what + " weights", F64)


@check(2, 1, "scaled_dot_product_attention: 4-D inputs, masks, a fully masked row, huge scores", public=True,
       uses=("scaled_dot_product_attention",))
def public_sdpa(t):
    q, k, v = randn(t, 2, 3, 4, 5, dtype=F32), randn(t, 2, 3, 6, 5, dtype=F32), randn(t, 2, 3, 6, 7, dtype=F32)
    causal = torch.ones(4, 6, dtype=torch.bool).tril(2)
    padding = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])[:, None, None, :]
    empty_row = causal.clone()
    empty_row[1] = False
    shapes = "q (2, 3, 4, 5), k (2, 3, 6, 5), v (2, 3, 6, 7)"
    for label, m, scale in (("no mask", None, 1.0), ("a causal (4, 6) mask", causal, 1.0),
                            ("a padding (2, 1, 1, 6) mask", padding, 1.0),
                            ("a (4, 6) mask with query 1 fully masked", empty_row, 1.0),
                            ("q * 1000 and a causal mask", causal, 1000.0)):
        qs = q * scale
        got = call_pure(t.student.scaled_dot_product_attention, qs, k, v, m)
        expected = t.expected(label, lambda ref: float32_of(ref.scaled_dot_product_attention(qs.double(), k.double(),
                                                                                     v.double(), m)))
        what = f"scaled_dot_product_attention({shapes}, {label})"
        assert_finite(got[0], what + " output", mask=m)
        tol = {} if scale == 1 else {"tol": 1e-2}  # float32 scores x1000 carry rounding errors near 1e-4
        close(got[0], expected[0], what + " output", **tol)
        close(got[1], expected[1], what + " weights", **tol)
    q3, k3, v3 = q[0, 0:1].double(), k[0, 0:1].double(), v[0, 0:1].double()  # 3-D, batch of one, float64
    got = call_pure(t.student.scaled_dot_product_attention, q3, k3, v3, mask=causal)
    expected = t.expected("3-D", lambda ref: ref.scaled_dot_product_attention(q3, k3, v3, mask=causal))
    close(got[0], expected[0], "scaled_dot_product_attention(q (1, 4, 5), k (1, 6, 5), v (1, 6, 7), mask=causal, "
                               "float64) output", F64)
    gradcheck(t.student.scaled_dot_product_attention, [q3, k3, v3, empty_row], [0, 1, 2],
              "scaled_dot_product_attention with query 1 fully masked", output_index=0)


@check(3, 1, "causal_mask and padding_mask: bool masks, lower-right alignment", public=True,
       uses=("causal_mask", "padding_mask"))
def public_masks(t):
    for shape in ((4, 4), (2, 5)):
        got = t.student.causal_mask(*shape)
        assert_dtype(got, "bool", f"causal_mask{shape}")
        assert_equal(got.tolist(), t.expected(f"causal{shape}", lambda ref: ref.causal_mask(*shape).tolist()),
                     f"causal_mask{shape}")
    lengths = torch.tensor([3, 1, 5])
    got = call_pure(t.student.padding_mask, lengths, 5)
    assert_dtype(got, "bool", "padding_mask(tensor([3, 1, 5]), 5)")
    assert_equal(got.tolist(), t.expected("padding", lambda ref: ref.padding_mask(lengths, 5).tolist()),
                 "padding_mask(tensor([3, 1, 5]), 5)")


def _mha_state(t, d_model: int, kv: int | None = None) -> dict:
    kv = d_model if kv is None else kv
    return (linear_state(t, "q_proj", d_model, d_model) | linear_state(t, "k_proj", d_model, kv)
            | linear_state(t, "v_proj", d_model, kv) | linear_state(t, "out_proj", d_model, d_model))


@check(4, 1, "split_heads, and MultiHeadAttention: causal self-attention and masked cross-attention", public=True,
       uses=("MultiHeadAttention",), needs=("scaled_dot_product_attention", "split_heads", "merge_heads"))
def public_mha(t):
    x = randn(t, 2, 5, 6, dtype=F32)
    split = call_pure(t.student.split_heads, x, 3)
    assert_shape(split, (2, 3, 5, 2), "split_heads(x (2, 5, 6), 3)")
    close(split, t.expected("split", lambda ref: float32_of(ref.split_heads(x.double(), 3))), "split_heads(x (2, 5, 6), 3)")
    state = _mha_state(t, 6)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    module = student_module(t, t.student.MultiHeadAttention, (6, 3), state, F32)
    expected = t.expected("out", lambda ref: float32_of(reference_module(ref.MultiHeadAttention(6, 3), state, F64)(
        x.double(), None, mask)))
    close(call_pure(module, x, None, mask), expected, "MultiHeadAttention(6, 3)(x (2, 5, 6), mask=causal (5, 5))")
    context = randn(t, 2, 4, 6, dtype=F32)
    padding = torch.tensor([[True] * 4, [True, True, False, False]])[:, None, None, :]
    expected = t.expected("cross", lambda ref: float32_of(reference_module(ref.MultiHeadAttention(6, 3), state, F64)(
        x.double(), context.double(), padding)))
    close(call_pure(module, x, context, padding), expected,
          "MultiHeadAttention(6, 3)(x (2, 5, 6), context (2, 4, 6), padding mask (2, 1, 1, 4))")
    state = {k: v for k, v in state.items() if not k.endswith(".bias")}
    module = student_module(t, t.student.MultiHeadAttention, (6, 3, False), state, F32)
    expected = t.expected("no bias", lambda ref: float32_of(reference_module(ref.MultiHeadAttention(6, 3, False), state, F64)(
        x.double())))
    close(call_pure(module, x), expected, "MultiHeadAttention(6, 3, bias=False)(x (2, 5, 6))")


@check(5, 1, "GroupedQueryAttention with 6 query heads and 2 key/value heads, causal", public=True,
       uses=("GroupedQueryAttention",), needs=("scaled_dot_product_attention", "split_heads", "merge_heads"))
def public_gqa(t):
    state = _mha_state(t, 12, 4)
    x = randn(t, 2, 3, 12, dtype=F32)
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    module = student_module(t, t.student.GroupedQueryAttention, (12, 6, 2), state, F32)
    expected = t.expected("out", lambda ref: float32_of(reference_module(ref.GroupedQueryAttention(12, 6, 2), state, F64)(
        x.double(), mask)))
    close(call_pure(module, x, mask), expected, "GroupedQueryAttention(12, 6, 2)(x (2, 3, 12), causal mask)")


@check(6, 1, "sinusoidal_positions (odd d), LearnedPositions, apply_rope (positions=, base=), alibi_slopes and "
       "alibi_bias", public=True,
       uses=("sinusoidal_positions", "LearnedPositions", "apply_rope", "alibi_slopes", "alibi_bias"))
def public_positions(t):
    for T, d in ((5, 6), (40, 7)):
        close(t.student.sinusoidal_positions(T, d),
              t.expected(f"sinusoidal{T, d}", lambda ref: float32_of(ref.sinusoidal_positions(T, d, dtype=F64))), f"sinusoidal_positions({T}, {d})")
    state = {"table.weight": randn(t, 7, 4, dtype=F32)}
    module = student_module(t, t.student.LearnedPositions, (7, 4), state, F32)
    x = randn(t, 2, 5, 4, dtype=F32)
    expected = t.expected("learned", lambda ref: float32_of(reference_module(ref.LearnedPositions(7, 4), state, F64)(x.double())))
    close(call_pure(module, x), expected, "LearnedPositions(7, 4)(x (2, 5, 4))")
    x = randn(t, 2, 3, 5, 4)
    positions = torch.tensor([6, 0, 2, 3000, 9])
    for label, kwargs in (("", {}), (", positions=tensor([6, 0, 2, 3000, 9]), base=100.0",
                                     {"positions": positions, "base": 100.0})):
        got = call_pure(t.student.apply_rope, x, **kwargs)
        close(got, t.expected(f"rope{label}", lambda ref: ref.apply_rope(x, **kwargs)), f"apply_rope(x (2, 3, 5, 4){label})",
              F64)
    for n in (4, 6):
        assert_close(t.student.alibi_slopes(n), t.expected(f"alibi{n}", lambda ref: ref.alibi_slopes(n)),
                     f"alibi_slopes({n})", rtol=1e-6)
    assert_close(t.student.alibi_bias(4, 3, 5), t.expected("alibi_bias", lambda ref: ref.alibi_bias(4, 3, 5)),
                 "alibi_bias(4, 3, 5)", rtol=1e-6)


@check(7, 1, "float64 in, float64 out: MultiHeadAttention and sinusoidal_positions(dtype=torch.float64); "
       "no tensor on a fixed device", public=True,
       uses=("MultiHeadAttention", "sinusoidal_positions", "LearnedPositions", "causal_mask"),
       needs=("scaled_dot_product_attention",))
def public_float64(t):
    state = _mha_state(t, 6)
    x = randn(t, 2, 5, 6)
    module = student_module(t, t.student.MultiHeadAttention, (6, 3), state, F64)
    expected = t.expected("mha", lambda ref: reference_module(ref.MultiHeadAttention(6, 3), state, F64)(x))
    close(call_pure(module, x), expected, "MultiHeadAttention(6, 3) in float64 (x (2, 5, 6) float64)", F64)
    dtype = t.student.put(torch.zeros(1, dtype=F64), "a tensor").dtype.get()  # a torch dtype in your process
    close(t.student.sinusoidal_positions(300, 6, dtype=dtype),
          t.expected("sinusoidal", lambda ref: ref.sinusoidal_positions(300, 6, dtype=F64)),
          "sinusoidal_positions(300, 6, dtype=torch.float64)", F64)
    # On the simulated accelerator a tensor created without device= meets the device's tensors; this can only fail.
    x32, mask = x.float(), torch.ones(5, 5, dtype=torch.bool).tril()
    assert_device_agnostic(t.student.MultiHeadAttention(6, 3), [x32], "MultiHeadAttention(6, 3)(x)")
    assert_device_agnostic(t.student.MultiHeadAttention(6, 3), [x32, None, mask], "MultiHeadAttention(6, 3)(x, None, mask)")
    assert_device_agnostic(t.student.LearnedPositions(7, 6), [x32], "LearnedPositions(7, 6)(x)")
    assert_device_agnostic(t.student.causal_mask, [3, 5], "causal_mask(3, 5, device=...)", device_arg="device",
                           follows_dtype=False)
