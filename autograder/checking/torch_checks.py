"""Check primitives for torch assignments (attention, rnn_lm, transformer), run on the trusted side.

Each one calls the student's code through a `Remote` and decides here, from plain data:
gradients in float64 (the worker's vjp verified against the grader's own central differences of
the student's forward, and against the reference), properties that hold for any correct model
whatever its weights (causality, permutation equivariance), and device/dtype agnosticism without a
GPU (a simulated non-CPU device that carries real values), which, being observable only in the
worker, can fail a check but never earn points.
"""
from __future__ import annotations

import numpy as np
import torch

from autograder.checking.compare import assert_close
from autograder.checking.remote import Remote, StudentError
from autograder.errors import CheckFailed

# Composite modules (several matmuls and a softmax) in float32 drift further from a float64 truth
# than torch.testing's elementwise defaults allow; float64 keeps its tight tolerances.
MODULE_TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-9)}


def name_of(dtype: torch.dtype) -> str:
    """A dtype as messages name it: "float32"."""
    return str(dtype).removeprefix("torch.")


def randn(t, *shape: int, dtype: torch.dtype = torch.float64, scale: float = 1.0) -> torch.Tensor:
    """A normal tensor from the check's own seeded generator (same inputs on every run)."""
    return torch.from_numpy(t.rng.standard_normal(shape) * scale).to(dtype)


def assert_module_close(got, expected: torch.Tensor, what: str, dtype: torch.dtype) -> None:
    rtol, atol = MODULE_TOLERANCES[dtype]
    assert_close(got, expected, what, rtol=rtol, atol=atol)


def _refuse_if_tampered(call, what: str) -> None:
    """Graded code that reaches into the worker's engine may have rewritten its reports: believe none."""
    tampering = getattr(getattr(call, "_student", None), "tampering", None)
    if tampering:
        raise CheckFailed(f"{what}: not scored: graded code reaches into the grader's own code in your process "
                          f"({tampering}), so what that process reports about device placement cannot be "
                          "believed. Graded cells must not touch `autograder`.")


def assert_on_device(value, device: str, what: str) -> str | None:
    """The student's output stayed where its inputs were (on CUDA this catches a stray `.cpu()`).

    The device a tensor came from is what the student's process SAYS (a graded cell can change the
    engine's encoder), so it can only fail a check, never earn points: a reported foreign device
    is self-incriminating and fails; otherwise a note is returned ("reported, not verified").
    """
    where = getattr(value, "lmgrade_device", None)
    if where is not None and where.split(":")[0] != device.split(":")[0]:
        raise CheckFailed(f"{what}: inputs were on {device} but the output came back on {where}; "
                          "keep tensors on the device of the inputs (no .cpu() or device=... inside).")
    return f"{what}: reported on {where or 'an unknown device'} by your process (not verified, not scored)."


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
# Central differences in float64 with a step of 1e-6 are accurate to ~1e-9 relative; a wrong
# gradient is off by far more. Tolerances as torch.autograd.gradcheck's.
FD_EPS, FD_ATOL, FD_RTOL = 1e-6, 1e-5, 1e-3
N_DIRECTIONS = 2  # random directions per input: each costs two forward calls


def _float64(args: list) -> list:
    return [a.detach().to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]


def _vjp(call, args: list, wrt: list[int], cotangent: torch.Tensor, output_index: int | None,
         plain: torch.Tensor, what: str) -> dict:
    """The worker's vjp, with what the grader can check about it checked: its output is the plain call's."""
    got = call.vjp(args, list(wrt), cotangent, output_index=output_index or 0)
    if not isinstance(got, dict):
        raise CheckFailed(f"backward through {what} did not return gradients")
    claimed = got.get("output")
    if not isinstance(claimed, torch.Tensor):
        raise CheckFailed(f"backward through {what} did not return its output")
    try:
        assert_close(claimed, plain, "")
    except CheckFailed:
        raise CheckFailed(f"{what}: the output computed for the backward pass differs from a plain call's output "
                          "on the same inputs: is randomness left on (dropout, a fresh random tensor)?") from None
    return got


def _check_grad_shape(grad, like: torch.Tensor, what: str) -> torch.Tensor:
    if not isinstance(grad, torch.Tensor) or tuple(grad.shape) != tuple(like.shape):
        raise CheckFailed(f"{what}: the gradient has shape {tuple(getattr(grad, 'shape', ()))}, "
                          f"expected {tuple(like.shape)}")
    return grad.detach().to(torch.float64)


