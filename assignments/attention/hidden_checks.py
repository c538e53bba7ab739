"""Hidden checks for `attention`. Never shipped to students.

Expected values come from torch built-ins holding the same weights where one exists
(`F.scaled_dot_product_attention`, `nn.MultiheadAttention`, SDPA with `enable_gqa`), from the
formula where it is short, and from the reference otherwise; every one is computed here, in
float64. Dims are always distinct (B != T != d != heads) and T_q != T_k wherever a mask applies.

Every call into the student's code goes through `call`: its tensor arguments are stored in the
student's process first and read back afterwards, so a function that changes its inputs
(`mask.unsqueeze_`, `x += pos`, `q /= ...`) fails the check of that function. Points for running
in float64 and on other devices (Q7) rest on float64 numerics verified here; the device probes (the
property matrix's `device`, on a simulated non-CPU device) can only fail a check. Every graded function
declares torch's global `generator` left alone, and every device probe, in the check that grades it
(docs/assignments/attention.md has the table). Later questions declare the earlier functions they rely on (`needs`) so a
failure caused by `scaled_dot_product_attention` says so.
"""
import math
import types

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checking import properties
from autograder.checking.checks import check
from autograder.checking.compare import assert_close, assert_dtype, assert_equal, assert_finite, assert_shape, masked_rows_cause
from autograder.checking.purity import call_pure, call_twice
from autograder.errors import CheckFailed
from autograder.checking.torch_checks import (
    assert_causal, assert_on_device, assert_param_grads, assert_permutation_equivariant,
    gradcheck, linear_state, name_of, output, randn, reference_module, student_module,
)
from autograder.checking.torch_checks import assert_module_close as _module_close

F32, F64 = torch.float32, torch.float64
DTYPES = (F32, F64)


def assert_module_close(got, expected: torch.Tensor, what: str, dtype) -> None:
    """A `dtype` run against the float64 truth, at the module tolerance of that dtype.

    The truth is rounded to `dtype` first so a float32 run is judged as float32 (rounding the truth
    costs 6e-8 relative, far inside the 1e-5 tolerance), not suspected of lost float64 precision.
    """
    _module_close(got, expected.to(dtype), what, dtype)


def assert_huge_close(got, expected: torch.Tensor, what: str, dtype) -> None:
    """Scores x1000 in float32: each score carries a rounding error near 1e-4, which moves the weights
    by as much; any correct order of operations lands within 1e-2, overflow and NaN do not."""
    if dtype == F32:
        assert_close(got, expected.to(dtype), what, rtol=1e-2, atol=1e-2)
    else:
        assert_module_close(got, expected, what, dtype)


def random_mask(t, *shape) -> torch.Tensor:
    """A boolean mask with at least one True per row (so no row is fully masked)."""
    mask = torch.from_numpy(t.rng.random(shape) < 0.6)
    mask[..., 0] |= ~mask.any(-1)
    return mask


def call(t, fn, *args, what: str, index=None, want=None, shape=None, **kwargs):
    """Call the student's function on inputs held in its process; fail if it changed them.

    Checks the returned tensor (item `index` of a tuple): a tensor, on the inputs' device as far as
    the student's process says, of dtype `want` and `shape` where the docstring fixes them. Other
    keyword arguments go to the student's function.
    """
    value = call_pure(fn, *args, what=what, **kwargs)
    out = output(value, index, what)
    if any(isinstance(a, torch.Tensor) for a in (*args, *kwargs.values())):  # made from nothing: the CPU is right
        assert_on_device(out, t.device, what)
    if want is not None:
        assert_dtype(out, name_of(want), what + (f" output {index}" if index is not None else ""))
    if shape is not None:
        assert_shape(out, shape, what)
    return value


def worker_dtype(t, dtype):
    """A torch dtype object in the student's process, to pass as `dtype=` (dtypes are not wire data)."""
    return t.student.put(torch.zeros(1, dtype=dtype), "a tensor").dtype.get()


def unnoted(t):
    """`t` for the property matrix's `device` declarations, without the note a pass leaves: a device probe runs in
    the student's process and can only fail a check, so a correct submission's results read "Passed." alone."""
    return types.SimpleNamespace(student=t.student, note=lambda text: None)


# ---- Q1 ---------------------------------------------------------------------------------------
Q1_CASES = ((3, 7, 5, 1.0), (1, 4, 6, 1.0), (2, 5, 3, 1000.0))  # (B, S, d, scale): batch of one, huge scores


@check(1, 1, "dot_product_attention against the formula (float32, float64, batch of one, huge scores)",
       uses=("dot_product_attention",))
def dot_product_hidden(t):
    for B, S, d, scale in Q1_CASES:
        for dtype in DTYPES:
            h, H = randn(t, B, d, dtype=dtype, scale=scale), randn(t, B, S, d, dtype=dtype)
            what = f"dot_product_attention(h ({B}, {d}){' * 1000' if scale > 1 else ''}, H ({B}, {S}, {d}), {name_of(dtype)})"
            context, weights = call(t, t.student.dot_product_attention, h, H, what=what, index=0, want=dtype,
                                    shape=(B, d))
            assert_dtype(weights, name_of(dtype), what + " weights")
            w = torch.softmax(torch.einsum("bsd,bd->bs", H.double(), h.double()), -1)
            close = assert_huge_close if scale > 1 else assert_module_close
            close(weights, w, what + " weights", dtype)
            close(context, torch.einsum("bs,bsd->bd", w, H.double()), what + " context", dtype)
    properties.run_device(unnoted(t), "dot_product_attention", t.student.dot_product_attention, "h (2, 4), H (2, 5, 4)",
                          (randn(t, 2, 4), randn(t, 2, 5, 4)))


@check(1, 1, "bilinear_attention with d_dec != d_enc (float32, float64, huge scores)", uses=("bilinear_attention",))
def bilinear_hidden(t):
    for B, S, d_dec, d_enc, scale in ((3, 5, 4, 6, 1.0), (1, 7, 5, 3, 1.0), (2, 4, 3, 5, 500.0)):
        for dtype in DTYPES:
            h, H = randn(t, B, d_dec, dtype=dtype), randn(t, B, S, d_enc, dtype=dtype)
            W = randn(t, d_dec, d_enc, dtype=dtype, scale=scale)
            what = (f"bilinear_attention(h ({B}, {d_dec}), H ({B}, {S}, {d_enc}), W ({d_dec}, {d_enc})"
                    f"{' * 500' if scale > 1 else ''}, {name_of(dtype)})")
            context, weights = call(t, t.student.bilinear_attention, h, H, W, what=what, index=0, want=dtype,
                                    shape=(B, d_enc))
            assert_shape(weights, (B, S), what + " weights")
            w = torch.softmax(torch.einsum("bi,ij,bsj->bs", h.double(), W.double(), H.double()), -1)
            close = assert_huge_close if scale > 1 else assert_module_close
            close(weights, w, what + " weights", dtype)
            close(context, torch.einsum("bs,bsd->bd", w, H.double()), what + " context", dtype)
    properties.run_device(unnoted(t), "bilinear_attention", t.student.bilinear_attention,
                          "h (2, 3), H (2, 5, 4), W (3, 4)", (randn(t, 2, 3), randn(t, 2, 5, 4), randn(t, 3, 4)))


