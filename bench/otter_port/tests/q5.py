"""Q5: GroupedQueryAttention (public 5, hidden: against SDPA with enable_gqa, options)."""
import torch
from otter.test_files import test_case

import attention_reference as ref
from port_common import (F32, F64, DTYPES, Inputs, assert_close, assert_finite, close, float32_of, module_close,
                         pure, reference_module, student_module, builtin_gqa)

OK_FORMAT = False
name = "q5"
points = None
D, G_HEADS = 12, 6


@test_case(points=1, hidden=False)
def test_public(GroupedQueryAttention):
    t = Inputs(501)
    state = t.mha_state(12, 4)
    x = t.randn(2, 3, 12, dtype=F32)
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    module = student_module(GroupedQueryAttention, (12, 6, 2), state, F32)
    expected = float32_of(reference_module(ref.GroupedQueryAttention(12, 6, 2), state, F64)(x.double(), mask))
    close(pure(module, x, mask), expected, "GroupedQueryAttention(12, 6, 2) causal")


@test_case(points=2, hidden=True)
def test_vs_builtin(GroupedQueryAttention):
    t = Inputs(502)
    T = 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    padding = torch.tensor([[True] * T, [True] * 3 + [False] * 2, [True] * T])[:, None, None, :]
    for n_kv in (2, 1, 3, 6):
        state = t.mha_state(D, n_kv * D // G_HEADS)
        for dtype in DTYPES if n_kv in (2, 1) else (F64,):
            x = t.randn(3, T, D, dtype=dtype)
            module = student_module(GroupedQueryAttention, (D, G_HEADS, n_kv), state, dtype)
            for label, mask in (("no mask", None), ("causal", causal), ("padding", padding)):
                got = pure(module, x, mask)
                assert got.dtype == dtype and got.shape == (3, T, D), label
                module_close(got, builtin_gqa(state, x, G_HEADS, n_kv, mask), f"n_kv={n_kv}, {label}", dtype)


@test_case(points=1, hidden=True)
def test_options(GroupedQueryAttention):
    t = Inputs(503)
    T = 4
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for label, state in (("bias=False", t.mha_state(D, 2 * D // G_HEADS, bias=False)),
                         ("W_q * 300", t.mha_state(D, 2 * D // G_HEADS, scale=300))):
        module = student_module(GroupedQueryAttention, (D, G_HEADS, 2, "q_proj.bias" in state), state, F64)
        x = t.randn(1, T, D)
        got = pure(module, x, mask=causal)
        assert_finite(got, label)
        assert_close(got, builtin_gqa(state, x, G_HEADS, 2, causal), label, rtol=1e-7, atol=1e-9)