def _directions(what: str, shape: tuple, n: int) -> list[torch.Tensor]:
    """Unit-variance directions, the same on every run for the same call (a stable score)."""
    import zlib
    rng = np.random.default_rng(zlib.crc32(f"{what}|{shape}".encode()))
    return [torch.from_numpy(rng.standard_normal(shape)) for _ in range(n)]


COARSE_EPS = 1e-3  # a step at which float32 rounding no longer swamps a central difference
LOW_PRECISION = ("Your forward looks computed in lower precision than float64 inside: its finite differences "
                 "agree with this gradient at a coarse step but not at a fine one. Keep the input's dtype "
                 "throughout (no .float(), no tensor made with dtype=torch.float32, parameters in the input's "
                 "dtype), so that gradients can be checked in float64.")


def _directional_mismatch(forward, perturb, grads_dot, cotangent: torch.Tensor, direction) -> tuple[float, float, bool] | None:
    """(analytic, numeric, low precision) when <vjp, d> disagrees with the central difference
    (f(x+eps d) - f(x-eps d)).u / 2eps.

    Why the third: a forward that casts to float32 inside has a right gradient but finite differences
    drowned in rounding at eps = 1e-6; at a coarse step they agree again, which a cut graph never does,
    so the student is told about the precision, not sent looking for a `.detach()`."""
    def central(eps: float) -> float:
        plus, minus = forward(perturb(direction, eps)), forward(perturb(direction, -eps))
        return float(((plus - minus) * cotangent).sum()) / (2 * eps)

    numeric, analytic = central(FD_EPS), float(grads_dot(direction))
    if abs(analytic - numeric) <= FD_ATOL + FD_RTOL * abs(numeric):
        return None
    coarse = central(COARSE_EPS)
    return analytic, numeric, abs(analytic - coarse) <= FD_ATOL + FD_RTOL * abs(coarse)


def gradcheck(call, args: list, wrt: list[int], what: str, *, output_index: int | None = None,
              reference=None) -> None:
    """The worker's gradients of the student's function w.r.t. `args[i]` (i in `wrt`), verified in float64.

    The vjp the worker reports is a claim (a graded cell can replace the engine's code there), so
    here the grader checks it: its output equals a plain forward call's; for random directions d,
    <J^T u, d> equals the central difference of the student's FORWARD, (f(x+eps d) - f(x-eps d)).u
    / 2eps, computed from forward calls by the grader; and, given a trusted `reference` callable,
    the gradients equal the reference's autograd. This catches code whose forward is right but
    whose graph is cut (`.detach()`, `.data`, `torch.no_grad()`, in-place writes).
    """
    label = getattr(call, "_label", what)
    fixed = _float64(list(args))
    plain = output(call(*fixed), output_index, label)
    if plain.dtype != torch.float64:
        raise CheckFailed(f"{label}: float64 inputs gave a {str(plain.dtype).removeprefix('torch.')} "
                          "output; keep the inputs' dtype (no hard-coded dtype=...)")
    plain = plain.detach()
    cotangent = _directions(what + "|u", tuple(plain.shape), 1)[0]
    got = _vjp(call, fixed, wrt, cotangent, output_index, plain, what)
    grads = got.get("input_grads")
    if not isinstance(grads, list) or len(grads) != len(wrt):
        raise CheckFailed(f"backward through {label} did not return gradients for every input")
    grads = [_check_grad_shape(g, fixed[i], f"{what}: gradient w.r.t. input {i}") for g, i in zip(grads, wrt)]

    def forward(full):
        return output(call(*full), output_index, label).detach().to(torch.float64)

    for g, i in zip(grads, wrt):
        for d in _directions(f"{what}|{i}", tuple(fixed[i].shape), N_DIRECTIONS):
            def perturb(direction, step, i=i):
                full = list(fixed)
                full[i] = fixed[i] + step * direction
                return full
            bad = _directional_mismatch(forward, perturb, lambda direction, g=g: (g * direction).sum(), cotangent, d)
            if bad:
                raise CheckFailed(
                    f"{what}: gradcheck in float64 failed for input {i}: along a random direction the gradient "
                    f"your backward pass gives ({bad[0]:.8g}) disagrees with finite differences of your own "
                    f"forward ({bad[1]:.8g}). " + (LOW_PRECISION if bad[2] else
                    "Look for .detach(), .data, torch.no_grad(), in-place writes, or a non-differentiable step."))
    if reference is not None:
        inputs = [fixed[i].clone().requires_grad_(True) for i in wrt]
        full = list(fixed)
        for x, i in zip(inputs, wrt):
            full[i] = x
        with torch.enable_grad():
            ref_out = output(reference(*full), output_index, what)
            expected = torch.autograd.grad((ref_out * cotangent).sum(), inputs, allow_unused=True)
        for g, e, i in zip(grads, expected, wrt):
            e = torch.zeros_like(fixed[i]) if e is None else e
            assert_close(g, e, f"{what}: gradient w.r.t. input {i} (against the reference)", rtol=1e-7, atol=1e-9)


