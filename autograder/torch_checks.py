"""Check primitives for torch assignments (attention, rnn_lm, transformer), run on the trusted side.

Each one calls the student's code through a `Remote` and decides here, from plain data:
gradients in float64 with `torch.autograd.gradcheck` (its forward and backward are round trips to
the student's process), properties that hold for any correct model whatever its weights (causality,
permutation equivariance), and device/dtype agnosticism without a GPU (the `meta` device).
"""
from __future__ import annotations

import numpy as np
import torch

from autograder.compare import assert_close
from autograder.errors import CheckFailed
from autograder.remote import StudentError

# Composite modules (several matmuls and a softmax) in float32 drift further from a float64 truth
# than torch.testing's elementwise defaults allow; float64 keeps its tight tolerances.
MODULE_TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-9)}


def randn(t, *shape: int, dtype: torch.dtype = torch.float64, scale: float = 1.0) -> torch.Tensor:
    """A normal tensor from the check's own seeded generator (same inputs on every run)."""
    return torch.from_numpy(t.rng.standard_normal(shape) * scale).to(dtype)


def assert_module_close(got, expected: torch.Tensor, what: str, dtype: torch.dtype) -> None:
    rtol, atol = MODULE_TOLERANCES[dtype]
    assert_close(got, expected, what, rtol=rtol, atol=atol)


def assert_on_device(value, device: str, what: str) -> None:
    """The student's output stayed where its inputs were (on CUDA this catches a stray `.cpu()`)."""
    where = getattr(value, "lmgrade_device", None)
    if where is not None and where.split(":")[0] != device.split(":")[0]:
        raise CheckFailed(f"{what}: inputs were on {device} but the output came back on {where}; "
                          "keep tensors on the device of the inputs (no .cpu() or device=... inside).")


def output(value, index: int | None, what: str) -> torch.Tensor:
    """Pick the tensor a check compares from a function's return value."""
    if index is not None:
        if not isinstance(value, (tuple, list)) or len(value) <= index:
            raise CheckFailed(f"{what} should return a tuple with at least {index + 1} items, got {type(value).__name__}")
        value = value[index]
    if not isinstance(value, torch.Tensor):
        raise CheckFailed(f"{what} should return a torch tensor, got {type(value).__name__}")
    return value


# ---- gradients --------------------------------------------------------------------------------
class _RemoteFunction(torch.autograd.Function):
    """The student's function as an autograd node: forward and backward run in the student's process."""

    @staticmethod
    def forward(ctx, call, args, wrt, output_index, *inputs):
        full = list(args)
        for i, x in zip(wrt, inputs):
            full[i] = x.detach()
        ctx.call, ctx.full, ctx.wrt, ctx.output_index = call, full, wrt, output_index
        out = output(call(*full), output_index, call._label)
        if out.dtype != torch.float64:
            raise CheckFailed(f"{call._label}: float64 inputs gave a {str(out.dtype).removeprefix('torch.')} "
                              "output; keep the inputs' dtype (no hard-coded dtype=...)")
        return out.detach().clone()

    @staticmethod
    def backward(ctx, grad):
        got = ctx.call.vjp(ctx.full, list(ctx.wrt), grad, output_index=ctx.output_index or 0)
        grads = got["input_grads"] if isinstance(got, dict) else None
        if not isinstance(grads, list) or len(grads) != len(ctx.wrt):
            raise CheckFailed(f"backward through {ctx.call._label} did not return gradients for every input")
        return (None, None, None, None, *[g.to(torch.float64) for g in grads])


def gradcheck(call, args: list, wrt: list[int], what: str, *, output_index: int | None = None) -> None:
    """`torch.autograd.gradcheck` in float64 of the student's function w.r.t. `args[i]` for i in `wrt`.

    Why gradcheck and not only "equals the reference": it also catches code whose forward is right
    but whose graph is cut (`.detach()`, `.data`, `torch.no_grad()`, in-place writes).
    """
    inputs = [args[i].detach().to(torch.float64).requires_grad_(True) for i in wrt]
    fixed = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    try:
        ok = torch.autograd.gradcheck(lambda *xs: _RemoteFunction.apply(call, fixed, wrt, output_index, *xs),
                                      inputs, fast_mode=True, raise_exception=False)
    except RuntimeError as exc:  # torch's own complaints (CheckFailed from the student's calls passes through)
        raise CheckFailed(f"{what}: gradcheck could not run ({exc})") from None
    if not ok:
        raise CheckFailed(f"{what}: torch.autograd.gradcheck in float64 failed: the gradient autograd computes "
                          "through your code disagrees with finite differences of your own forward. Look for "
                          ".detach(), .data, torch.no_grad(), in-place writes, or a non-differentiable step.")


def assert_param_grads(module, ref_module: torch.nn.Module, args: list, what: str, *, rng) -> None:
    """Gradients w.r.t. every parameter equal the reference's (same weights), in float64."""
    ref_out = output(ref_module(*args), None, what)
    cotangent = torch.from_numpy(rng.standard_normal(tuple(ref_out.shape)))
    got = module.vjp(list(args), [], cotangent)
    expected = torch.autograd.grad((ref_out * cotangent).sum(), list(ref_module.parameters()))
    got_grads = got.get("param_grads", {}) if isinstance(got, dict) else {}
    for (name, _), grad in zip(ref_module.named_parameters(), expected):
        if name not in got_grads:
            raise CheckFailed(f"{what}: no gradient reached parameter `{name}`; is it used in forward?")
        if np.all(got_grads[name].numpy() == 0) and bool(grad.abs().max() > 0):
            raise CheckFailed(f"{what}: the gradient of `{name}` is all zeros; is `{name}` used in forward?")
        assert_close(got_grads[name], grad, f"{what}: gradient of `{name}`", rtol=1e-7, atol=1e-9)


