"""A non-CPU device simulated on a CPU-only grader, with real values: the device probe.

Why: code that makes a tensor without `device=` (or with a hard-coded "cpu") works on the CPU and
breaks on a GPU. The `meta` device has no values, so code that reads them (`.item()`, `.tolist()`,
a training loop) could not be probed there, and code could ask whether it was being probed. Here
every tensor on the simulated device is a `SimTensor`: a wrapper that says it lives on `accel:0`
and holds an ordinary CPU tensor. Its operators unwrap, compute on the CPU (the same kernels, so the
values equal a CPU run's), and wrap the result; an operator that mixes it with a CPU tensor of one
dimension or more raises the error CUDA raises. Factories with `device=` the simulated device,
`.to(device)`, `nn.Module.to(device)`, `torch.Generator(device=...)`, `.item()`, `.tolist()` and
`.cpu()` behave as on a GPU. A CPU generator used for a draw on the device (or the other way
round) is refused as CUDA refuses it. `torch.get_default_device()` is untouched.

Everything observed here happens in the student's process: it can only fail a check (trusted code
compares the values the probe returns with a CPU run), never earn points.
"""
from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

NAME = "accel"
DEVICE = None  # torch.device(NAME, 0) once `install` ran
_RealGenerator = torch.Generator
_DATA = torch.Tensor.data  # the `.data` descriptor, whose setter reaches __torch_function__

aten = torch.ops.aten
# Operators that legitimately take CPU tensors beside device ones, as on CUDA: copies between
# devices, and advanced indexing with CPU index tensors (CUDA moves the indices itself).
_CROSS_DEVICE = {aten._to_copy.default, aten.copy_.default, aten.index.Tensor, aten.index_put_.default,
                 aten.index_put.default, aten._index_put_impl_.default, aten._local_scalar_dense.default}


def install() -> torch.device:
    """Name PyTorch's spare backend slot once per process and give it the hooks a device needs.

    Call it before the process's first backward pass (autograd sizes its device queues once) and
    before graded code runs (it also settles torch's lazy dynamo wrappers, see below)."""
    global DEVICE
    if DEVICE is None:
        if torch._C._get_privateuse1_backend_name() != NAME:
            from torch.utils.backend_registration import _setup_privateuseone_for_python_backend
            _setup_privateuseone_for_python_backend(rename=NAME)
        DEVICE = torch.device(NAME, 0)
        _register_backend_kernels()
        settle_dynamo_wrappers()
    return DEVICE


_KERNELS = None  # the torch.library registrations below, kept alive for the process


def _register_backend_kernels() -> None:
    """Kernels of the device's own backend key for what torch builds in C++ with Python dispatch switched off.

    Why: `x[[0, 2]]`, `x[range(n), y]` and `x[:, [0, 1]] = v` turn the Python list into an index
    tensor on x's device inside C++ (`internal_new_from_data`), where no dispatch mode can see it: on
    CUDA this is ordinary code, here it raised "Could not run 'aten::empty_strided' with arguments
    from the 'accel' backend" and blamed the student. These kernels make that tensor a SimTensor and
    copy the values into it, as CUDA's would."""
    global _KERNELS
    lib = torch.library.Library("aten", "IMPL")

    def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
        return SimTensor(torch.empty_strided(size, stride, dtype=dtype, layout=layout, device="cpu"))

    def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        return SimTensor(torch.empty(size, dtype=dtype, layout=layout, device="cpu", memory_format=memory_format))

    def copy_(self, src, non_blocking=False):
        _unwrap(self).copy_(_unwrap(src))
        return self

    def copy_from(self, dst, non_blocking=False):
        _unwrap(dst).copy_(_unwrap(self))
        return dst

    for name, kernel in (("empty_strided", empty_strided), ("empty.memory_format", empty), ("copy_", copy_),
                         ("_copy_from", copy_from)):
        lib.impl(name, kernel, "PrivateUse1")
    _KERNELS = lib