@check(1, 1, "gradients of both Q1 functions (gradcheck, float64)", uses=("dot_product_attention", "bilinear_attention"))
def q1_gradients(t):
    h, H, W = randn(t, 2, 3), randn(t, 2, 5, 3), randn(t, 3, 4)
    H4 = randn(t, 2, 5, 4)
    for graded in q1_matrix(t):
        properties.run(t, graded)
    gradcheck(t.student.dot_product_attention, [h, H], [0, 1], "dot_product_attention", output_index=0,
              reference=t.ref.dot_product_attention)
    gradcheck(t.student.bilinear_attention, [h, H4, W], [0, 1, 2], "bilinear_attention", output_index=0,
              reference=t.ref.bilinear_attention)


def q1_matrix(t) -> list:
    """Both Q1 functions in the property matrix: an ordinary call (inputs unchanged, torch's global generator
    untouched) and scores of about 1000 in float64, forward and gradients of the context and the weights
    against the reference's (a softmax by exp by hand is NaN there, forward or backward)."""
    S, graded = properties.Sample, []
    for name, args, huge in (("dot_product_attention", (randn(t, 2, 3), randn(t, 2, 5, 3)), "h * 1000"),
                             ("bilinear_attention", (randn(t, 2, 3), randn(t, 2, 5, 4), randn(t, 3, 4)), "W * 1000")):
        loud = (args[0] * 1000, *args[1:]) if name == "dot_product_attention" else (*args[:2], args[2] * 1000)
        shapes = ", ".join(str(tuple(a.shape)) for a in args)
        extremes = [S(f"{shapes} with {huge} (scores of about 1000), float64, {part}", loud,
                      wrt=tuple(range(len(args))), output_index=index) for index, part in ((0, "context"), (1, "weights"))]
        graded.append(properties.Graded(name, getattr(t.student, name), getattr(t.ref, name),
                                        {"inputs": [S(f"{shapes}, float64", args)], "extremes": extremes}))
    return graded


# ---- Q2 ---------------------------------------------------------------------------------------
SDPA = ("scaled_dot_product_attention",)
B, H, TQ, TK, DK, DV = 2, 3, 4, 6, 5, 7


def sdpa_inputs(t, dtype, scale: float = 1.0, lead=(B, H)):
    return (randn(t, *lead, TQ, DK, dtype=dtype, scale=scale), randn(t, *lead, TK, DK, dtype=dtype),
            randn(t, *lead, TK, DV, dtype=dtype))


