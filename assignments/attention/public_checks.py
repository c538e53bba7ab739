"""Public checks for `attention`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: fixtures recorded from the reference by `lmgrade
build`, so these checks run where the reference is not available. Dims are distinct
(B != T != d != heads) so that a transposition cannot pass by accident.
"""
import torch

from autograder.checks import check
from autograder.compare import assert_close, assert_equal
from autograder.torch_checks import linear_state, randn, reference_module, student_module

F32 = torch.float32


@check(1, 1, "dot_product_attention on a small batch", public=True, uses=("dot_product_attention",))
def public_dot_product(t):
    h, H = randn(t, 2, 5, dtype=F32), randn(t, 2, 3, 5, dtype=F32)
    got = t.student.dot_product_attention(h, H)
    expected = t.expected("out", lambda ref: ref.dot_product_attention(h, H))
    assert_close(got[0], expected[0], "dot_product_attention(h (2, 5), H (2, 3, 5)) context")
    assert_close(got[1], expected[1], "dot_product_attention(h (2, 5), H (2, 3, 5)) weights")


@check(2, 1, "scaled_dot_product_attention with and without a mask", public=True,
       uses=("scaled_dot_product_attention",))
def public_sdpa(t):
    q, k, v = randn(t, 2, 3, 4, dtype=F32), randn(t, 2, 5, 4, dtype=F32), randn(t, 2, 5, 6, dtype=F32)
    mask = torch.tensor([[True, False, True, True, False]] * 3)
    for label, m in (("no mask", None), ("a (3, 5) mask", mask)):
        got = t.student.scaled_dot_product_attention(q, k, v, m)
        expected = t.expected(label, lambda ref: ref.scaled_dot_product_attention(q, k, v, m))
        what = f"scaled_dot_product_attention(q (2, 3, 4), k (2, 5, 4), v (2, 5, 6), {label})"
        assert_close(got[0], expected[0], what + " output")
        assert_close(got[1], expected[1], what + " weights")


@check(3, 1, "causal_mask and padding_mask", public=True, uses=("causal_mask", "padding_mask"))
def public_masks(t):
    for shape in ((4, 4), (2, 5)):
        assert_equal(t.student.causal_mask(*shape).tolist(),
                     t.expected(f"causal{shape}", lambda ref: ref.causal_mask(*shape).tolist()),
                     f"causal_mask{shape}")
    lengths = torch.tensor([3, 1, 4])
    assert_equal(t.student.padding_mask(lengths, 5).tolist(),
                 t.expected("padding", lambda ref: ref.padding_mask(lengths, 5).tolist()),
                 "padding_mask(tensor([3, 1, 4]), 5)")


def _mha_state(t, d_model: int) -> dict:
    state = {}
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        state |= linear_state(t, name, d_model, d_model)
    return state


@check(4, 1, "MultiHeadAttention self-attention with a causal mask", public=True,
       uses=("MultiHeadAttention", "split_heads", "merge_heads"))
def public_mha(t):
    state, x = _mha_state(t, 6), randn(t, 2, 5, 6, dtype=F32)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    module = student_module(t, t.student.MultiHeadAttention, (6, 3), state, F32)
    expected = t.expected("out", lambda ref: reference_module(ref.MultiHeadAttention(6, 3), state, F32)(x, None, mask))
    assert_close(module(x, None, mask), expected, "MultiHeadAttention(6, 3)(x (2, 5, 6), mask=causal (5, 5))",
                 rtol=1e-5, atol=1e-5)


@check(5, 1, "GroupedQueryAttention with 4 query heads and 2 key/value heads", public=True,
       uses=("GroupedQueryAttention",))
def public_gqa(t):
    state = (linear_state(t, "q_proj", 8, 8) | linear_state(t, "k_proj", 8, 4) | linear_state(t, "v_proj", 8, 4)
             | linear_state(t, "out_proj", 8, 8))
    x = randn(t, 2, 3, 8, dtype=F32)
    module = student_module(t, t.student.GroupedQueryAttention, (8, 4, 2), state, F32)
    expected = t.expected("out", lambda ref: reference_module(ref.GroupedQueryAttention(8, 4, 2), state, F32)(x))
    assert_close(module(x), expected, "GroupedQueryAttention(8, 4, 2)(x (2, 3, 8))", rtol=1e-5, atol=1e-5)


@check(6, 1, "sinusoidal_positions, apply_rope and alibi_slopes", public=True,
       uses=("sinusoidal_positions", "apply_rope", "alibi_slopes"))
def public_positions(t):
    assert_close(t.student.sinusoidal_positions(5, 6),
                 t.expected("sinusoidal", lambda ref: ref.sinusoidal_positions(5, 6)), "sinusoidal_positions(5, 6)")
    x = randn(t, 2, 5, 4, dtype=F32)
    assert_close(t.student.apply_rope(x), t.expected("rope", lambda ref: ref.apply_rope(x)), "apply_rope(x (2, 5, 4))")
    assert_close(t.student.alibi_slopes(4), t.expected("alibi", lambda ref: ref.alibi_slopes(4)), "alibi_slopes(4)")