def assert_param_grads(module, ref_module: torch.nn.Module, args: list, what: str, *, rng,
                       output_index: int | None = None) -> None:
    """Gradients w.r.t. every parameter equal the reference's (same weights), in float64; of item
    `output_index` where the module returns a tuple (an RNN layer's outputs and final state).

    The worker's answer is verified twice by the grader: against the reference's autograd, and,
    along a random direction in parameter space, against central differences of the student's own
    forward (parameters set through `load_state_dict`, then restored exactly).
    """
    args = list(args)
    ref_out = output(ref_module(*args), output_index, what)
    plain = output(module(*args), output_index, what).detach()
    cotangent = torch.from_numpy(rng.standard_normal(tuple(ref_out.shape)))
    got = _vjp(module, args, [], cotangent, output_index, plain, what)
    # a parameter the reference's output does not reach (a final state's) has a zero gradient
    named = list(ref_module.named_parameters())
    expected = [torch.zeros_like(p) if g is None else g for (_, p), g in zip(named, torch.autograd.grad(
        (ref_out * cotangent).sum(), [p for _, p in named], allow_unused=True))]
    got_grads = got.get("param_grads", {})
    if not isinstance(got_grads, dict):
        raise CheckFailed(f"{what}: backward did not return parameter gradients")
    checked = {}
    for (name, param), grad in zip(named, expected):
        if name not in got_grads:
            raise CheckFailed(f"{what}: no gradient reached parameter `{name}`; is it used in forward?")
        g = _check_grad_shape(got_grads[name], param, f"{what}: gradient of `{name}`")
        if bool(torch.all(g == 0)) and bool(grad.abs().max() > 0):
            raise CheckFailed(f"{what}: the gradient of `{name}` is all zeros; is `{name}` used in forward?")
        assert_close(g, grad, f"{what}: gradient of `{name}`", rtol=1e-7, atol=1e-9)
        checked[name] = g
    dtype = plain.dtype
    if dtype != torch.float64:
        return  # finite differences need float64; the reference comparison above stands
    original = {name: p.detach().clone() for name, p in named}
    directions = {name: _directions(f"{what}|{name}", tuple(p.shape), 1)[0] for name, p in named}

    def forward(state):
        module.load_state_dict(state, False)
        return output(module(*args), output_index, what).detach().to(torch.float64)

    def perturb(direction, step):
        return {name: (original[name].double() + step * direction[name]).to(dtype) for name in original}

    try:
        bad = _directional_mismatch(forward, perturb, lambda d: sum((checked[n] * d[n]).sum() for n in checked),
                                    cotangent, directions)
    finally:
        module.load_state_dict({name: p.to(dtype) for name, p in original.items()}, False)
    if bad:
        raise CheckFailed(f"{what}: along a random direction in parameter space the parameter gradients "
                          f"({bad[0]:.8g}) disagree with finite differences of your own forward ({bad[1]:.8g})."
                          + (f" {LOW_PRECISION}" if bad[2] else ""))


# ---- properties -------------------------------------------------------------------------------
CAUSAL_ADVICE = " Check the causal mask (True = may attend) and that it is applied before the softmax."