def true_attention(q, k, v, mask):
    """float64 weights and output; a fully masked row gives zeros."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.nan_to_num(torch.softmax(scores, -1), nan=0.0)
    return weights @ v.double(), weights


def sdpa_what(q, k, v, label, dtype) -> str:
    return (f"scaled_dot_product_attention(q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, {label}, "
            f"{name_of(dtype)})")


@check(2, 2, "scaled_dot_product_attention against F.scaled_dot_product_attention (4-D and 3-D, every mask shape)",
       uses=SDPA, hint="the 1/sqrt(d_k) scaling (d_k = q.size(-1)), the softmax dimension (over keys: dim=-1), and the "
                       "mask's meaning (True = may attend), applied to the scores before the softmax.")
def sdpa_vs_builtin(t):
    masks = {"no mask": None, "a (T_q, T_k) mask": random_mask(t, TQ, TK),
             "a (B, 1, 1, T_k) mask": random_mask(t, B, 1, 1, TK), "a (B, h, T_q, T_k) mask": random_mask(t, B, H, TQ, TK)}
    q, k, v = sdpa_inputs(t, F64)
    call_twice(t.student.scaled_dot_product_attention, q, k, v, what=sdpa_what(q, k, v, "no mask", F64))
    for dtype in DTYPES:
        q, k, v = sdpa_inputs(t, dtype)
        for label, mask in masks.items():
            what = sdpa_what(q, k, v, label, dtype)
            out, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask, what=what, index=0,
                                want=dtype, shape=(B, H, TQ, DV))
            assert_shape(weights, (B, H, TQ, TK), what + " weights")
            expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
            assert_module_close(out, expected, what + " output", dtype)
            assert_module_close(weights, true_attention(q, k, v, mask)[1], what + " weights", dtype)
    q, k, v = sdpa_inputs(t, F64, lead=(1,))  # 3-D inputs, batch of one, mask given by keyword
    mask = random_mask(t, TQ, TK)
    what = sdpa_what(q, k, v, "mask=(T_q, T_k)", F64)
    out, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask=mask, what=what, index=0, want=F64)
    assert_close(out, true_attention(q, k, v, mask)[0], what + " output")
    assert_close(weights, true_attention(q, k, v, mask)[1], what + " weights")
    q, k, v = sdpa_inputs(t, F64, lead=(B,))  # 3-D inputs with 3-D masks: one per example, and padded keys
    for label, mask in (("a (B, T_q, T_k) mask", random_mask(t, B, TQ, TK)),
                        ("a (B, 1, T_k) padding mask", torch.tensor([[True] * TK, [True] * 2 + [False] * (TK - 2)])[:, None])):
        what = sdpa_what(q, k, v, label, F64)
        out, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask, what=what, index=0, want=F64,
                            shape=(B, TQ, DV))
        assert_shape(weights, (B, TQ, TK), what + " weights")
        expected_out, expected_weights = true_attention(q, k, v, mask)
        assert_close(out, expected_out, what + " output (a 3-D mask lines up with 3-D scores as it is: no extra "
                     "head dimension)")
        assert_close(weights, expected_weights, what + " weights")


@check(2, 1, "attention weights: rows sum to 1, masked weights exactly 0, even beside very negative scores", uses=SDPA)
def sdpa_weight_rows(t):
    q, k, v = sdpa_inputs(t, F32)
    mask = random_mask(t, B, 1, TQ, TK)
    what = sdpa_what(q, k, v, "a (B, 1, T_q, T_k) mask", F32)
    _, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask, what=what, index=1)
    assert_close(weights.double().sum(-1), torch.ones(B, H, TQ, dtype=F64), "the sum of each row of the weights",
                 rtol=1e-5, atol=1e-5)
    leaked = weights.masked_select(~mask.expand(B, H, TQ, TK))
    if leaked.numel() and bool((leaked != 0).any()):
        raise CheckFailed(f"weights where the mask is False should be exactly 0, found {float(leaked.abs().max()):.3g}: "
                          "apply the mask to the scores before the softmax (and True means 'may attend').")
    for dtype in DTYPES:  # query 0 may attend only to key 0, whose score is -50000; keys 1.. score about 0
        q, k, v = sdpa_inputs(t, dtype, lead=(1, 1))
        k[..., 0, :] = 0.0
        k[..., 0, 0] = 1.0
        k[..., 1:, 0] = 0.0
        q[..., 0, 0] = -5e4 * math.sqrt(DK)
        mask = random_mask(t, TQ, TK)
        mask[0] = False
        mask[0, 0] = True
        what = sdpa_what(q, k, v, "query 0 may attend only to key 0, which scores -50000", dtype)
        out, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask, what=what, index=0)
        weights = output(weights, None, what)
        if not abs(float(weights[0, 0, 0, 0]) - 1.0) <= 1e-6:
            raise CheckFailed(f"{what}: the weight of key 0 for query 0 should be 1, got {float(weights[0, 0, 0, 0]):.6g}: "
                              "a masked score must end up below every possible score. Fill with -inf or "
                              "torch.finfo(scores.dtype).min, not a constant like -1e4 or -10000 (added or filled).")
        assert_module_close(out[..., 0, :], true_attention(q, k, v, mask)[0][..., 0, :], what + " output of query 0", dtype)


@check(2, 1, "a fully masked row gives zero weights and a zero output (no NaN), in float32 and float64", uses=SDPA)
def sdpa_fully_masked(t):
    for dtype in (F64, F32):
        q, k, v = sdpa_inputs(t, dtype)
        mask = random_mask(t, TQ, TK)
        mask[1] = False  # query 1 may attend to nothing
        what = sdpa_what(q, k, v, "query 1 fully masked", dtype)
        out, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask, what=what, index=0)
        weights = output(weights, None, what)
        assert_finite(out, what + " output", mask=mask)  # NaN exactly in row 1 is named as the fully masked row
        assert_finite(weights, what + " weights", mask=mask)
        cause = masked_rows_cause(weights, mask)  # uniform 1/T_k: a finite fill, not zeroed after the softmax
        if cause:
            raise CheckFailed(f"{what} weights: {cause}")
        assert_close(weights[:, :, 1], torch.zeros(B, H, TK, dtype=F64), what + " weights of query 1")
        assert_close(out[:, :, 1], torch.zeros(B, H, DV, dtype=F64), what + " output of query 1")
        rest = [0, 2, 3]
        expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
        assert_module_close(out[:, :, rest], expected[:, :, rest], what + " outputs of the other queries", dtype)
    properties.run(t, properties.Graded("scaled_dot_product_attention", t.student.scaled_dot_product_attention,
                                        true_attention, {"edges": sdpa_empty_rows(t)}), ("edges",))


def sdpa_empty_rows(t) -> list:
    """Fully masked rows in masks of rank 3 and 4, for the matrix's `edges`: the row test must reduce over the keys
    (dim=-1). `mask.any(dim=1)` or `mask.sum(dim=1) == 0` is right for a (T_q, T_k) mask only, where dim 1 is
    the keys; on a (B, T_q, T_k) mask it reduces over the queries, on a (B, h, T_q, T_k) mask over the heads, and
    the fully masked row keeps its uniform 1/T_k weights."""
    samples = []
    for dtype in (F64, F32):
        q, k, v = sdpa_inputs(t, dtype, lead=(B,))
        mask = random_mask(t, B, TQ, TK)
        mask[1, 2] = False  # example 1, query 2: nothing to attend to
        samples.append(properties.Sample(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, a (B, T_q, T_k) "
                                         f"mask with query 2 of example 1 fully masked, {name_of(dtype)}",
                                         (q, k, v, mask), hint=EMPTY_ROW_HINT))
        q, k, v = sdpa_inputs(t, dtype)
        mask = random_mask(t, B, H, TQ, TK)
        mask[1, 2, 1] = False  # example 1, head 2, query 1
        samples.append(properties.Sample(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, a (B, h, T_q, "
                                         f"T_k) mask with query 1 of head 2 of example 1 fully masked, {name_of(dtype)}",
                                         (q, k, v, mask), hint=EMPTY_ROW_HINT))
    return samples


EMPTY_ROW_HINT = (" A query whose row of the mask has no True gets zero weights and a zero output, whatever the mask's "
                  "rank: find such rows along the key dimension (mask.any(dim=-1, keepdim=True)), not a fixed dim=1.")


@check(2, 1, "no NaN or inf when the scores are 1000 times larger (float32 and float64)", uses=SDPA)
def sdpa_stability(t):
    properties.run(t, sdpa_matrix(t))


def sdpa_matrix(t) -> properties.Graded:
    """scaled_dot_product_attention's extreme samples for the property matrix: q times 1000 (scores of thousands),
    with and without a mask (no row fully masked, so NaN is overflow), float64 and float32; forward against the
    float64 formula (float32 at 1e-2: each score carries a rounding error near 1e-4), and gradients w.r.t. q, k
    and v (a NaN where the formula's is finite fails; float64 equal to it)."""
    samples = []
    for dtype in (F64, F32):
        q, k, v = sdpa_inputs(t, dtype, scale=1000.0)
        for label, mask in (("no mask", None), ("a mask", random_mask(t, TQ, TK))):
            samples.append(properties.Sample(
                f"q {tuple(q.shape)} times 1000, k {tuple(k.shape)}, v {tuple(v.shape)}, {label}, {name_of(dtype)}",
                (q, k, v, mask), wrt=(0, 1, 2), output_index=0, tol=(1e-2, 1e-2) if dtype == F32 else None))
    return properties.Graded("scaled_dot_product_attention", t.student.scaled_dot_product_attention, true_attention,
                             {"extremes": samples})


@check(2, 2, "gradients w.r.t. q, k and v (gradcheck, float64), also with a fully masked row", uses=SDPA)
def sdpa_gradients(t):
    q, k, v = randn(t, 2, 3, 4), randn(t, 2, 5, 4), randn(t, 2, 5, 6)
    with_empty_row = random_mask(t, 3, 5)
    with_empty_row[2] = False
    for label, mask in (("", None), (" with a mask", random_mask(t, 3, 5)),
                        (" with query 2 fully masked", with_empty_row)):
        gradcheck(t.student.scaled_dot_product_attention, [q, k, v, mask], [0, 1, 2],
                  "scaled_dot_product_attention" + label, output_index=0, reference=t.ref.scaled_dot_product_attention)


# ---- Q3 ---------------------------------------------------------------------------------------
@check(3, 1.5, "causal_mask: bool, square and fewer queries than keys (lower-right), device=, long sequences",
       uses=("causal_mask",))
def causal_mask_hidden(t):
    for shape in ((1, 1), (7, 7), (3, 8), (1, 9), (5, 6), (2, 3000)):
        got = t.student.causal_mask(*shape)
        assert_dtype(got, "bool", f"causal_mask{shape}")
        T_q, T_k = shape
        expected = (torch.arange(T_k)[None, :] <= torch.arange(T_q)[:, None] + T_k - T_q).tolist()
        assert_equal(got.tolist(), expected, f"causal_mask{shape}")
    assert_equal(t.student.causal_mask(4).tolist(), torch.ones(4, 4, dtype=torch.bool).tril().tolist(), "causal_mask(4)")
    got = t.student.causal_mask(3, 5, device=t.device)
    assert_dtype(got, "bool", f"causal_mask(3, 5, device={t.device!r})")
    assert_equal(got.tolist(), torch.ones(3, 5, dtype=torch.bool).tril(2).tolist(), f"causal_mask(3, 5, device={t.device!r})")
    properties.run_pure(t, "causal_mask", t.student.causal_mask, t.ref.causal_mask, "T_q 3, T_k 8", (3, 8))


@check(3, 1.5, "padding_mask: bool (B, T), empty and full sequences, batch of one, lengths left as they were",
       uses=("padding_mask",))
def padding_mask_hidden(t):
    for lengths, T, dtype in (([0, 6, 2, 5], 6, torch.int64), ([1], 3, torch.int64), ([3, 3], 7, torch.int32)):
        what = f"padding_mask(tensor({lengths}, {name_of(dtype)}), {T})"
        got = call(t, t.student.padding_mask, torch.tensor(lengths, dtype=dtype), T, what=what, want=torch.bool,
                   shape=(len(lengths), T))
        assert_equal(got.tolist(), [[p < n for p in range(T)] for n in lengths], what)
    properties.run_pure(t, "padding_mask", t.student.padding_mask, t.ref.padding_mask, "lengths (4,) int64, T 6",
                        (torch.tensor([0, 6, 2, 5]), 6))


# ---- Q4 ---------------------------------------------------------------------------------------
MHA = ("MultiHeadAttention",)
D, HEADS = 12, 3  # d_head = 4, and B = 2, T = 5 below: all distinct


def mha_state(t, d: int = D, kv: int | None = None, bias: bool = True, scale: float = 1.0) -> dict:
    kv = d if kv is None else kv
    state = (linear_state(t, "q_proj", d, d, bias) | linear_state(t, "k_proj", d, kv, bias)
             | linear_state(t, "v_proj", d, kv, bias) | linear_state(t, "out_proj", d, d, bias))
    state["q_proj.weight"] = state["q_proj.weight"] * scale
    return state


def builtin_mha(state: dict, x, context, attn_mask=None, key_padding_mask=None, d: int = D, heads: int = HEADS):
    """nn.MultiheadAttention (float64) holding the same weights; its masks mean True = may NOT attend."""
    bias = "q_proj.bias" in state
    module = nn.MultiheadAttention(d, heads, batch_first=True, bias=bias, dtype=F64)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([state[f"{n}.weight"] for n in ("q_proj", "k_proj", "v_proj")]))
        module.out_proj.weight.copy_(state["out_proj.weight"])
        if bias:
            module.in_proj_bias.copy_(torch.cat([state[f"{n}.bias"] for n in ("q_proj", "k_proj", "v_proj")]))
            module.out_proj.bias.copy_(state["out_proj.bias"])
    context = x if context is None else context
    out, _ = module(x.double(), context.double(), context.double(), attn_mask=attn_mask,
                    key_padding_mask=key_padding_mask, need_weights=False)
    return out.detach()