def settle_dynamo_wrappers() -> None:
    """Resolve torch's lazy `torch._dynamo.disable` wrappers to the functions they wrap, at once.

    Why: torch wraps some functions (`Optimizer.zero_grad`, every `__torch_dispatch__` of a dispatch
    mode, Python meta kernels) so that their first call imports `torch._dynamo` (and sympy: most of
    a second, and code generated at run time, which the worker's guard refuses once graded code
    runs) only to mark them "never traced". Graded code may not compile, so nothing in a worker is
    traced and each function is its own disabled form. Runs in grader code, before any graded cell.
    """
    import gc
    import types
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and obj.__code__.co_qualname == "_disable_dynamo.<locals>.inner":
            wrapped = obj.__closure__[obj.__code__.co_freevars.index("fn")].cell_contents
            if getattr(wrapped, "__dynamo_disable", None) is None:
                setattr(wrapped, "__dynamo_disable", wrapped)


def is_simulated(device) -> bool:
    if device is None:
        return False
    try:
        return torch.device(device).type == NAME
    except (RuntimeError, TypeError):
        return False


def _mixed(where: str) -> RuntimeError:
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                        f"{NAME}:0 and cpu! ({where})")


class SimTensor(torch.Tensor):
    """A tensor on the simulated device; `_cpu` holds its values."""

    @staticmethod
    def __new__(cls, data: torch.Tensor):
        # the wrapper is an inference tensor exactly when its values are: under inference_mode, a view of a normal
        # tensor (a registered buffer sliced) is a normal tensor, whose version counter autograd then shares
        with torch.inference_mode(data.is_inference()) if data.is_inference() != torch.is_inference_mode_enabled() \
                else contextlib.nullcontext():
            t = torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(),
                                                    storage_offset=data.storage_offset(), dtype=data.dtype,
                                                    layout=data.layout, device=DEVICE,
                                                    requires_grad=data.requires_grad)
        t._cpu = data
        return t

    def __repr__(self, *, tensor_contents=None):
        text = repr(self._cpu.detach())
        return text[:-1] + f", device='{NAME}:0')"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.tolist:
            return args[0]._cpu.tolist()
        if getattr(func, "__self__", None) is _DATA and func.__name__ == "__set__" and isinstance(args[1], SimTensor):
            with torch._C.DisableTorchFunctionSubclass():
                func(*args)  # shape and dtype
            args[0]._cpu = args[1]._cpu  # `p.data = new`: the values too, shared as set_data shares storage
            return None
        if func in (torch.Tensor.numpy, torch.Tensor.__array__):
            raise TypeError(f"can't convert {NAME}:0 device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first.")
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})


def _wrap(value):
    return SimTensor(value) if type(value) is torch.Tensor else value


def _run(func, args, kwargs):
    """One operator with simulated tensors among its arguments, or `device=` the simulated device."""
    flat, _ = tree_flatten((args, kwargs))
    on_sim = any(isinstance(a, SimTensor) for a in flat)
    if on_sim and func not in _CROSS_DEVICE:
        for a in flat:
            if type(a) is torch.Tensor and a.device.type == "cpu" and a.dim() > 0:
                raise _mixed(str(func.overloadpacket.__name__))
    target = kwargs.get("device")
    made_here = is_simulated(target)
    if made_here:
        kwargs = {**kwargs, "device": torch.device("cpu")}
    out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    if func is aten._local_scalar_dense.default:
        return out
    if func._schema.is_mutable and args and isinstance(args[0], torch.Tensor) and \
            func.overloadpacket.__name__.endswith("_"):
        return args[0]  # an in-place operator returns the tensor it changed (a CPU one for cpu.copy_(device))
    if made_here or (on_sim and not (target is not None and torch.device(target).type == "cpu")):
        return tree_map(_wrap, out)
    return out


def _unwrap(value):
    return value._cpu if isinstance(value, SimTensor) else value