def assert_causal(call, x: torch.Tensor, what: str, *, time_dim: int = 1, positions=None, rng=None,
                  tol: tuple | None = None, vocab: int | None = None, advice: str = CAUSAL_ADVICE) -> None:
    """Changing inputs after position p never changes outputs at positions <= p (within `tol`, (rtol, atol);
    default: the input dtype's). Float inputs move by noise; token ids (`vocab` of them) are each redrawn
    to another id."""
    base, (rtol, atol) = call(x), tol or (None, None)
    T = x.shape[time_dim]
    for p in positions if positions is not None else range(T - 1):
        changed = x.clone()
        index = [slice(None)] * x.dim()
        index[time_dim] = slice(p + 1, None)
        size = tuple(changed[tuple(index)].shape)
        if vocab is not None:  # another id everywhere: id + 1 + (0 .. vocab - 2), mod vocab
            shift = 1 + torch.from_numpy(rng.integers(0, vocab - 1, size))
            changed[tuple(index)] = (changed[tuple(index)] + shift) % vocab
        else:
            noise = rng.standard_normal(size) if rng is not None else 1.0
            changed[tuple(index)] += torch.as_tensor(noise, dtype=x.dtype) * 3
        after = call(changed)
        keep = [slice(None)] * x.dim()
        keep[time_dim] = slice(0, p + 1)
        expected = base[tuple(keep)]
        try:  # tolerance of the input's dtype: the student's output dtype must not loosen it
            assert_close(after[tuple(keep)], expected if vocab is not None else expected.to(x.dtype), "", rtol=rtol,
                         atol=atol)
        except CheckFailed:
            raise CheckFailed(f"{what}: changing the input after position {p} changed the output at positions "
                              f"0..{p}, so position {p} sees the future.{advice}") from None


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


def assert_device_agnostic(call, args: list, what: str, *, kwargs: dict | None = None, device_arg: str | None = None,
                           follows_dtype: bool = True, dtypes: tuple[str, ...] = ("float32", "float64"),
                           seed: int = 0, move_data: bool = True) -> str:
    """No tensor on a hard-coded device or dtype: the call runs on a simulated non-CPU device.

    The simulated device (sandbox/simulated_device.py) carries real values, so `.item()`, `.tolist()`,
    generators and whole training loops run as on a GPU, while a tensor made without `device=` (or
    on "cpu") meets a device tensor and raises as CUDA would. Modules (the call itself, or any
    argument) are copies moved with `.to(device)`, floats are in each of `dtypes`. The grader runs
    the same call the same way on the CPU and requires the same values back (outputs, and the
    weights of every module after the call): so code that behaves differently on a device fails.

    What the probe sees happens inside the student's process, whose code (the engine's included) a
    graded cell can replace, so this only ever FAILS a check: a run that raises, an output on
    another device, a float dtype that does not follow the inputs, values unlike the CPU run's.
    Otherwise it returns a note, never points; a probe that could not run never passes.

    `device_arg` names a keyword argument that says where to create the output (as in
    `causal_mask(T, device=...)`), set to the device in each run; `follows_dtype=False` for a
    function whose float outputs do not come from float inputs; `seed` seeds torch's global
    generator before each run; `move_data=False` moves only the modules, for a training loop, which
    must move its data (kept on the CPU by a caller) to the model's device itself.
    """
    _refuse_if_tampered(call, what)
    kwargs = dict(kwargs or {})

    def on_cpu_as_given(given: list):  # the call with the data's own dtypes, on the CPU (a module made in
        try:  # the student's process may sit elsewhere when grading on a GPU: copies move)
            report = call.on_device(*given, dtype=None, simulated=False, seed=seed, move_data=move_data)
        except StudentError as exc:
            raise CheckFailed(f"{what} could not run on the CPU ({_first_line(str(exc))}).") from None
        return report.get("outputs") if isinstance(report, dict) else None

    if not kwargs:
        _check_real_dtype(on_cpu_as_given(args), args, what, follows_dtype)
        if follows_dtype and "handle" not in getattr(call, "_target", {}) and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.float32 for a in args):
            _check_real_dtype(on_cpu_as_given(_float64(list(args))), _float64(list(args)), what, follows_dtype)
    for dtype in dtypes:
        try:
            on_cpu = call.on_device(*args, kwargs=kwargs, dtype=dtype, simulated=False, device_arg=device_arg,
                                    seed=seed, move_data=move_data)
        except StudentError as exc:
            raise CheckFailed(f"{what} could not run on the CPU in {dtype} ({_first_line(str(exc))}), so it could "
                              "not be compared with a run on another device (a check that cannot run does not "
                              "pass).") from None
        try:
            on_device = call.on_device(*args, kwargs=kwargs, dtype=dtype, simulated=True, device_arg=device_arg,
                                       seed=seed, move_data=move_data)
        except StudentError as exc:
            raise CheckFailed(_device_failure(str(exc), what)) from None
        if not (isinstance(on_cpu, dict) and isinstance(on_device, dict)):
            raise CheckFailed(f"{what}: the device probe gave no readable report, so device independence could "
                              "not be checked (a check that cannot run does not pass).")
        gpu = _grading_device(call).startswith("cuda")  # a real GPU: the grader's word, not the worker's
        for out in _tensor_leaves([on_device.get("outputs"), on_device.get("states")]):
            where = str(getattr(out, "lmgrade_device", ""))
            if where.split(":")[0] != ("cuda" if gpu else DEVICE_TYPE):
                raise CheckFailed(f"{what}: with every input and parameter on a non-CPU device, an output came back "
                                  f"on {where[:40] or 'an unknown device'} (a tensor made without device=, or "
                                  ".cpu()/.to('cpu') inside). Keep outputs on the inputs' device.")
            if follows_dtype and out.is_floating_point() and str(out.dtype).removeprefix("torch.") != dtype:
                raise CheckFailed(f"{what}: with {dtype} inputs and parameters an output was "
                                  f"{str(out.dtype).removeprefix('torch.')}; do not hard-code dtype=... "
                                  "(use dtype=x.dtype or torch.*_like(x)).")
        if gpu:  # a GPU draws other random numbers than the CPU (the probe cannot tell which calls draw) and
            continue  # sums in other orders: its values are the other checks' to judge, against the reference
        problem = _difference(on_cpu.get("outputs"), on_device.get("outputs"), "the returned value") or \
            _difference(on_cpu.get("states"), on_device.get("states"), "the weights after the call")
        if problem:
            raise CheckFailed(f"{what}: on a non-CPU device {problem} differs from the same run on the CPU in "
                              f"{dtype}; code that is right on any device computes the same numbers on both.")
    return (f"{what}: ran on a non-CPU device in {' and '.join(dtypes)}, with the values of a CPU run "
            "(reported by your process: not verified, not scored).")