@check(4, 1, "split_heads and merge_heads: values, shapes, dtype, inverse of each other",
       uses=("split_heads", "merge_heads"))
def split_merge_heads(t):
    for Bx, T, dtype in ((2, 5, F32), (1, 7, F64)):
        x = randn(t, Bx, T, D, dtype=dtype)
        what = f"split_heads(x ({Bx}, {T}, {D}), {HEADS})"
        got = call(t, t.student.split_heads, x, HEADS, what=what, want=dtype, shape=(Bx, HEADS, T, D // HEADS))
        assert_close(got, x.view(Bx, T, HEADS, D // HEADS).transpose(1, 2),
                     what + ": head i holds features i*d_head..(i+1)*d_head-1")
        heads = randn(t, Bx, HEADS, T, D // HEADS, dtype=dtype)
        what = f"merge_heads(x ({Bx}, {HEADS}, {T}, {D // HEADS}))"
        got = call(t, t.student.merge_heads, heads, what=what, want=dtype, shape=(Bx, T, D))
        assert_close(got, heads.transpose(1, 2).reshape(Bx, T, D), what)
    properties.run_pure(unnoted(t), "split_heads", t.student.split_heads, t.ref.split_heads,
                        f"x (2, 5, {D}), {HEADS} heads", (randn(t, 2, 5, D), HEADS), device=True)
    properties.run_pure(unnoted(t), "merge_heads", t.student.merge_heads, t.ref.merge_heads,
                        f"x (2, {HEADS}, 5, {D // HEADS})", (randn(t, 2, HEADS, 5, D // HEADS),), device=True)


@check(4, 2, "MultiHeadAttention against nn.MultiheadAttention (self-attention, masks, bias=False, huge scores)",
       uses=MHA, needs=("scaled_dot_product_attention", "split_heads", "merge_heads"),
       hint="split_heads (view as (B, T, h, d_head), then transpose), the output projection, and passing the "
            "mask on to scaled_dot_product_attention.")
def mha_vs_builtin(t):
    T = 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    valid = torch.tensor([[True] * T, [True, True, True, False, False]])
    for dtype in DTYPES:
        state = mha_state(t)
        x = randn(t, 2, T, D, dtype=dtype)
        module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, dtype)
        call_twice(module, x, what=f"MultiHeadAttention({D}, {HEADS})(x (2, {T}, {D}), {name_of(dtype)})")
        cases = (("no mask", None, {}), ("a causal (T, T) mask", causal, {"attn_mask": ~causal}),
                 ("a padding (B, 1, 1, T) mask", valid[:, None, None, :], {"key_padding_mask": ~valid}))
        for label, mask, builtin_masks in cases:
            what = f"MultiHeadAttention({D}, {HEADS})(x (2, {T}, {D}), {label}, {name_of(dtype)})"
            got = call(t, module, x, None, mask, what=what, want=dtype, shape=(2, T, D))
            assert_module_close(got, builtin_mha(state, x, None, **builtin_masks), what, dtype)
    for label, state in (("bias=False", mha_state(t, bias=False)), ("W_q * 300 (huge scores)", mha_state(t, scale=300))):
        module = student_module(t, t.student.MultiHeadAttention, (D, HEADS, "q_proj.bias" in state), state, F64)
        x = randn(t, 2, T, D)
        what = f"MultiHeadAttention({D}, {HEADS}{', bias=False' if 'bias' in label else ''})(x (2, {T}, {D}), {label})"
        got = call(t, module, x, None, causal, what=what, want=F64)
        assert_finite(got, what)
        assert_close(got, builtin_mha(state, x, None, attn_mask=~causal), what, rtol=1e-7, atol=1e-9)


@check(4, 1, "cross-attention: queries from x, keys and values from context (T_q != T_k, masks, batch of one)",
       uses=MHA, needs=("scaled_dot_product_attention", "split_heads", "merge_heads"))
def cross_attention(t):
    state = mha_state(t)
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, F64)
    x, context = randn(t, 2, 3, D), randn(t, 2, 7, D)
    valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    what = f"MultiHeadAttention({D}, {HEADS})(x (2, 3, {D}), context (2, 7, {D}))"
    assert_module_close(call(t, module, x, context, None, what=what, shape=(2, 3, D)),
                        builtin_mha(state, x, context), what, F64)
    assert_module_close(call(t, module, x, context=context, what=what + " by keyword"),
                        builtin_mha(state, x, context), what + " by keyword", F64)
    label = what + " with a padding mask on the context"
    assert_module_close(call(t, module, x, context, valid[:, None, None, :], what=label),
                        builtin_mha(state, x, context, key_padding_mask=~valid), label, F64)
    cross = torch.ones(3, 7, dtype=torch.bool).tril(4)
    label = what + " with a (T_q, T_k) = (3, 7) mask"
    assert_module_close(call(t, module, x, context, mask=cross, what=label),
                        builtin_mha(state, x, context, attn_mask=~cross), label, F64)
    x1, c1 = randn(t, 1, 4, D), randn(t, 1, 6, D)
    label = f"MultiHeadAttention({D}, {HEADS})(x (1, 4, {D}), context (1, 6, {D}))"
    assert_module_close(call(t, module, x1, c1, None, what=label), builtin_mha(state, x1, c1), label, F64)


@check(4, 1, "causality: later inputs never change earlier outputs", uses=MHA,
       needs=("scaled_dot_product_attention", "split_heads", "merge_heads"))
def mha_causal(t):
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), mha_state(t), F64)
    T = 6
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    assert_causal(lambda x: output(module(x, None, mask), None, "MultiHeadAttention"), randn(t, 2, T, D),
                  f"MultiHeadAttention with a causal mask on x (2, {T}, {D})", rng=t.rng)


@check(4, 1, "self-attention without positions is permutation-equivariant", uses=MHA,
       needs=("scaled_dot_product_attention", "split_heads", "merge_heads"))
def mha_permutation(t):
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), mha_state(t), F64)
    assert_permutation_equivariant(lambda x: output(module(x), None, "MultiHeadAttention"), randn(t, 2, 7, D),
                                   f"MultiHeadAttention({D}, {HEADS}) on x (2, 7, {D})", rng=t.rng)


@check(4, 1, "gradients w.r.t. inputs (gradcheck) and every parameter (float64)", uses=MHA,
       needs=("scaled_dot_product_attention", "split_heads", "merge_heads"))
def mha_gradients(t):
    state = mha_state(t)
    module = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, F64)
    x, context = randn(t, 2, 3, D), randn(t, 2, 4, D)
    ref = reference_module(t.ref.MultiHeadAttention(D, HEADS), state, F64)
    S, name = properties.Sample, f"MultiHeadAttention({D}, {HEADS})"
    properties.run(t, properties.Graded(name, module, ref, {
        "inputs": [S(f"x (2, 3, {D}), context (2, 4, {D}), float64", (x, context, None))],
        "extremes": module_extremes(t, t.student.MultiHeadAttention, t.ref.MultiHeadAttention, (D, HEADS), state,
                                    lambda x, mask: (x, None, mask))}))
    gradcheck(module, [x, context, None], [0, 1], f"MultiHeadAttention({D}, {HEADS}) cross-attention", reference=ref)
    assert_param_grads(module, ref, [x, context, None], f"MultiHeadAttention({D}, {HEADS})", rng=t.rng)