# ---- properties -------------------------------------------------------------------------------
def assert_causal(call, x: torch.Tensor, what: str, *, time_dim: int = 1, positions=None, rng=None) -> None:
    """Changing inputs after position p never changes outputs at positions <= p."""
    base = call(x)
    T = x.shape[time_dim]
    for p in positions if positions is not None else range(T - 1):
        changed = x.clone()
        index = [slice(None)] * x.dim()
        index[time_dim] = slice(p + 1, None)
        noise = rng.standard_normal(tuple(changed[tuple(index)].shape)) if rng is not None else 1.0
        changed[tuple(index)] += torch.as_tensor(noise, dtype=x.dtype) * 3
        after = call(changed)
        keep = [slice(None)] * x.dim()
        keep[time_dim] = slice(0, p + 1)
        try:
            assert_close(after[tuple(keep)], base[tuple(keep)], "")
        except CheckFailed:
            raise CheckFailed(f"{what}: changing the input after position {p} changed the output at positions "
                              f"0..{p}, so position {p} sees the future. Check the causal mask (True = may attend) "
                              "and that it is applied before the softmax.") from None


def assert_permutation_equivariant(call, x: torch.Tensor, what: str, *, rng, time_dim: int = 1) -> None:
    """Without positions, permuting the sequence permutes the outputs the same way."""
    perm = torch.from_numpy(rng.permutation(x.shape[time_dim]))
    base = call(x)
    permuted = call(x.index_select(time_dim, perm))
    try:
        assert_close(permuted, base.index_select(time_dim, perm), "", rtol=1e-6, atol=1e-8)
    except CheckFailed as exc:
        raise CheckFailed(f"{what}: permuting the positions of the input did not just permute the output "
                          f"({str(exc).lstrip(': ')}). Without positional information attention must treat "
                          "the sequence as a set.") from None


def assert_device_agnostic(call, args: list, what: str, *, device_arg: str | None = None,
                           follows_dtype: bool = True) -> str | None:
    """No tensor on a hard-coded device or dtype, checked on the `meta` device in float32 and float64.

    The call must first work normally (else it fails here). `device_arg` names a keyword argument
    that says where to create the output (as in `causal_mask(T, device=...)`); `follows_dtype=False`
    for a function whose float outputs do not come from float inputs. Returns a note when the code
    works but cannot run on `meta` for another reason (`.item()`, say): then nothing is concluded.
    """
    call(*args)
    kwargs = {device_arg: "meta"} if device_arg else {}
    for dtype in ("float32", "float64"):
        try:
            probe = call.on_meta(*args, dtype=dtype, **kwargs)
        except StudentError as exc:
            text = str(exc)
            if "device" in text and ("cpu" in text or "cuda" in text):
                raise CheckFailed(f"{what}: your code mixes tensors on different devices ({_first_line(text)}). "
                                  "Create tensors on the inputs' device: device=x.device, or torch.*_like(x).") from None
            return (f"{what} could not run on the meta device ({_first_line(text)}), "
                    "so device independence was not checked.")
        if probe.get("foreign"):
            raise CheckFailed(f"{what}: with every input and parameter on another device, {probe['foreign']}: "
                              "a tensor is created on a hard-coded device (torch.zeros/ones/arange/tril/tensor "
                              "without device=, or .cpu()/.to('cpu')). It works on the CPU and breaks on a GPU; "
                              "pass device=x.device.")
        for out in probe.get("outputs", []):
            if out["device"] != "meta":
                raise CheckFailed(f"{what}: an output came back on {out['device']} instead of the inputs' device.")
            if follows_dtype and out["dtype"] in ("float32", "float64") and out["dtype"] != dtype:
                raise CheckFailed(f"{what}: with {dtype} inputs and parameters an output was {out['dtype']}; "
                                  "do not hard-code dtype=... (use dtype=x.dtype or torch.*_like(x)).")
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if "Error" in line or "error" in line:
            return line.strip()[:300]
    return text.splitlines()[0][:300] if text else ""


# ---- modules ----------------------------------------------------------------------------------
def linear_state(t, prefix: str, d_in: int, d_out: int, bias: bool = True) -> dict:
    """Weights for an nn.Linear named `prefix`, scaled like PyTorch's default initialization."""
    state = {f"{prefix}.weight": randn(t, d_out, d_in, dtype=torch.float32, scale=d_in ** -0.5)}
    if bias:
        state[f"{prefix}.bias"] = randn(t, d_out, dtype=torch.float32, scale=0.1)
    return state


def student_module(t, cls, args: tuple, state: dict, dtype: torch.dtype):
    """The student's class instantiated in its process, with the grader's weights, on the grading device.

    Why the grader sets the weights: then the student's output can be compared with a reference or
    a built-in holding exactly the same weights.
    """
    module = cls(*args)
    module.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    module = module.double() if dtype == torch.float64 else module.float()  # dtypes do not cross the wire
    return module.to(t.device)


def reference_module(module: torch.nn.Module, state: dict, dtype: torch.dtype) -> torch.nn.Module:
    """A trusted module (the reference's) holding the same weights as `student_module` gave the student."""
    module.load_state_dict(state)
    return module.to(dtype=dtype)
