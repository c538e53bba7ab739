"""Hidden checks for `attention`. Never shipped to students.

Expected values come from torch built-ins holding the same weights where one exists
(`F.scaled_dot_product_attention`, `nn.MultiheadAttention`, SDPA with `enable_gqa`), from the
formula where it is short, and from the reference otherwise. Student outputs in float32 are
compared with a float64 truth. Dims are always distinct (B != T != d != heads).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import check
from autograder.compare import assert_close, assert_dtype, assert_equal, assert_finite, assert_shape
from autograder.errors import CheckFailed
from autograder.torch_checks import (
    assert_causal, assert_device_agnostic, assert_module_close, assert_on_device, assert_param_grads,
    assert_permutation_equivariant, gradcheck, linear_state, output, randn, reference_module, student_module,
)

F32, F64 = torch.float32, torch.float64
DTYPES = (F32, F64)


def name_of(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def random_mask(t, *shape) -> torch.Tensor:
    """A boolean mask with at least one True per row (so no row is fully masked)."""
    mask = torch.from_numpy(t.rng.random(shape) < 0.6)
    mask[..., 0] |= ~mask.any(-1)
    return mask


def call(t, fn, *args, what: str, index=None):
    """Call the student's function, check the output's type and device, return it on the CPU."""
    value = fn(*args)
    out = output(value, index, what)
    assert_on_device(out, t.device, what)
    return value


# ---- Q1 ---------------------------------------------------------------------------------------
@check(1, 1, "dot_product_attention against the formula", uses=("dot_product_attention",))
def dot_product_hidden(t):
    for B, S, d in ((3, 7, 5), (1, 4, 6)):
        for dtype in DTYPES:
            h, H = randn(t, B, d, dtype=dtype), randn(t, B, S, d, dtype=dtype)
            what = f"dot_product_attention(h ({B}, {d}), H ({B}, {S}, {d}), {name_of(dtype)})"
            context, weights = call(t, t.student.dot_product_attention, h, H, what=what, index=0)
            w = torch.softmax(torch.einsum("bsd,bd->bs", H.double(), h.double()), -1)
            assert_module_close(weights, w, what + " weights", dtype)
            assert_module_close(context, torch.einsum("bs,bsd->bd", w, H.double()), what + " context", dtype)


@check(1, 1, "bilinear_attention with d_dec != d_enc", uses=("bilinear_attention",))
def bilinear_hidden(t):
    B, S, d_dec, d_enc = 3, 5, 4, 6
    for dtype in DTYPES:
        h, H, W = randn(t, B, d_dec, dtype=dtype), randn(t, B, S, d_enc, dtype=dtype), randn(t, d_dec, d_enc, dtype=dtype)
        what = f"bilinear_attention(h ({B}, {d_dec}), H ({B}, {S}, {d_enc}), W ({d_dec}, {d_enc}), {name_of(dtype)})"
        context, weights = call(t, t.student.bilinear_attention, h, H, W, what=what, index=0)
        scores = torch.einsum("bi,ij,bsj->bs", h.double(), W.double(), H.double())
        w = torch.softmax(scores, -1)
        assert_module_close(weights, w, what + " weights", dtype)
        assert_module_close(context, torch.einsum("bs,bsd->bd", w, H.double()), what + " context", dtype)


@check(1, 1, "gradients of both Q1 functions (gradcheck, float64)", uses=("dot_product_attention", "bilinear_attention"))
def q1_gradients(t):
    h, H, W = randn(t, 2, 3), randn(t, 2, 5, 3), randn(t, 3, 3)
    gradcheck(t.student.dot_product_attention, [h, H], [0, 1], "dot_product_attention", output_index=0)
    gradcheck(t.student.bilinear_attention, [h, H, W], [0, 1, 2], "bilinear_attention", output_index=0)


# ---- Q2 ---------------------------------------------------------------------------------------
SDPA = ("scaled_dot_product_attention",)
B, H, TQ, TK, DK, DV = 2, 3, 4, 6, 5, 7


def sdpa_inputs(t, dtype, scale: float = 1.0):
    return (randn(t, B, H, TQ, DK, dtype=dtype, scale=scale), randn(t, B, H, TK, DK, dtype=dtype),
            randn(t, B, H, TK, DV, dtype=dtype))


def true_weights(q, k, mask) -> torch.Tensor:
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return torch.softmax(scores, -1)


@check(2, 2, "scaled_dot_product_attention against F.scaled_dot_product_attention", uses=SDPA,
       hint="the 1/sqrt(d_k) scaling (d_k = q.size(-1)), the softmax dimension (over keys: dim=-1), and the "
            "mask's meaning (True = may attend), applied to the scores before the softmax.")
def sdpa_vs_builtin(t):
    masks = {"no mask": None, "a (T_q, T_k) mask": random_mask(t, TQ, TK),
             "a (B, 1, 1, T_k) mask": random_mask(t, B, 1, 1, TK), "a (B, h, T_q, T_k) mask": random_mask(t, B, H, TQ, TK)}
    for dtype in DTYPES:
        q, k, v = sdpa_inputs(t, dtype)
        for label, mask in masks.items():
            what = (f"scaled_dot_product_attention(q ({B}, {H}, {TQ}, {DK}), k ({B}, {H}, {TK}, {DK}), "
                    f"v ({B}, {H}, {TK}, {DV}), {label}, {name_of(dtype)})")
            out, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask, what=what, index=0)
            expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
            assert_module_close(out, expected, what + " output", dtype)
            assert_module_close(weights, true_weights(q, k, mask), what + " weights", dtype)


@check(2, 1, "attention weights: rows sum to 1, masked weights exactly 0", uses=SDPA)
def sdpa_weight_rows(t):
    q, k, v = sdpa_inputs(t, F32)
    mask = random_mask(t, B, 1, TQ, TK)
    _, weights = t.student.scaled_dot_product_attention(q, k, v, mask)
    weights = output(weights, None, "scaled_dot_product_attention weights")
    assert_close(weights.double().sum(-1), torch.ones(B, H, TQ, dtype=F64), "the sum of each row of the weights")
    leaked = weights.masked_select(~mask.expand(B, H, TQ, TK))
    if leaked.numel() and bool((leaked != 0).any()):
        raise CheckFailed(f"weights where the mask is False should be exactly 0, found {float(leaked.abs().max()):.3g}: "
                          "apply the mask to the scores before the softmax (and True means 'may attend').")


@check(2, 1, "a fully masked row gives zero weights and a zero output (no NaN)", uses=SDPA)
def sdpa_fully_masked(t):
    q, k, v = sdpa_inputs(t, F64)
    mask = random_mask(t, TQ, TK)
    mask[1] = False  # query 1 may attend to nothing
    out, weights = t.student.scaled_dot_product_attention(q, k, v, mask)
    out, weights = output(out, None, "output"), output(weights, None, "weights")
    assert_finite(out, "scaled_dot_product_attention output with query 1 fully masked")
    assert_finite(weights, "scaled_dot_product_attention weights with query 1 fully masked")
    assert_close(weights[:, :, 1], torch.zeros(B, H, TK, dtype=F64), "weights of the fully masked query 1")
    assert_close(out[:, :, 1], torch.zeros(B, H, DV, dtype=F64), "output of the fully masked query 1")
    rest = [0, 2, 3]
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_close(out[:, :, rest], expected[:, :, rest], "outputs of the other queries")


@check(2, 1, "no NaN or inf when the scores are 1000 times larger", uses=SDPA)
def sdpa_stability(t):
    q, k, v = sdpa_inputs(t, F64, scale=1000.0)
    for label, mask in (("no mask", None), ("a mask", random_mask(t, TQ, TK))):
        what = f"scaled_dot_product_attention(1000 * q, k, v, {label})"
        out, weights = t.student.scaled_dot_product_attention(q, k, v, mask)
        assert_finite(output(out, None, what), what + " output")
        assert_finite(output(weights, None, what), what + " weights")
        assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), what + " output")


@check(2, 2, "gradients w.r.t. q, k and v (gradcheck, float64)", uses=SDPA)
def sdpa_gradients(t):
    q, k, v = randn(t, 2, 3, 4), randn(t, 2, 5, 4), randn(t, 2, 5, 6)
    for mask in (None, random_mask(t, 3, 5)):
        gradcheck(t.student.scaled_dot_product_attention, [q, k, v, mask], [0, 1, 2],
                  "scaled_dot_product_attention" + (" with a mask" if mask is not None else ""), output_index=0)


# ---- Q3 ---------------------------------------------------------------------------------------
@check(3, 1.5, "causal_mask, square and with fewer queries than keys (lower-right)", uses=("causal_mask",))
def causal_mask_hidden(t):
    for shape in ((1, 1), (7, 7), (3, 8), (1, 9), (5, 6)):
        got = t.student.causal_mask(*shape)
        assert_dtype(got, "bool", f"causal_mask{shape}")
        T_q, T_k = shape
        expected = [[j <= i + T_k - T_q for j in range(T_k)] for i in range(T_q)]
        assert_equal(got.tolist(), expected, f"causal_mask{shape}")
    assert_equal(t.student.causal_mask(4).tolist(), torch.ones(4, 4, dtype=torch.bool).tril().tolist(), "causal_mask(4)")


@check(3, 1.5, "padding_mask with empty and full sequences", uses=("padding_mask",))
def padding_mask_hidden(t):
    for lengths, T in (([0, 6, 2, 5], 6), ([1], 3), ([3, 3], 7)):
        got = t.student.padding_mask(torch.tensor(lengths), T)
        assert_dtype(got, "bool", f"padding_mask(tensor({lengths}), {T})")
        assert_equal(got.tolist(), [[p < n for p in range(T)] for n in lengths], f"padding_mask(tensor({lengths}), {T})")


# ---- Q4 ---------------------------------------------------------------------------------------
MHA = ("MultiHeadAttention", "split_heads", "merge_heads", "scaled_dot_product_attention")
D, HEADS = 12, 3  # d_head = 4, and B = 2, T = 5 below: all distinct


def mha_state(t, d: int = D, kv: int | None = None) -> dict:
    kv = d if kv is None else kv
    return (linear_state(t, "q_proj", d, d) | linear_state(t, "k_proj", d, kv) | linear_state(t, "v_proj", d, kv)
            | linear_state(t, "out_proj", d, d))


def builtin_mha(state: dict, x, context, attn_mask=None, key_padding_mask=None) -> torch.Tensor:
    """nn.MultiheadAttention (float64) holding the same weights; its masks mean True = may NOT attend."""
    module = nn.MultiheadAttention(D, HEADS, batch_first=True, dtype=F64)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([state[f"{n}.weight"] for n in ("q_proj", "k_proj", "v_proj")]))
        module.in_proj_bias.copy_(torch.cat([state[f"{n}.bias"] for n in ("q_proj", "k_proj", "v_proj")]))
        module.out_proj.weight.copy_(state["out_proj.weight"])
        module.out_proj.bias.copy_(state["out_proj.bias"])
    context = x if context is None else context
    out, _ = module(x.double(), context.double(), context.double(), attn_mask=attn_mask,
                    key_padding_mask=key_padding_mask, need_weights=False)
    return out.detach()


@check(4, 1, "split_heads and merge_heads", uses=("split_heads", "merge_heads"))
def split_merge_heads(t):
    x = randn(t, 2, 5, D, dtype=F32)
    got = call(t, t.student.split_heads, x, HEADS, what=f"split_heads(x (2, 5, {D}), {HEADS})")
    expected = x.view(2, 5, HEADS, D // HEADS).transpose(1, 2)
    assert_shape(got, (2, HEADS, 5, D // HEADS), f"split_heads(x (2, 5, {D}), {HEADS})")
    assert_close(got, expected, f"split_heads(x (2, 5, {D}), {HEADS}): head i holds features i*d_head..(i+1)*d_head-1")
    heads = randn(t, 2, HEADS, 5, D // HEADS, dtype=F32)
    assert_close(t.student.merge_heads(heads), heads.transpose(1, 2).reshape(2, 5, D),
                 f"merge_heads(x (2, {HEADS}, 5, {D // HEADS}))")


@check(4, 2, "MultiHeadAttention against nn.MultiheadAttention (self-attention, masks)", uses=MHA,
       hint="split_heads (view as (B, T, h, d_head), then transpose), the output projection, and passing the "
            "mask on to scaled_dot_product_attention.")
def mha_vs_builtin(t):
    state, T = mha_state(t), 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    valid = torch.tensor([[True] * T, [True, True, True, False, False]])
    for dtype in DTYPES:
        x = randn(t, 2, T, D, dtype=dtype)
        module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, dtype)
        cases = (("no mask", None, {}), ("a causal (T, T) mask", causal, {"attn_mask": ~causal}),
                 ("a padding (B, 1, 1, T) mask", valid[:, None, None, :], {"key_padding_mask": ~valid}))
        for label, mask, builtin_masks in cases:
            what = f"MultiHeadAttention({D}, {HEADS})(x (2, {T}, {D}), {label}, {name_of(dtype)})"
            got = call(t, module, x, None, mask, what=what)
            assert_module_close(got, builtin_mha(state, x, None, **builtin_masks), what, dtype)


@check(4, 1, "cross-attention: queries from x, keys and values from context", uses=MHA)
def cross_attention(t):
    state = mha_state(t)
    x, context = randn(t, 2, 3, D, dtype=F64), randn(t, 2, 7, D, dtype=F64)
    valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, F64)
    what = f"MultiHeadAttention({D}, {HEADS})(x (2, 3, {D}), context (2, 7, {D}))"
    assert_module_close(call(t, module, x, context, None, what=what), builtin_mha(state, x, context), what, F64)
    what += " with a padding mask on the context"
    assert_module_close(call(t, module, x, context, valid[:, None, None, :], what=what),
                        builtin_mha(state, x, context, key_padding_mask=~valid), what, F64)


@check(4, 1, "causality: later inputs never change earlier outputs", uses=MHA)
def mha_causal(t):
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), mha_state(t), F64)
    T = 6
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    assert_causal(lambda x: output(module(x, None, mask), None, "MultiHeadAttention"), randn(t, 2, T, D),
                  f"MultiHeadAttention with a causal mask on x (2, {T}, {D})", rng=t.rng)


@check(4, 1, "self-attention without positions is permutation-equivariant", uses=MHA)
def mha_permutation(t):
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), mha_state(t), F64)
    assert_permutation_equivariant(lambda x: output(module(x), None, "MultiHeadAttention"), randn(t, 2, 7, D),
                                   f"MultiHeadAttention({D}, {HEADS}) on x (2, 7, {D})", rng=t.rng)


@check(4, 1, "gradients w.r.t. inputs (gradcheck) and every parameter (float64)", uses=MHA)
def mha_gradients(t):
    state = mha_state(t)
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, F64)
    x, context = randn(t, 2, 3, D), randn(t, 2, 4, D)
    gradcheck(module, [x, context, None], [0, 1], f"MultiHeadAttention({D}, {HEADS}) cross-attention")
    ref = reference_module(t.ref.MultiHeadAttention(D, HEADS), state, F64)
    assert_param_grads(module, ref, [x, context, None], f"MultiHeadAttention({D}, {HEADS})", rng=t.rng)


# ---- Q5 ---------------------------------------------------------------------------------------
GQA = ("GroupedQueryAttention", "split_heads", "merge_heads", "scaled_dot_product_attention")
G_HEADS = 6  # with d = 12: d_head = 2


def builtin_gqa(state: dict, x, n_heads: int, n_kv: int, mask) -> torch.Tensor:
    """The same projections done here, attention by F.scaled_dot_product_attention(enable_gqa=True)."""
    x = x.double()
    B, T, d = x.shape
    d_head = d // n_heads

    def project(name, heads):
        y = F.linear(x, state[f"{name}.weight"].double(), state[f"{name}.bias"].double())
        return y.view(B, T, heads, d_head).transpose(1, 2)

    out = F.scaled_dot_product_attention(project("q_proj", n_heads), project("k_proj", n_kv), project("v_proj", n_kv),
                                         attn_mask=mask, enable_gqa=True)
    out = out.transpose(1, 2).reshape(B, T, d)
    return F.linear(out, state["out_proj.weight"].double(), state["out_proj.bias"].double())


@check(5, 2, "GroupedQueryAttention against SDPA with enable_gqa (GQA and MQA)", uses=GQA,
       hint="query head i uses key/value head i // (n_heads // n_kv_heads): repeat_interleave, not repeat.")
def gqa_vs_builtin(t):
    T = 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for n_kv in (2, 1):
        state = mha_state(t, D, n_kv * D // G_HEADS)
        for dtype in DTYPES:
            x = randn(t, 3, T, D, dtype=dtype)
            module = student_module(t, t.student.GroupedQueryAttention, (D, G_HEADS, n_kv), state, dtype)
            for label, mask in (("no mask", None), ("a causal mask", causal)):
                what = f"GroupedQueryAttention({D}, {G_HEADS}, {n_kv})(x (3, {T}, {D}), {label}, {name_of(dtype)})"
                assert_module_close(call(t, module, x, mask, what=what), builtin_gqa(state, x, G_HEADS, n_kv, mask),
                                    what, dtype)


@check(5, 1, "GroupedQueryAttention with n_kv_heads = n_heads equals MultiHeadAttention", uses=GQA + MHA)
def gqa_equals_mha(t):
    state, x = mha_state(t), randn(t, 2, 5, D)
    gqa = student_module(t, t.student.GroupedQueryAttention, (D, HEADS, HEADS), state, F64)
    mha = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, F64)
    assert_close(gqa(x), mha(x), f"GroupedQueryAttention({D}, {HEADS}, {HEADS}) vs your MultiHeadAttention({D}, {HEADS})")


@check(5, 1, "GroupedQueryAttention gradients (gradcheck and parameters, float64)", uses=GQA)
def gqa_gradients(t):
    state = mha_state(t, D, 2 * D // G_HEADS)
    module = student_module(t, t.student.GroupedQueryAttention, (D, G_HEADS, 2), state, F64)
    x = randn(t, 2, 4, D)
    gradcheck(module, [x, None], [0], f"GroupedQueryAttention({D}, {G_HEADS}, 2)")
    ref = reference_module(t.ref.GroupedQueryAttention(D, G_HEADS, 2), state, F64)
    assert_param_grads(module, ref, [x, None], f"GroupedQueryAttention({D}, {G_HEADS}, 2)", rng=t.rng)


# ---- Q6 ---------------------------------------------------------------------------------------
@check(6, 1.5, "sinusoidal_positions against the formula", uses=("sinusoidal_positions",))
def sinusoidal_hidden(t):
    for T, d in ((11, 8), (1, 6), (50, 16)):
        pos = torch.arange(T, dtype=F64)[:, None]
        omega = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=F64) / d)
        expected = torch.zeros(T, d, dtype=F64)
        expected[:, 0::2], expected[:, 1::2] = torch.sin(pos * omega), torch.cos(pos * omega)
        got = t.student.sinusoidal_positions(T, d)
        assert_close(got, expected, f"sinusoidal_positions({T}, {d}) (sin in even columns, cos in odd)",
                     rtol=1e-5, atol=1e-5)


@check(6, 1, "LearnedPositions adds the vectors of positions 0..T-1, and learns them", uses=("LearnedPositions",))
def learned_positions(t):
    max_len, d = 9, 4
    state = {"table.weight": randn(t, max_len, d, dtype=F32)}
    module = student_module(t, t.student.LearnedPositions, (max_len, d), state, F64)
    x = randn(t, 2, 6, d)
    what = f"LearnedPositions({max_len}, {d})(x (2, 6, {d}))"
    assert_close(call(t, module, x, what=what), x + state["table.weight"].double()[:6], what)
    ref = reference_module(t.ref.LearnedPositions(max_len, d), state, F64)
    assert_param_grads(module, ref, [x], what, rng=t.rng)
    gradcheck(module, [x], [0], what)


@check(6, 1.5, "apply_rope rotates pairs (2k, 2k+1) by position * base^(-2k/d)", uses=("apply_rope",))
def rope_hidden(t):
    x = randn(t, 2, 3, 5, 8)
    assert_close(t.student.apply_rope(x), t.ref.apply_rope(x), "apply_rope(x (2, 3, 5, 8))")
    positions = torch.tensor([7, 0, 3, 12, 4])
    assert_close(t.student.apply_rope(x, positions), t.ref.apply_rope(x, positions),
                 "apply_rope(x (2, 3, 5, 8), positions=tensor([7, 0, 3, 12, 4]))")
    assert_close(t.student.apply_rope(x, None, 500.0), t.ref.apply_rope(x, None, 500.0), "apply_rope(x, base=500.0)")
    gradcheck(t.student.apply_rope, [x[0], positions], [0], "apply_rope(x, positions)")


@check(6, 1, "RoPE keeps norms, and q.k depends only on the position offset", uses=("apply_rope",))
def rope_properties(t):
    x = randn(t, 3, 6, 10)
    rotated = t.student.apply_rope(x)
    assert_close(rotated.norm(dim=-1), x.norm(dim=-1), "the norm of each rotated vector (rotations keep norms)")
    q, k = randn(t, 1, 10), randn(t, 1, 10)
    scores = []
    for m, n in ((5, 2), (9, 6), (40, 37)):
        rq = t.student.apply_rope(q, torch.tensor([m]))
        rk = t.student.apply_rope(k, torch.tensor([n]))
        scores.append(float((rq * rk).sum()))
    assert_close(scores[1:], [scores[0]] * 2, "q.k of RoPE(q, m) and RoPE(k, n) for (m, n) = (9, 6) and (40, 37) "
                 "compared with (5, 2): it must depend only on m - n")


@check(6, 1, "alibi_slopes: the geometric sequence, and the rule for other head counts", uses=("alibi_slopes",))
def alibi_slopes_hidden(t):
    for n in (8, 16, 2):
        expected = [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
        assert_close(t.student.alibi_slopes(n), torch.tensor(expected, dtype=F64), f"alibi_slopes({n})", rtol=1e-6)
    for n in (6, 12):
        assert_close(t.student.alibi_slopes(n), t.ref.alibi_slopes(n), f"alibi_slopes({n})", rtol=1e-6)


@check(6, 1, "alibi_bias: slope * (j - i), aligned lower-right", uses=("alibi_bias", "alibi_slopes"))
def alibi_bias_hidden(t):
    for h, T_q, T_k in ((4, 3, 6), (8, 5, 5)):
        slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], dtype=F64)
        offsets = torch.arange(T_k)[None, :] - (torch.arange(T_q)[:, None] + T_k - T_q)
        assert_close(t.student.alibi_bias(h, T_q, T_k), slopes[:, None, None] * offsets,
                     f"alibi_bias({h}, {T_q}, {T_k})", rtol=1e-6)


# ---- Q7 ---------------------------------------------------------------------------------------
@check(7, 1.5, "modules create no tensor on a fixed device or dtype (meta device, float32 and float64)",
       uses=("MultiHeadAttention", "GroupedQueryAttention", "LearnedPositions"))
def device_agnostic_modules(t):
    x, context = randn(t, 2, 5, D, dtype=F32), randn(t, 2, 7, D, dtype=F32)
    cases = [
        (t.student.MultiHeadAttention(D, HEADS), [x], f"MultiHeadAttention({D}, {HEADS})(x)"),
        (t.student.MultiHeadAttention(D, HEADS), [x, context, torch.ones(5, 7, dtype=torch.bool).tril()],
         f"MultiHeadAttention({D}, {HEADS})(x, context, mask)"),
        (t.student.GroupedQueryAttention(D, G_HEADS, 2), [x], f"GroupedQueryAttention({D}, {G_HEADS}, 2)(x)"),
        (t.student.LearnedPositions(9, D), [x], f"LearnedPositions(9, {D})(x)"),
    ]
    for module, args, what in cases:
        note = assert_device_agnostic(module, args, what)
        if note:
            t.note(note)


@check(7, 1.5, "functions follow their inputs' device and dtype, or the device they are given",
       uses=("scaled_dot_product_attention", "apply_rope", "causal_mask", "sinusoidal_positions", "alibi_bias",
             "padding_mask"))
def device_agnostic_functions(t):
    q, k, v = randn(t, 2, 3, 4, dtype=F32), randn(t, 2, 5, 4, dtype=F32), randn(t, 2, 5, 6, dtype=F32)
    cases = [
        (t.student.scaled_dot_product_attention, [q, k, v, torch.ones(3, 5, dtype=torch.bool).tril(2)], None,
         "scaled_dot_product_attention(q, k, v, mask)"),
        (t.student.apply_rope, [k], None, "apply_rope(x)"),
        (t.student.padding_mask, [torch.tensor([2, 5]), 6], None, "padding_mask(lengths, 6)"),
        (t.student.causal_mask, [3, 5], "device", "causal_mask(3, 5, device=...)"),
        (t.student.alibi_bias, [4, 3, 5], "device", "alibi_bias(4, 3, 5, device=...)"),
        (t.student.sinusoidal_positions, [5, 6], "device", "sinusoidal_positions(5, 6, device=...)"),
    ]
    for fn, args, device_arg, what in cases:
        note = assert_device_agnostic(fn, args, what, device_arg=device_arg, follows_dtype=device_arg is None)
        if note:
            t.note(note)