def module_extremes(t, student_class, reference_class, args: tuple, state: dict, call_args) -> list:
    """An attention module's samples for the matrix's `extremes`, forward and gradients w.r.t. x and every
    parameter (float64): a causal mask (masked scores at the fill, far below the rest) at ordinary scale, and
    W_q * 300 (scores of hundreds) with and without it. A softmax written inline as 1 / sum_j exp(s_j - s_i) is
    right forward and NaN backward at both; the module's gradcheck runs with mask=None at ordinary scale only.
    `call_args(x, mask)`: the forward's arguments."""
    T = 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    x = randn(t, 2, T, D)
    loud_state = dict(state, **{"q_proj.weight": state["q_proj.weight"] * 300})
    loud = student_module(t, student_class, args, loud_state, F64)
    loud_ref = reference_module(reference_class(*args), loud_state, F64)
    S = properties.Sample
    return [S(f"x (2, {T}, {D}), a causal mask, float64", call_args(x, causal), wrt=(0,)),
            S(f"x (2, {T}, {D}), W_q * 300 (scores of hundreds), no mask, float64", call_args(x, None), wrt=(0,),
              call=loud, reference=loud_ref),
            S(f"x (2, {T}, {D}), W_q * 300 (scores of hundreds), a causal mask, float64", call_args(x, causal),
              wrt=(0,), call=loud, reference=loud_ref)]


# ---- Q5 ---------------------------------------------------------------------------------------
GQA = ("GroupedQueryAttention",)
GQA_NEEDS = ("scaled_dot_product_attention", "split_heads", "merge_heads")
G_HEADS = 6  # with d = 12: d_head = 2


