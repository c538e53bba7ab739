"""Q2: scaled_dot_product_attention (public 2, hidden: against F.sdpa, weight rows, fully masked, huge, gradients)."""
import math

import torch
import torch.nn.functional as F
from otter.test_files import test_case

import attention_reference as ref
from port_common import (F32, F64, DTYPES, Inputs, assert_close, assert_finite, close, float32_of, gradcheck,
                         huge_close, module_close, pure, true_attention)

OK_FORMAT = False
name = "q2"
points = None
B, H, TQ, TK, DK, DV = 2, 3, 4, 6, 5, 7


def inputs(t, dtype, scale=1.0, lead=(B, H)):
    return (t.randn(*lead, TQ, DK, dtype=dtype, scale=scale), t.randn(*lead, TK, DK, dtype=dtype),
            t.randn(*lead, TK, DV, dtype=dtype))


@test_case(points=1, hidden=False)
def test_public(scaled_dot_product_attention):
    t = Inputs(201)
    q, k, v = t.randn(2, 3, 4, 5, dtype=F32), t.randn(2, 3, 6, 5, dtype=F32), t.randn(2, 3, 6, 7, dtype=F32)
    causal = torch.ones(4, 6, dtype=torch.bool).tril(2)
    padding = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])[:, None, None, :]
    empty_row = causal.clone()
    empty_row[1] = False
    for label, m, scale in (("no mask", None, 1.0), ("causal", causal, 1.0), ("padding", padding, 1.0),
                            ("query 1 fully masked", empty_row, 1.0), ("q * 1000, causal", causal, 1000.0)):
        qs = q * scale
        got = pure(scaled_dot_product_attention, qs, k, v, m)
        expected = float32_of(ref.scaled_dot_product_attention(qs.double(), k.double(), v.double(), m))
        if m is None or bool(m.any(-1).all()):
            assert_finite(got[0], label)
        tol = {} if scale == 1 else {"tol": 1e-2}
        close(got[0], expected[0], label + " output", **tol)
        close(got[1], expected[1], label + " weights", **tol)
    q3, k3, v3 = q[0, 0:1].double(), k[0, 0:1].double(), v[0, 0:1].double()
    got = pure(scaled_dot_product_attention, q3, k3, v3, mask=causal)
    close(got[0], ref.scaled_dot_product_attention(q3, k3, v3, mask=causal)[0], "3-D float64 output", F64)
    gradcheck(scaled_dot_product_attention, [q3, k3, v3, empty_row], [0, 1, 2], "sdpa, query 1 fully masked",
              output_index=0)


@test_case(points=2, hidden=True)
def test_vs_builtin(scaled_dot_product_attention):
    t = Inputs(202)
    masks = {"no mask": None, "(T_q, T_k)": t.mask(TQ, TK), "(B, 1, 1, T_k)": t.mask(B, 1, 1, TK),
             "(B, h, T_q, T_k)": t.mask(B, H, TQ, TK)}
    for dtype in DTYPES:
        q, k, v = inputs(t, dtype)
        for label, mask in masks.items():
            out, weights = pure(scaled_dot_product_attention, q, k, v, mask)
            assert out.dtype == dtype and out.shape == (B, H, TQ, DV), label
            assert weights.shape == (B, H, TQ, TK), label
            module_close(out, F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask),
                         label + " output", dtype)
            module_close(weights, true_attention(q, k, v, mask)[1], label + " weights", dtype)
    q, k, v = inputs(t, F64, lead=(1,))
    mask = t.mask(TQ, TK)
    out, weights = pure(scaled_dot_product_attention, q, k, v, mask=mask)
    assert_close(out, true_attention(q, k, v, mask)[0], "3-D output")
    assert_close(weights, true_attention(q, k, v, mask)[1], "3-D weights")
    q, k, v = inputs(t, F64, lead=(B,))
    for label, mask in (("(B, T_q, T_k)", t.mask(B, TQ, TK)),
                        ("(B, 1, T_k)", torch.tensor([[True] * TK, [True] * 2 + [False] * (TK - 2)])[:, None])):
        out, weights = pure(scaled_dot_product_attention, q, k, v, mask)
        expected_out, expected_weights = true_attention(q, k, v, mask)
        assert_close(out, expected_out, label + " output")
        assert_close(weights, expected_weights, label + " weights")


@test_case(points=1, hidden=True)
def test_weight_rows(scaled_dot_product_attention):
    t = Inputs(203)
    q, k, v = inputs(t, F32)
    mask = t.mask(B, 1, TQ, TK)
    _, weights = pure(scaled_dot_product_attention, q, k, v, mask)
    assert_close(weights.double().sum(-1), torch.ones(B, H, TQ, dtype=F64), "row sums", rtol=1e-5, atol=1e-5)
    leaked = weights.masked_select(~mask.expand(B, H, TQ, TK))
    assert not (leaked.numel() and bool((leaked != 0).any())), "weights where the mask is False must be exactly 0"
    for dtype in DTYPES:
        q, k, v = inputs(t, dtype, lead=(1, 1))
        k[..., 0, :] = 0.0
        k[..., 0, 0] = 1.0
        k[..., 1:, 0] = 0.0
        q[..., 0, 0] = -5e4 * math.sqrt(DK)
        mask = t.mask(TQ, TK)
        mask[0] = False
        mask[0, 0] = True
        out, weights = pure(scaled_dot_product_attention, q, k, v, mask)
        assert abs(float(weights[0, 0, 0, 0]) - 1.0) <= 1e-6, "a masked score must end up below every score"
        module_close(out[..., 0, :], true_attention(q, k, v, mask)[0][..., 0, :], "output of query 0", dtype)


@test_case(points=1, hidden=True)
def test_fully_masked(scaled_dot_product_attention):
    t = Inputs(204)
    for dtype in (F64, F32):
        q, k, v = inputs(t, dtype)
        mask = t.mask(TQ, TK)
        mask[1] = False
        out, weights = pure(scaled_dot_product_attention, q, k, v, mask)
        assert_finite(out, "output")
        assert_finite(weights, "weights")
        assert_close(weights[:, :, 1], torch.zeros(B, H, TK, dtype=F64), "weights of query 1")
        assert_close(out[:, :, 1], torch.zeros(B, H, DV, dtype=F64), "output of query 1")
        rest = [0, 2, 3]
        expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
        module_close(out[:, :, rest], expected[:, :, rest], "outputs of the other queries", dtype)


@test_case(points=1, hidden=True)
def test_stability(scaled_dot_product_attention):
    t = Inputs(205)
    for dtype in (F64, F32):
        q, k, v = inputs(t, dtype, scale=1000.0)
        for label, mask in (("no mask", None), ("a mask", t.mask(TQ, TK))):
            out, weights = pure(scaled_dot_product_attention, q, k, v, mask)
            assert_finite(out, label + " output")
            assert_finite(weights, label + " weights")
            huge_close(out, true_attention(q, k, v, mask)[0], label + " output", dtype)


@test_case(points=2, hidden=True)
def test_gradients(scaled_dot_product_attention):
    t = Inputs(206)
    q, k, v = t.randn(2, 3, 4), t.randn(2, 5, 4), t.randn(2, 5, 6)
    empty = t.mask(3, 5)
    empty[2] = False
    for label, mask in (("", None), (" with a mask", t.mask(3, 5)), (" with query 2 fully masked", empty)):
        gradcheck(scaled_dot_product_attention, [q, k, v, mask], [0, 1, 2], "sdpa" + label,
                  ref.scaled_dot_product_attention, 0)
