"""What the Otter port's test files share: seeded inputs, comparisons, the float64 truths.

Why a file of its own: Otter copies support files next to the submission, so every test file can
import it (and `attention_reference`, the staff reference, which `otter_comparison.py` copies in).
It mirrors the helpers of `assignments/attention/{public,hidden}_checks.py` with the same
tolerances; inputs come from a numpy generator seeded per test, as `randn(t, ...)` does there.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

F32, F64 = torch.float32, torch.float64
DTYPES = (F32, F64)
MODULE_TOLERANCES = {F32: (1e-5, 1e-5), F64: (1e-7, 1e-9)}


class Inputs:
    """A seeded source of normal tensors, one per test, so each run sees the same inputs."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def randn(self, *shape, dtype=F64, scale=1.0):
        return torch.from_numpy(self.rng.standard_normal(shape) * scale).to(dtype)

    def mask(self, *shape):
        """Boolean, at least one True per row."""
        m = torch.from_numpy(self.rng.random(shape) < 0.6)
        m[..., 0] |= ~m.any(-1)
        return m

    def linear(self, prefix, d_in, d_out, bias=True):
        state = {f"{prefix}.weight": self.randn(d_out, d_in, dtype=F32, scale=d_in ** -0.5)}
        if bias:
            state[f"{prefix}.bias"] = self.randn(d_out, dtype=F32, scale=0.1)
        return state

    def mha_state(self, d, kv=None, bias=True, scale=1.0):
        kv = d if kv is None else kv
        state = (self.linear("q_proj", d, d, bias) | self.linear("k_proj", d, kv, bias)
                 | self.linear("v_proj", d, kv, bias) | self.linear("out_proj", d, d, bias))
        state["q_proj.weight"] = state["q_proj.weight"] * scale
        return state


def float32_of(value):
    """float64 tensors rounded once to float32 (as the public fixtures are)."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.float() if value.dtype == F64 else value
    if isinstance(value, (tuple, list)):
        return type(value)(float32_of(v) for v in value)
    return value


def assert_close(got, expected, what, rtol=None, atol=None):
    """|got - expected| <= atol + rtol |expected|, with torch.testing's defaults for the expected dtype."""
    expected = torch.as_tensor(expected)
    got = torch.as_tensor(got)
    default = (1.3e-6, 1e-5) if expected.dtype == F32 else (1e-7, 1e-7)
    rtol, atol = default[0] if rtol is None else rtol, default[1] if atol is None else atol
    assert got.shape == expected.shape, f"{what}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    g, e = got.detach().double(), expected.detach().double()
    assert torch.equal(torch.isnan(g), torch.isnan(e)), f"{what}: NaN where none was expected"
    ok = ((g - e).abs() <= atol + rtol * e.abs()) | (torch.isnan(g) & torch.isnan(e))
    assert bool(ok.all()), f"{what}: max abs difference {float((g - e).abs().nan_to_num(0).max()):.3g}"


def assert_dtype(got, dtype, what):
    assert isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"
    assert got.dtype == dtype, f"{what}: expected dtype {dtype}, got {got.dtype}"


def close(got, expected, what, dtype=F32, tol=None):
    """The public checks' comparison: the output's dtype, then values at 1e-5 (float32) or 1e-9."""
    assert_dtype(got, dtype, what)
    tol = tol or (1e-5 if dtype == F32 else 1e-9)
    assert_close(got, expected, what, rtol=tol, atol=tol)


def module_close(got, expected, what, dtype):
    rtol, atol = MODULE_TOLERANCES[dtype]
    assert_close(got, expected.to(dtype), what, rtol=rtol, atol=atol)


def huge_close(got, expected, what, dtype):
    if dtype == F32:
        assert_close(got, expected.to(dtype), what, rtol=1e-2, atol=1e-2)
    else:
        module_close(got, expected, what, dtype)


def assert_finite(got, what):
    assert bool(torch.isfinite(torch.as_tensor(got)).all()), f"{what}: NaN or inf in the output"


def pure(fn, *args, **kwargs):
    """Call `fn`, failing if it changed a tensor argument in place."""
    before = [a.clone() if isinstance(a, torch.Tensor) else None for a in args]
    out = fn(*args, **kwargs)
    for i, (a, b) in enumerate(zip(args, before)):
        if b is not None:
            assert torch.equal(a, b), f"{getattr(fn, '__name__', fn)} changed its argument {i} in place"
    return out