class _Dispatch(TorchDispatchMode):
    """Operators that make a tensor on the simulated device from CPU data (`.to(device)`, factories)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if is_simulated(kwargs.get("device")) or any(isinstance(a, SimTensor) for a in tree_flatten(args)[0]):
            return _run(func, args, kwargs)
        return func(*args, **kwargs)


class _Functions(TorchFunctionMode):
    """Python-level factories that never reach the dispatcher with `device=` (torch.tensor and its
    kin build on the CPU and copy), and the device of a generator against the draw it serves."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        generator = kwargs.get("generator")
        if generator is not None:
            _check_generator(func, generator, args, kwargs)
        if is_simulated(kwargs.get("device")) and func in _DIRECT_FACTORIES:
            return tree_map(_wrap, func(*args, **{**kwargs, "device": "cpu"}))
        if func is torch.Tensor.new_tensor and isinstance(args[0], SimTensor) and kwargs.get("device") is None:
            return _wrap(func(args[0]._cpu, *args[1:], **kwargs))
        return func(*args, **kwargs)


_DIRECT_FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray, torch.Tensor.new_tensor, torch.sparse_coo_tensor}


def _check_generator(func, generator, args, kwargs) -> None:
    tensors = [a for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)]
    if tensors:
        sim = isinstance(tensors[0], SimTensor)
    else:
        sim = is_simulated(kwargs.get("device"))
    gen_sim = isinstance(generator, Generator) and generator._simulated
    if sim != gen_sim:
        want, got = (NAME, "cpu") if sim else ("cpu", NAME)
        raise RuntimeError(f"Expected a '{want}' device type for generator but found '{got}'")


class Generator(_RealGenerator):
    """`torch.Generator` while the probe runs: one made for the simulated device draws the CPU's
    numbers (so values equal a CPU run's) and reports the simulated device."""

    def __new__(cls, device=None):
        simulated = is_simulated(device)
        obj = super().__new__(cls, "cpu" if simulated or device is None else device)
        obj._simulated = simulated
        return obj

    @property
    def device(self):
        return DEVICE if self._simulated else _RealGenerator.device.__get__(self)


@contextlib.contextmanager
def active(namespace: dict | None = None):
    """The simulated device usable for the duration: modes, a device-aware `torch.Generator` (also
    where `namespace`, the graded cells' globals, bound it by `from torch import Generator`), and
    `nn.Module.to` keeping each parameter's identity (as `set_data` does on a real GPU, so an
    optimizer made before the move still holds the model's parameters)."""
    install()
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    cells = namespace if namespace is not None else {}
    names = [k for k, v in list(cells.items()) if v is _RealGenerator]
    torch.Generator = Generator
    for k in names:
        cells[k] = Generator
    try:
        with _Dispatch(), _Functions():
            yield DEVICE
    finally:
        torch.Generator = _RealGenerator
        for k in names:
            cells[k] = _RealGenerator
        torch.__future__.set_swap_module_params_on_conversion(swap)


def to_device(value, device, dtype: torch.dtype | None = None, *, modules_only: bool = False):
    """`value` with its tensors (and the parameters of copies of its modules) on `device`, floats in
    `dtype`; containers are rebuilt, modules are deep copies (the caller's objects stay as they were).
    With `modules_only`, tensors outside modules stay where they are, as data a caller keeps on the
    CPU beside a model on a GPU (a training loop must move what it feeds the model)."""
    import copy
    if isinstance(value, torch.nn.Module):
        module = copy.deepcopy(value)
        return module.to(device=device, dtype=dtype) if dtype is not None else module.to(device)
    if isinstance(value, torch.Tensor):
        if modules_only:
            return value
        if dtype is not None and value.is_floating_point():
            return value.to(device, dtype=dtype)
        return value.to(device)
    if type(value) in (list, tuple):
        return type(value)(to_device(v, device, dtype, modules_only=modules_only) for v in value)
    if type(value) is dict:
        return {k: to_device(v, device, dtype, modules_only=modules_only) for k, v in value.items()}
    return value