DEVICE_TYPE = "accel"  # simulated_device.NAME (not imported: that module is the worker's)


def _grading_device(call) -> str:
    """The device the grader started the student's process for ("cpu" when it cannot tell)."""
    student = getattr(call, "_student", None)
    return str(getattr(getattr(student, "_channel", None), "device", "cpu"))


def _device_failure(text: str, what: str) -> str:
    """Why a run on the simulated device failed, in the student's terms."""
    line = _first_line(text)
    detail = line.split(" raised ", 1)[-1]  # the label before it names the device itself
    if "generator" in detail:
        return (f"{what}: on a non-CPU device your code draws with a generator made for another device ({line}). "
                "Make it where the draw happens: torch.Generator(device=x.device), or draw on the CPU and move "
                "the result with .to(x.device).")
    if "device" in detail:
        return (f"{what}: on a non-CPU device your code mixes tensors on different devices ({line}). A tensor "
                "made without device= (torch.zeros/ones/arange/tril/tensor/LongTensor) is on the CPU: create "
                "tensors on the inputs' device (device=x.device, torch.*_like(x), x.new_zeros), and move the "
                "model and the data with .to(device) in a training loop.")
    return (f"{what} could not run on a non-CPU device ({line}). Code that works on any device runs there; a "
            "check that cannot run does not pass.")


def _tensor_leaves(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensor_leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensor_leaves(v)]
    return []