def first(value):
    return value[0] if isinstance(value, tuple) else value


def student_module(cls, args, state, dtype):
    """The student's class with the grader's weights (cast before loading, as the grader does)."""
    module = cls(*args)
    module = module.double() if dtype == F64 else module.float()
    module.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    return module


def reference_module(module, state, dtype):
    module.load_state_dict(state)
    return module.to(dtype=dtype)


def gradcheck(fn, args, wrt, what, reference=None, output_index=None):
    """torch.autograd.gradcheck in float64 on the inputs `wrt`, and gradients equal to the reference's."""
    args = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]

    def f(*inputs):
        full = list(args)
        for i, x in zip(wrt, inputs):
            full[i] = x
        out = fn(*full)
        return out[output_index] if output_index is not None else first(out)

    inputs = [args[i].clone().requires_grad_() for i in wrt]
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, raise_exception=False), \
        f"{what}: gradients differ from finite differences"
    if reference is not None:
        u = torch.randn_like(f(*[x.detach() for x in inputs]).detach(), generator=torch.Generator().manual_seed(0))
        mine = torch.autograd.grad((f(*inputs) * u).sum(), inputs, allow_unused=True)
        ref_inputs = [x.detach().clone().requires_grad_() for x in inputs]
        full = list(args)
        for i, x in zip(wrt, ref_inputs):
            full[i] = x
        out = reference(*full)
        out = out[output_index] if output_index is not None else first(out)
        theirs = torch.autograd.grad((out * u).sum(), ref_inputs, allow_unused=True)
        for i, (a, b) in enumerate(zip(mine, theirs)):
            assert a is not None, f"{what}: no gradient reaches input {wrt[i]}"
            assert_close(a, b, f"{what}: gradient w.r.t. input {wrt[i]}", rtol=1e-6, atol=1e-8)


def device_agnostic(module_or_fn, args, what, **kwargs):
    """On the meta device (shapes only), a tensor made on a fixed device shows up as a device clash."""
    meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    if isinstance(module_or_fn, nn.Module):
        module_or_fn = module_or_fn.to("meta")
    try:
        out = first(module_or_fn(*meta, **kwargs))
    except RuntimeError as exc:
        raise AssertionError(f"{what} on another device: {exc}") from None
    assert out.device.type == "meta", f"{what}: the output is on {out.device}, not on the input's device"


# ---- float64 truths, as in hidden_checks.py ----------------------------------------------------
def true_attention(q, k, v, mask):
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.nan_to_num(torch.softmax(scores, -1), nan=0.0)
    return weights @ v.double(), weights


def builtin_mha(state, x, context, attn_mask=None, key_padding_mask=None, d=12, heads=3):
    """nn.MultiheadAttention (float64) with the same weights; its masks mean True = may NOT attend."""
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


def builtin_gqa(state, x, n_heads, n_kv, mask):
    x = x.double()
    b, T, d = x.shape
    d_head = d // n_heads

    def project(name, heads):
        bias = state.get(f"{name}.bias")
        y = F.linear(x, state[f"{name}.weight"].double(), None if bias is None else bias.double())
        return y.view(b, T, heads, d_head).transpose(1, 2)

    out = F.scaled_dot_product_attention(project("q_proj", n_heads), project("k_proj", n_kv), project("v_proj", n_kv),
                                         attn_mask=mask, enable_gqa=True)
    out = out.transpose(1, 2).reshape(b, T, d)
    bias = state.get("out_proj.bias")
    return F.linear(out, state["out_proj.weight"].double(), None if bias is None else bias.double())


def true_sinusoids(T, d):
    pos = torch.arange(T, dtype=F64)[:, None]
    omega = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=F64) / d)
    table = torch.zeros(T, d, dtype=F64)
    table[:, 0::2], table[:, 1::2] = torch.sin(pos * omega), torch.cos(pos * omega[: d // 2])
    return table


def true_rope(x, positions=None, base=10000.0):
    x = x.double()
    T, d = x.shape[-2:]
    positions = torch.arange(T) if positions is None else positions
    theta = base ** (-torch.arange(0, d, 2, dtype=F64) / d)
    angle = positions.double()[:, None] * theta
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos()), -1).flatten(-2)


def true_slopes(n):
    def geometric(m):
        return [2.0 ** (-8.0 * (i + 1) / m) for i in range(m)]
    p = 1 << (n.bit_length() - 1)
    return geometric(p) + geometric(2 * p)[0::2][: n - p]
