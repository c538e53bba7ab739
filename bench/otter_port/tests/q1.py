"""Q1: dot_product_attention and bilinear_attention (public 1, hidden: formula, bilinear, gradients)."""
import torch
from otter.test_files import test_case

import attention_reference as ref
from port_common import (F32, F64, DTYPES, Inputs, assert_dtype, close, device_agnostic, float32_of, gradcheck,
                         huge_close, module_close, pure)

OK_FORMAT = False
name = "q1"
points = None


@test_case(points=1, hidden=False)
def test_public(dot_product_attention, bilinear_attention):
    t = Inputs(101)
    h, H = t.randn(2, 5, dtype=F32), t.randn(2, 3, 5, dtype=F32)
    got = pure(dot_product_attention, h, H)
    expected = float32_of(ref.dot_product_attention(h.double(), H.double()))
    close(got[0], expected[0], "dot_product_attention context")
    close(got[1], expected[1], "dot_product_attention weights")
    h, H, W = t.randn(3, 4), t.randn(3, 6, 5), t.randn(4, 5, scale=300.0)
    got = pure(bilinear_attention, h, H, W)
    expected = ref.bilinear_attention(h, H, W)
    close(got[0], expected[0], "bilinear_attention context", F64)
    close(got[1], expected[1], "bilinear_attention weights", F64)


@test_case(points=1, hidden=True)
def test_dot_product_hidden(dot_product_attention):
    t = Inputs(102)
    for B, S, d, scale in ((3, 7, 5, 1.0), (1, 4, 6, 1.0), (2, 5, 3, 1000.0)):
        for dtype in DTYPES:
            h, H = t.randn(B, d, dtype=dtype, scale=scale), t.randn(B, S, d, dtype=dtype)
            context, weights = pure(dot_product_attention, h, H)
            assert_dtype(context, dtype, "context")
            assert_dtype(weights, dtype, "weights")
            assert context.shape == (B, d)
            w = torch.softmax(torch.einsum("bsd,bd->bs", H.double(), h.double()), -1)
            check = huge_close if scale > 1 else module_close
            check(weights, w, "weights", dtype)
            check(context, torch.einsum("bs,bsd->bd", w, H.double()), "context", dtype)
    device_agnostic(dot_product_attention, [t.randn(2, 4), t.randn(2, 5, 4)], "dot_product_attention")


@test_case(points=1, hidden=True)
def test_bilinear_hidden(bilinear_attention):
    t = Inputs(103)
    for B, S, d_dec, d_enc, scale in ((3, 5, 4, 6, 1.0), (1, 7, 5, 3, 1.0), (2, 4, 3, 5, 500.0)):
        for dtype in DTYPES:
            h, H = t.randn(B, d_dec, dtype=dtype), t.randn(B, S, d_enc, dtype=dtype)
            W = t.randn(d_dec, d_enc, dtype=dtype, scale=scale)
            context, weights = pure(bilinear_attention, h, H, W)
            assert_dtype(context, dtype, "context")
            assert context.shape == (B, d_enc) and weights.shape == (B, S)
            w = torch.softmax(torch.einsum("bi,ij,bsj->bs", h.double(), W.double(), H.double()), -1)
            check = huge_close if scale > 1 else module_close
            check(weights, w, "weights", dtype)
            check(context, torch.einsum("bs,bsd->bd", w, H.double()), "context", dtype)
    device_agnostic(bilinear_attention, [t.randn(2, 3), t.randn(2, 5, 4), t.randn(3, 4)], "bilinear_attention")


@test_case(points=1, hidden=True)
def test_gradients(dot_product_attention, bilinear_attention):
    t = Inputs(104)
    h, H, W = t.randn(2, 3), t.randn(2, 5, 3), t.randn(3, 4)
    H4 = t.randn(2, 5, 4)
    gradcheck(dot_product_attention, [h, H], [0, 1], "dot_product_attention", ref.dot_product_attention, 0)
    gradcheck(bilinear_attention, [h, H4, W], [0, 1, 2], "bilinear_attention", ref.bilinear_attention, 0)