def _difference(cpu, device, where: str) -> str | None:
    """Where two runs' values part (None if nowhere): same structure, equal ints and strings, floats
    equal to within float rounding (the simulated device computes with the CPU's own kernels)."""
    if isinstance(cpu, torch.Tensor) or isinstance(device, torch.Tensor):
        if not (isinstance(cpu, torch.Tensor) and isinstance(device, torch.Tensor)) or cpu.shape != device.shape \
                or cpu.dtype != device.dtype:
            return where
        if cpu.is_floating_point():
            tol = 1e-5 if cpu.dtype in (torch.float32, torch.float16, torch.bfloat16) else 1e-10
            same = torch.allclose(device.double(), cpu.double(), rtol=tol, atol=tol, equal_nan=True)
        else:
            same = torch.equal(cpu, device)
        return None if same else where
    if isinstance(cpu, (list, tuple)):
        if not isinstance(device, (list, tuple)) or len(cpu) != len(device):
            return where
        return next((d for a, b in zip(cpu, device) if (d := _difference(a, b, where))), None)
    if isinstance(cpu, dict):
        if not isinstance(device, dict) or list(cpu) != list(device):
            return where
        return next((d for k in cpu if (d := _difference(cpu[k], device[k], where))), None)
    if isinstance(cpu, float) and isinstance(device, (int, float)):
        return None if abs(cpu - device) <= 1e-5 * max(1.0, abs(cpu)) or (cpu != cpu and device != device) else where
    if isinstance(cpu, Remote) or isinstance(device, Remote):
        return None if type(cpu) is type(device) else where  # an object of the student's: compared by its weights
    return None if cpu == device else where


def _check_real_dtype(value, args: list, what: str, follows_dtype: bool) -> None:
    """Outputs the grader received (their dtype is the data's own) follow the float inputs' dtype."""
    floats = {a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()}
    if not follows_dtype or len(floats) != 1:
        return
    (want,) = floats
    values = value if isinstance(value, (tuple, list)) else [value]
    for out in values:
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.dtype != want:
            raise CheckFailed(f"{what}: with {str(want).removeprefix('torch.')} inputs an output was "
                              f"{str(out.dtype).removeprefix('torch.')}; do not hard-code dtype=... "
                              "(use dtype=x.dtype or torch.*_like(x)).")


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


def student_module(t, cls, args: tuple, state: dict, dtype: torch.dtype, **kwargs):
    """The student's class `cls(*args, **kwargs)` instantiated in its process, with the grader's weights, on
    the grading device.

    Why the grader sets the weights: then the student's output can be compared with a reference or
    a built-in holding exactly the same weights.
    """
    module = cls(*args, **kwargs)
    # Cast before loading: loading float64 weights into float32 parameters would round them.
    module = module.double() if dtype == torch.float64 else module.float()  # dtypes do not cross the wire
    load_weights(t, module, {k: v.to(dtype) for k, v in state.items()}, f"{getattr(cls, '_label', 'the module')}{args}")
    return module.to(t.device)


def load_weights(t, module, state: dict, what: str) -> None:
    """Load the grader's weights into a student's module, matched by parameter name.

    Why not a strict `load_state_dict`: correct code may keep extra buffers or attributes (a
    persistent `positions` table); only the parameters the starter names must match, both ways.
    """
    report = t.student.support("load_weights", module, state).get()
    if not isinstance(report, dict):
        raise CheckFailed(f"{what}: the grader's weights could not be loaded")
    names = ", ".join(f"`{k}`" for k in sorted(state)[:12])
    extra, missing = report.get("parameters_without_weights") or [], report.get("weights_without_parameters") or []
    if missing:
        raise CheckFailed(f"{what} has no parameter `{missing[0]}`: the grader loads its weights by the names "
                          f"the starter gives ({names}); keep those attribute names.")
    if extra:
        raise CheckFailed(f"{what} has a parameter `{extra[0]}` that the specified module does not have (the "
                          f"grader's weights are {names}); a learned tensor the starter does not ask for "
                          "changes the model. A fixed table belongs in a buffer (register_buffer).")


def reference_module(module: torch.nn.Module, state: dict, dtype: torch.dtype) -> torch.nn.Module:
    """A trusted module (the reference's) holding the same weights as `student_module` gave the student."""
    module.load_state_dict(state)
    return module.to(dtype=dtype)


# ---- portable fixtures ------------------------------------------------------------------------
def float32_of(value):
    """`value` with every float64 tensor rounded once to float32 by numpy, not by a torch kernel.

    Why: a float32 public check records its expected value from the reference run in float64 and
    rounded here, so the fixture does not depend on the CPU's float32 kernels (AVX-512, AVX2 and
    NEON sum in different orders and differ by several ulps); between CPUs it can move by one
    float32 ulp at most, where a rounding boundary lies between two float64 results.
    """
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return torch.from_numpy(value.numpy().astype(np.float32)) if value.dtype == torch.float64 else value
    if isinstance(value, (tuple, list)):
        return type(value)(float32_of(v) for v in value)
    if isinstance(value, dict):
        return {k: float32_of(v) for k, v in value.items()}
    return value
