"""Q4: split_heads, merge_heads, MultiHeadAttention (public 4, hidden: split/merge, against
nn.MultiheadAttention, cross-attention, causality, gradients)."""
import torch
from otter.test_files import test_case

import attention_reference as ref
from port_common import (F32, F64, DTYPES, Inputs, assert_close, assert_finite, close, float32_of, gradcheck,
                         module_close, pure, reference_module, student_module, builtin_mha)

OK_FORMAT = False
name = "q4"
points = None
D, HEADS = 12, 3


@test_case(points=1, hidden=False)
def test_public(split_heads, MultiHeadAttention):
    t = Inputs(401)
    x = t.randn(2, 5, 6, dtype=F32)
    split = pure(split_heads, x, 3)
    assert split.shape == (2, 3, 5, 2), "split_heads(x (2, 5, 6), 3) shape"
    close(split, float32_of(ref.split_heads(x.double(), 3)), "split_heads")
    state = t.mha_state(6)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    module = student_module(MultiHeadAttention, (6, 3), state, F32)
    expected = float32_of(reference_module(ref.MultiHeadAttention(6, 3), state, F64)(x.double(), None, mask))
    close(pure(module, x, None, mask), expected, "MultiHeadAttention(6, 3) causal")
    context = t.randn(2, 4, 6, dtype=F32)
    padding = torch.tensor([[True] * 4, [True, True, False, False]])[:, None, None, :]
    expected = float32_of(reference_module(ref.MultiHeadAttention(6, 3), state, F64)(x.double(), context.double(),
                                                                                      padding))
    close(pure(module, x, context, padding), expected, "MultiHeadAttention(6, 3) cross, padding")
    state = {k: v for k, v in state.items() if not k.endswith(".bias")}
    module = student_module(MultiHeadAttention, (6, 3, False), state, F32)
    expected = float32_of(reference_module(ref.MultiHeadAttention(6, 3, False), state, F64)(x.double()))
    close(pure(module, x), expected, "MultiHeadAttention(6, 3, bias=False)")


@test_case(points=1, hidden=True)
def test_split_merge(split_heads, merge_heads):
    t = Inputs(402)
    for b, T, dtype in ((2, 5, F32), (1, 7, F64)):
        x = t.randn(b, T, D, dtype=dtype)
        got = pure(split_heads, x, HEADS)
        assert got.dtype == dtype and got.shape == (b, HEADS, T, D // HEADS), "split_heads shape/dtype"
        assert_close(got, x.view(b, T, HEADS, D // HEADS).transpose(1, 2), "split_heads")
        heads = t.randn(b, HEADS, T, D // HEADS, dtype=dtype)
        got = pure(merge_heads, heads)
        assert got.dtype == dtype and got.shape == (b, T, D), "merge_heads shape/dtype"
        assert_close(got, heads.transpose(1, 2).reshape(b, T, D), "merge_heads")


@test_case(points=2, hidden=True)
def test_vs_builtin(MultiHeadAttention):
    t = Inputs(403)
    T = 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    valid = torch.tensor([[True] * T, [True, True, True, False, False]])
    for dtype in DTYPES:
        state = t.mha_state(D)
        x = t.randn(2, T, D, dtype=dtype)
        module = student_module(MultiHeadAttention, (D, HEADS), state, dtype)
        for label, mask, builtin_masks in (("no mask", None, {}), ("causal", causal, {"attn_mask": ~causal}),
                                           ("padding", valid[:, None, None, :], {"key_padding_mask": ~valid})):
            got = pure(module, x, None, mask)
            assert got.dtype == dtype and got.shape == (2, T, D), label
            module_close(got, builtin_mha(state, x, None, **builtin_masks), label, dtype)
    for label, state in (("bias=False", t.mha_state(D, bias=False)), ("W_q * 300", t.mha_state(D, scale=300))):
        module = student_module(MultiHeadAttention, (D, HEADS, "q_proj.bias" in state), state, F64)
        x = t.randn(2, T, D)
        got = pure(module, x, None, causal)
        assert_finite(got, label)
        assert_close(got, builtin_mha(state, x, None, attn_mask=~causal), label, rtol=1e-7, atol=1e-9)


@test_case(points=1, hidden=True)
def test_cross_attention(MultiHeadAttention):
    t = Inputs(404)
    state = t.mha_state(D)
    module = student_module(MultiHeadAttention, (D, HEADS), state, F64)
    x, context = t.randn(2, 3, D), t.randn(2, 7, D)
    valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    module_close(pure(module, x, context, None), builtin_mha(state, x, context), "cross", F64)
    module_close(pure(module, x, context=context), builtin_mha(state, x, context), "cross by keyword", F64)
    module_close(pure(module, x, context, valid[:, None, None, :]),
                 builtin_mha(state, x, context, key_padding_mask=~valid), "cross, padding", F64)
    cross = torch.ones(3, 7, dtype=torch.bool).tril(4)
    module_close(pure(module, x, context, mask=cross), builtin_mha(state, x, context, attn_mask=~cross),
                 "cross, (3, 7) mask", F64)
    x1, c1 = t.randn(1, 4, D), t.randn(1, 6, D)
    module_close(pure(module, x1, c1, None), builtin_mha(state, x1, c1), "cross, batch of one", F64)


@test_case(points=1, hidden=True)
def test_causality(MultiHeadAttention):
    t = Inputs(405)
    module = student_module(MultiHeadAttention, (D, HEADS), t.mha_state(D), F64)
    T = 6
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    x = t.randn(2, T, D)
    base = module(x, None, mask).detach()
    for i in range(T - 1):
        changed = x.clone()
        changed[:, i + 1:] = t.randn(2, T - i - 1, D)
        out = module(changed, None, mask).detach()
        assert_close(out[:, : i + 1], base[:, : i + 1], f"outputs before position {i + 1} after changing later inputs")


@test_case(points=1, hidden=True)
def test_gradients(MultiHeadAttention):
    t = Inputs(406)
    state = t.mha_state(D)
    module = student_module(MultiHeadAttention, (D, HEADS), state, F64)
    x, context = t.randn(2, 3, D), t.randn(2, 4, D)
    reference = reference_module(ref.MultiHeadAttention(D, HEADS), state, F64)
    gradcheck(module, [x, context, None], [0, 1], "MultiHeadAttention cross-attention", reference)
    u = t.randn(2, 3, D)
    (module(x, context) * u).sum().backward()
    (reference(x, context) * u).sum().backward()
    theirs = dict(reference.named_parameters())
    for n, p in module.named_parameters():
        assert p.grad is not None, f"no gradient reaches {n}"
        assert_close(p.grad, theirs[n].grad, f"gradient of {n}", rtol=1e-6, atol=1e-8)
