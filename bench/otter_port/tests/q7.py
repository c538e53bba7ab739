"""Q7: float64 in, float64 out, no tensor on a fixed device (public 7, hidden: modules in float64)."""
import torch
from otter.test_files import test_case

import attention_reference as ref
from port_common import (F64, Inputs, assert_close, builtin_gqa, builtin_mha, close, device_agnostic, pure,
                         reference_module, student_module)

OK_FORMAT = False
name = "q7"
points = None
D, HEADS, G_HEADS = 12, 3, 6


@test_case(points=1, hidden=False)
def test_public(MultiHeadAttention, sinusoidal_positions, LearnedPositions, causal_mask):
    t = Inputs(701)
    state = t.mha_state(6)
    x = t.randn(2, 5, 6)
    module = student_module(MultiHeadAttention, (6, 3), state, F64)
    close(pure(module, x), reference_module(ref.MultiHeadAttention(6, 3), state, F64)(x), "MHA float64", F64)
    close(sinusoidal_positions(300, 6, dtype=F64), ref.sinusoidal_positions(300, 6, dtype=F64),
          "sinusoidal_positions(300, 6, dtype=float64)", F64)
    x32, mask = x.float(), torch.ones(5, 5, dtype=torch.bool).tril()
    device_agnostic(MultiHeadAttention(6, 3), [x32], "MultiHeadAttention(6, 3)(x)")
    device_agnostic(MultiHeadAttention(6, 3), [x32, None, mask], "MultiHeadAttention(6, 3)(x, None, mask)")
    device_agnostic(LearnedPositions(7, 6), [x32], "LearnedPositions(7, 6)(x)")
    out = causal_mask(3, 5, device="meta")
    assert out.device.type == "meta", "causal_mask(3, 5, device='meta') ignores device="


@test_case(points=1.5, hidden=True)
def test_modules_float64(MultiHeadAttention, GroupedQueryAttention, LearnedPositions):
    t = Inputs(702)
    T = 5
    x, context = t.randn(2, T, D), t.randn(2, 7, D)
    cross = torch.ones(T, 7, dtype=torch.bool).tril(2)
    state, gstate = t.mha_state(D), t.mha_state(D, 2 * D // G_HEADS)
    table = {"table.weight": t.randn(9, D)}
    mha = student_module(MultiHeadAttention, (D, HEADS), state, F64)
    gqa = student_module(GroupedQueryAttention, (D, G_HEADS, 2), gstate, F64)
    learned = student_module(LearnedPositions, (9, D), table, F64)
    for module, args, expected, what in (
            (mha, [x], builtin_mha(state, x, None), "MHA(x)"),
            (mha, [x, context, cross], builtin_mha(state, x, context, attn_mask=~cross), "MHA(x, context, mask)"),
            (gqa, [x], builtin_gqa(gstate, x, G_HEADS, 2, None), "GQA(x)"),
            (learned, [x], x + table["table.weight"].double()[:T], "LearnedPositions(x)")):
        got = pure(module, *args)
        assert got.dtype == F64, what
        assert_close(got, expected, what, rtol=1e-10, atol=1e-12)
    for module, args, what in ((MultiHeadAttention(D, HEADS), [x.float()], "MHA(x)"),
                               (MultiHeadAttention(D, HEADS), [x.float(), context.float(), cross], "MHA(x, ctx, mask)"),
                               (GroupedQueryAttention(D, G_HEADS, 2), [x.float()], "GQA(x)"),
                               (LearnedPositions(9, D), [x.float()], "LearnedPositions(x)")):
        device_agnostic(module, args, what)