def builtin_gqa(state: dict, x, n_heads: int, n_kv: int, mask) -> torch.Tensor:
    """The same projections done here, attention by F.scaled_dot_product_attention(enable_gqa=True)."""
    x = x.double()
    Bx, T, d = x.shape
    d_head = d // n_heads

    def project(name, heads):
        bias = state.get(f"{name}.bias")
        y = F.linear(x, state[f"{name}.weight"].double(), None if bias is None else bias.double())
        return y.view(Bx, T, heads, d_head).transpose(1, 2)

    out = F.scaled_dot_product_attention(project("q_proj", n_heads), project("k_proj", n_kv), project("v_proj", n_kv),
                                         attn_mask=mask, enable_gqa=True)
    out = out.transpose(1, 2).reshape(Bx, T, d)
    bias = state.get("out_proj.bias")
    return F.linear(out, state["out_proj.weight"].double(), None if bias is None else bias.double())


@check(5, 2, "GroupedQueryAttention against SDPA with enable_gqa (n_kv_heads = 1, 2, 3, 6; masks)", uses=GQA,
       needs=GQA_NEEDS, hint="query head i uses key/value head i // (n_heads // n_kv_heads): repeat_interleave, not repeat.")
def gqa_vs_builtin(t):
    T = 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    padding = torch.tensor([[True] * T, [True] * 3 + [False] * 2, [True] * T])[:, None, None, :]
    for n_kv in (2, 1, 3, 6):
        state = mha_state(t, D, n_kv * D // G_HEADS)
        for dtype in DTYPES if n_kv in (2, 1) else (F64,):
            x = randn(t, 3, T, D, dtype=dtype)
            module = student_module(t, t.student.GroupedQueryAttention, (D, G_HEADS, n_kv), state, dtype)
            for label, mask in (("no mask", None), ("a causal mask", causal), ("a padding (B, 1, 1, T) mask", padding)):
                what = f"GroupedQueryAttention({D}, {G_HEADS}, {n_kv})(x (3, {T}, {D}), {label}, {name_of(dtype)})"
                got = call(t, module, x, mask, what=what, want=dtype, shape=(3, T, D))
                assert_module_close(got, builtin_gqa(state, x, G_HEADS, n_kv, mask), what, dtype)


@check(5, 1, "GroupedQueryAttention: bias=False, huge scores, batch of one, mask by keyword", uses=GQA, needs=GQA_NEEDS)
def gqa_options(t):
    T = 4
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for label, state in (("bias=False", mha_state(t, D, 2 * D // G_HEADS, bias=False)),
                         ("W_q * 300 (huge scores)", mha_state(t, D, 2 * D // G_HEADS, scale=300))):
        bias = "q_proj.bias" in state
        module = student_module(t, t.student.GroupedQueryAttention, (D, G_HEADS, 2, bias), state, F64)
        x = randn(t, 1, T, D)
        what = f"GroupedQueryAttention({D}, {G_HEADS}, 2{'' if bias else ', bias=False'})(x (1, {T}, {D}), mask=causal, {label})"
        got = call(t, module, x, mask=causal, what=what, want=F64)
        assert_finite(got, what)
        assert_close(got, builtin_gqa(state, x, G_HEADS, 2, causal), what, rtol=1e-7, atol=1e-9)


@check(5, 1, "GroupedQueryAttention with n_kv_heads = n_heads equals MultiHeadAttention", uses=GQA + MHA,
       needs=GQA_NEEDS)
def gqa_equals_mha(t):
    state, x = mha_state(t), randn(t, 2, 5, D)
    gqa = student_module(t, t.student.GroupedQueryAttention, (D, HEADS, HEADS), state, F64)
    mha = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, F64)
    assert_close(gqa(x), mha(x), f"GroupedQueryAttention({D}, {HEADS}, {HEADS}) vs your MultiHeadAttention({D}, {HEADS})")


@check(5, 1, "GroupedQueryAttention gradients (gradcheck and parameters, float64)", uses=GQA, needs=GQA_NEEDS)
def gqa_gradients(t):
    state = mha_state(t, D, 2 * D // G_HEADS)
    module = student_module(t, t.student.GroupedQueryAttention, (D, G_HEADS, 2), state, F64)
    x = randn(t, 2, 4, D)
    ref = reference_module(t.ref.GroupedQueryAttention(D, G_HEADS, 2), state, F64)
    S, name = properties.Sample, f"GroupedQueryAttention({D}, {G_HEADS}, 2)"
    properties.run(t, properties.Graded(name, module, ref, {
        "inputs": [S(f"x (2, 4, {D}), float64", (x, None))],
        "extremes": module_extremes(t, t.student.GroupedQueryAttention, t.ref.GroupedQueryAttention,
                                    (D, G_HEADS, 2), state, lambda x, mask: (x, mask))}))
    gradcheck(module, [x, None], [0], f"GroupedQueryAttention({D}, {G_HEADS}, 2)", reference=ref)
    assert_param_grads(module, ref, [x, None], f"GroupedQueryAttention({D}, {G_HEADS}, 2)", rng=t.rng)


# ---- Q6 ---------------------------------------------------------------------------------------
def true_sinusoids(T: int, d: int) -> torch.Tensor:
    pos = torch.arange(T, dtype=F64)[:, None]
    omega = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=F64) / d)
    table = torch.zeros(T, d, dtype=F64)
    table[:, 0::2], table[:, 1::2] = torch.sin(pos * omega), torch.cos(pos * omega[: d // 2])
    return table


@check(6, 1.5, "sinusoidal_positions against the formula (odd d, thousands of positions)", uses=("sinusoidal_positions",))
def sinusoidal_hidden(t):
    for T, d in ((11, 8), (1, 6), (50, 16), (9, 7), (3000, 10)):
        what = f"sinusoidal_positions({T}, {d}) (sin in even columns, cos in odd)"
        got = call(t, t.student.sinusoidal_positions, T, d, what=what, want=F32, shape=(T, d))
        # float32 angles pos * w_k are exact to ~1e-7 relative: allow that much at large positions
        assert_close(got, true_sinusoids(T, d), what, rtol=1e-5, atol=1e-5 + 5e-7 * T)
    properties.run_generator(t, "sinusoidal_positions", t.student.sinusoidal_positions, "T 11, d 8", (11, 8))


@check(6, 1, "LearnedPositions adds the vectors of positions 0..T-1, and learns them", uses=("LearnedPositions",))
def learned_positions(t):
    max_len, d = 9, 4
    state = {"table.weight": randn(t, max_len, d, dtype=F32)}
    module = student_module(t, t.student.LearnedPositions, (max_len, d), state, F64)
    for x in (randn(t, 2, 6, d), randn(t, 1, max_len, d)):
        what = f"LearnedPositions({max_len}, {d})(x {tuple(x.shape)})"
        got = call(t, module, x, what=what, want=F64, shape=tuple(x.shape))
        assert_close(got, x + state["table.weight"].double()[: x.shape[1]], what)
    x = randn(t, 2, 6, d)
    what = f"LearnedPositions({max_len}, {d})(x (2, 6, {d}))"
    ref = reference_module(t.ref.LearnedPositions(max_len, d), state, F64)
    properties.run_pure(t, f"LearnedPositions({max_len}, {d})", module, ref, f"x (2, 6, {d}), float64", (x,))
    assert_param_grads(module, ref, [x], what, rng=t.rng)
    gradcheck(module, [x], [0], what, reference=ref)


def true_rope(x, positions=None, base=10000.0) -> torch.Tensor:
    x = x.double()
    T, d = x.shape[-2:]
    positions = torch.arange(T) if positions is None else positions
    theta = base ** (-torch.arange(0, d, 2, dtype=F64) / d)
    angle = positions.double()[:, None] * theta
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos()), -1).flatten(-2)


@check(6, 1.5, "apply_rope rotates pairs (2k, 2k+1) by position * base^(-2k/d): positions=, base=, far positions",
       uses=("apply_rope",))
def rope_hidden(t):
    x = randn(t, 2, 3, 5, 8)
    positions = torch.tensor([7, 0, 3, 12, 4])
    far = torch.tensor([4000, 17, 2500, 9999, 1])
    for label, args, kwargs, expected in (
            ("", (x,), {}, true_rope(x)),
            (", positions=tensor([7, 0, 3, 12, 4])", (x, positions), {}, true_rope(x, positions)),
            (", base=500.0", (x,), {"base": 500.0}, true_rope(x, None, 500.0)),
            (", positions=tensor([7, 0, 3, 12, 4]), base=500.0", (x,), {"positions": positions, "base": 500.0},
             true_rope(x, positions, 500.0)),
            (", positions up to 9999", (x, far), {}, true_rope(x, far))):
        what = f"apply_rope(x (2, 3, 5, 8){label})"
        got = call(t, t.student.apply_rope, *args, what=what, want=F64, shape=tuple(x.shape), **kwargs)
        assert_close(got, expected, what, rtol=1e-7, atol=1e-7 if "9999" not in label else 1e-6)
    x32 = randn(t, 3, 6, 10, dtype=F32)
    what = "apply_rope(x (3, 6, 10) float32)"
    got = call(t, t.student.apply_rope, x32, what=what, want=F32)
    assert_close(got, true_rope(x32), what, rtol=1e-5, atol=1e-5)
    long = [properties.Sample(f"x (2, 3, 5, 8), positions up to {far.max()}, float64", (x, far), wrt=(0,))]
    properties.run(t, properties.Graded("apply_rope", t.student.apply_rope, t.ref.apply_rope, {"extremes": long}))
    gradcheck(t.student.apply_rope, [x[0], positions], [0], "apply_rope(x, positions)",
              reference=t.ref.apply_rope)


@check(6, 1, "RoPE keeps norms, and q.k depends only on the position offset", uses=("apply_rope",))
def rope_properties(t):
    x = randn(t, 3, 6, 10)
    rotated = call(t, t.student.apply_rope, x, what="apply_rope(x (3, 6, 10))")
    assert_close(rotated.norm(dim=-1), x.norm(dim=-1), "the norm of each rotated vector (rotations keep norms)")
    q, k = randn(t, 1, 10), randn(t, 1, 10)
    scores = []
    for m, n in ((5, 2), (9, 6), (40, 37), (3003, 3000)):
        rq = t.student.apply_rope(q, torch.tensor([m]))
        rk = t.student.apply_rope(k, torch.tensor([n]))
        scores.append(float((rq * rk).sum()))
    assert_close(scores[1:], [scores[0]] * 3, "q.k of RoPE(q, m) and RoPE(k, n) for (m, n) = (9, 6), (40, 37) and "
                 "(3003, 3000) compared with (5, 2): it must depend only on m - n", rtol=1e-6, atol=1e-6)


def true_slopes(n: int) -> list[float]:
    def geometric(m):
        return [2.0 ** (-8.0 * (i + 1) / m) for i in range(m)]
    p = 1 << (n.bit_length() - 1)
    return geometric(p) + geometric(2 * p)[0::2][: n - p]


@check(6, 1, "alibi_slopes: the geometric sequence, and the rule for other head counts", uses=("alibi_slopes",))
def alibi_slopes_hidden(t):
    for n in (8, 16, 2, 1, 6, 12, 5):
        got = call(t, t.student.alibi_slopes, n, what=f"alibi_slopes({n})", shape=(n,))
        assert_close(got, torch.tensor(true_slopes(n), dtype=F64), f"alibi_slopes({n})", rtol=1e-6)
    properties.run_generator(t, "alibi_slopes", t.student.alibi_slopes, "n_heads 6", (6,))


@check(6, 1, "alibi_bias: slope * (j - i), aligned lower-right (T_q != T_k, head counts not a power of two)",
       uses=("alibi_bias",), needs=("alibi_slopes",))
def alibi_bias_hidden(t):
    for h, T_q, T_k in ((4, 3, 6), (8, 5, 5), (6, 1, 9)):
        slopes = torch.tensor(true_slopes(h), dtype=F64)
        offsets = torch.arange(T_k)[None, :] - (torch.arange(T_q)[:, None] + T_k - T_q)
        what = f"alibi_bias({h}, {T_q}, {T_k})"
        got = call(t, t.student.alibi_bias, h, T_q, T_k, what=what, shape=(h, T_q, T_k))
        assert_close(got, slopes[:, None, None] * offsets, what, rtol=1e-6)
    got = call(t, t.student.alibi_bias, 4, 5, what="alibi_bias(4, 5)", shape=(4, 5, 5))
    assert_close(got, torch.tensor(true_slopes(4), dtype=F64)[:, None, None] * (torch.arange(5)[None, :] -
                 torch.arange(5)[:, None]), "alibi_bias(4, 5) (T_k defaults to T_q)", rtol=1e-6)
    properties.run_generator(t, "alibi_bias", t.student.alibi_bias, "n_heads 6, T_q 1, T_k 9", (6, 1, 9))


# ---- Q7 ---------------------------------------------------------------------------------------
Q7_MODULE_USES = ("MultiHeadAttention", "GroupedQueryAttention", "LearnedPositions")


@check(7, 1.5, "modules run in float64 give float64 results at float64 accuracy (and create no tensor on a fixed device)",
       uses=Q7_MODULE_USES, needs=("scaled_dot_product_attention", "split_heads", "merge_heads"))
def device_agnostic_modules(t):
    T = 5
    x, context = randn(t, 2, T, D), randn(t, 2, 7, D)
    cross = torch.ones(T, 7, dtype=torch.bool).tril(2)
    state, gstate = mha_state(t), mha_state(t, D, 2 * D // G_HEADS)
    table = {"table.weight": randn(t, 9, D)}  # float64 values: a float32 copy of the table loses digits
    mha = student_module(t, t.student.MultiHeadAttention, (D, HEADS), state, F64)
    gqa = student_module(t, t.student.GroupedQueryAttention, (D, G_HEADS, 2), gstate, F64)
    learned = student_module(t, t.student.LearnedPositions, (9, D), table, F64)
    cases = [
        (mha, [x], builtin_mha(state, x, None), f"MultiHeadAttention({D}, {HEADS})(x) in float64"),
        (mha, [x, context, cross], builtin_mha(state, x, context, attn_mask=~cross),
         f"MultiHeadAttention({D}, {HEADS})(x, context, mask) in float64"),
        (gqa, [x], builtin_gqa(gstate, x, G_HEADS, 2, None), f"GroupedQueryAttention({D}, {G_HEADS}, 2)(x) in float64"),
        (learned, [x], x + table["table.weight"].double()[:T], f"LearnedPositions(9, {D})(x) in float64"),
    ]
    for module, args, expected, what in cases:
        got = call(t, module, *args, what=what, want=F64)
        assert_close(got, expected, what, rtol=1e-10, atol=1e-12)
    mha, gqa = f"MultiHeadAttention({D}, {HEADS})", f"GroupedQueryAttention({D}, {G_HEADS}, 2)"
    fresh = [(mha, t.student.MultiHeadAttention(D, HEADS), f"x (2, {T}, {D})", (x.float(),)),
             (mha, t.student.MultiHeadAttention(D, HEADS), f"x (2, {T}, {D}), context (2, 7, {D}), mask ({T}, 7)",
              (x.float(), context.float(), cross)),
             (gqa, t.student.GroupedQueryAttention(D, G_HEADS, 2), f"x (2, {T}, {D})", (x.float(),)),
             (f"LearnedPositions(9, {D})", t.student.LearnedPositions(9, D), f"x (2, {T}, {D})", (x.float(),))]
    for name, module, label, args in fresh:  # freshly made modules, in float32 and float64
        properties.run_device(unnoted(t), name, module, label, args)


@check(7, 0.75, "scaled_dot_product_attention and apply_rope in float64: float64 results at float64 accuracy",
       uses=("scaled_dot_product_attention", "apply_rope"))
def float64_functions(t):
    q, k, v = randn(t, 2, 3, 4), randn(t, 2, 5, 4), randn(t, 2, 5, 6)
    mask = torch.ones(3, 5, dtype=torch.bool).tril(2)
    what = "scaled_dot_product_attention(q, k, v, mask) in float64"
    out, weights = call(t, t.student.scaled_dot_product_attention, q, k, v, mask, what=what, index=0, want=F64)
    assert_dtype(weights, "float64", what + " weights")
    expected_out, expected_weights = true_attention(q, k, v, mask)
    assert_close(out, expected_out, what + " output", rtol=1e-10, atol=1e-12)
    assert_close(weights, expected_weights, what + " weights", rtol=1e-10, atol=1e-12)
    x = randn(t, 2, 6, 8)
    positions = torch.tensor([3, 1400, 0, 77, 5, 1500])
    what = "apply_rope(x (2, 6, 8) float64, positions up to 1500)"
    got = call(t, t.student.apply_rope, x, positions, what=what, want=F64)
    assert_close(got, true_rope(x, positions), what, rtol=1e-9, atol=1e-9)
    sdpa = "q (2, 3, 4), k (2, 5, 4), v (2, 5, 6)"
    q32, k32, v32 = q.float(), k.float(), v.float()
    for name, label, args in (("scaled_dot_product_attention", sdpa + ", mask (3, 5)", (q32, k32, v32, mask)),
                              ("scaled_dot_product_attention", sdpa + ", mask=None", (q32, k32, v32)),
                              ("apply_rope", "x (2, 5, 4)", (k32,))):
        properties.run_device(unnoted(t), name, getattr(t.student, name), label, args)


@check(7, 0.75, "masks and positions made where device= says, in the dtype= asked for",
       uses=("causal_mask", "padding_mask", "sinusoidal_positions", "alibi_bias"))
def device_and_dtype_arguments(t):
    for dtype in (F64, F32):
        what = f"sinusoidal_positions(2000, 6, device={t.device!r}, dtype=torch.{name_of(dtype)})"
        got = call(t, t.student.sinusoidal_positions, 2000, 6, what=what, want=dtype, device=t.device,
                   dtype=worker_dtype(t, dtype))
        tol = (1e-9, 1e-9) if dtype == F64 else (1e-5, 1e-3)
        assert_close(got, true_sinusoids(2000, 6), what, rtol=tol[0], atol=tol[1])
    what = f"causal_mask(3, 5, device={t.device!r})"
    got = call(t, t.student.causal_mask, 3, 5, what=what, want=torch.bool, device=t.device)
    assert_equal(got.tolist(), torch.ones(3, 5, dtype=torch.bool).tril(2).tolist(), what)
    what = f"alibi_bias(4, 3, 5, device={t.device!r})"
    got = call(t, t.student.alibi_bias, 4, 3, 5, what=what, device=t.device, shape=(4, 3, 5))
    offsets = torch.arange(5)[None, :] - (torch.arange(3)[:, None] + 2)
    assert_close(got, torch.tensor(true_slopes(4), dtype=F64)[:, None, None] * offsets, what, rtol=1e-6)
    properties.run_device(unnoted(t), "padding_mask", t.student.padding_mask, "lengths (2,) int64, T 6",
                          (torch.tensor([2, 5]), 6))
    for name, label, args in (("causal_mask", "T_q 3, T_k 5", (3, 5)),  # made from sizes where device= says
                              ("alibi_bias", "n_heads 4, T_q 3, T_k 5", (4, 3, 5)),
                              ("sinusoidal_positions", "T 5, d 6", (5, 6))):
        properties.run_device(unnoted(t), name, getattr(t.student, name), label + ", device=the device", args,
                              device_arg="device", follows_dtype=False)
