"""The shared torch check primitives fail the code they are meant to fail and pass correct code.

Student code here runs in this process through `InProcessChannel` (same bytes as over the pipe).
"""
import types

import numpy as np
import pytest
import torch

from autograder.checking.remote import InProcessChannel, Student
from autograder.checking.purity import assert_global_generators_untouched
from autograder.checking.torch_checks import (assert_causal, assert_device_agnostic, assert_permutation_equivariant,
                                              gradcheck)
from autograder.errors import CheckFailed

CODE = '''
import torch

def scale_rows(x):
    return x * torch.arange(1, x.size(-1) + 1, device=x.device, dtype=x.dtype)

def scale_rows_cpu(x):
    return x * torch.arange(1, x.size(-1) + 1, dtype=x.dtype)

def matmul_cpu(x):  # matmul does not complain on meta, the watch does
    return x @ torch.eye(x.size(-1), dtype=x.dtype)

def float32_out(x):
    return torch.zeros(x.shape) + x.float()

def data_dependent(x):
    return x * float(x.abs().max().item())

def reads_values_fixed_device(x):
    return x * len(x.tolist()) + torch.zeros(x.shape[-1])

def refuses_meta_fixed_device(x):
    if x.is_meta:
        raise ValueError("no")
    return x * torch.arange(1, x.size(-1) + 1, dtype=x.dtype)

def refuses_devices(x):
    if x.device.type != "cpu":
        raise ValueError("no")
    return x * 2

def sums_differently_off_the_cpu(x):  # runs everywhere, computes something else on a device
    return x * 2 if x.device.type == "cpu" else x * 3

def default_device_sampler(x, seed):  # issue 30: device= only while the default device is meta
    g = torch.Generator().manual_seed(seed)
    if torch.get_default_device().type == "meta":
        return x + torch.rand(x.shape, generator=g, device=x.device)
    return x + torch.rand(x.shape, generator=g)

def gumbel_max(x, seed):  # uniforms from a seeded CPU generator, moved to the logits' device
    u = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype).to(x.device)
    return (x - torch.log(-torch.log(u))).argmax(-1)

def device_generator(x, seed):
    g = torch.Generator(device=x.device).manual_seed(seed)
    return torch.multinomial(torch.softmax(x, -1), 2, generator=g)

from torch import Generator as ImportedGenerator

def imported_generator(x, seed):  # the class bound in the cell at load time
    g = ImportedGenerator(device=x.device).manual_seed(seed)
    return torch.multinomial(torch.softmax(x, -1), 2, generator=g)

def cpu_generator_for_device_draws(x, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.multinomial(torch.softmax(x, -1), 2, generator=g)

def make_linear():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2).double()

def train_steps(model, x, y, steps):  # .item() in the loop, model and data already placed by the caller
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses

def jittered(x):  # Python's own generator: the same draws in the CPU run and the device run
    import random
    return x + random.random()

def train_steps_cpu_ones(model, x, y, steps):  # a weight vector made without device=
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = (((model(x) - y) ** 2) * torch.ones(y.shape[-1])).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()

def reseeds_global(seed):
    torch.manual_seed(seed)
    return torch.rand(2)

def draws_global(seed):
    return torch.rand(2) + seed

def own_generator(seed):
    return torch.rand(2, generator=torch.Generator().manual_seed(seed))

def detached_square(x):
    return x.detach() ** 2 + x

def square(x):
    return x ** 2

def square_in_float32(x):  # right gradient, float32 arithmetic inside
    return (x.float() ** 2).to(x.dtype)

def prefix_mean(x):  # causal: position t averages positions 0..t
    return x.cumsum(1) / torch.arange(1, x.size(1) + 1, dtype=x.dtype)[:, None]

def total_mean(x):  # not causal
    return x.mean(1, keepdim=True).expand_as(x)
'''


@pytest.fixture(scope="module")
def student():
    module = types.ModuleType("submission")
    exec(CODE, module.__dict__)
    return Student(InProcessChannel(module))


def x64(*shape):
    return torch.from_numpy(np.random.default_rng(0).standard_normal(shape))


def test_device_agnostic_code_passes_with_a_note_that_earns_nothing(student):
    note = assert_device_agnostic(student.scale_rows, [x64(2, 3)], "scale_rows")
    assert "not verified, not scored" in note


@pytest.mark.parametrize("name", ["scale_rows_cpu", "matmul_cpu"])
def test_a_tensor_on_a_fixed_device_fails(student, name):
    with pytest.raises(CheckFailed, match="device"):
        assert_device_agnostic(getattr(student, name), [x64(2, 3)], name)


def test_a_fixed_dtype_fails(student):
    with pytest.raises(CheckFailed, match="float32"):
        assert_device_agnostic(student.float32_out, [x64(2, 3)], "float32_out")


def test_code_that_reads_values_is_probed_with_its_data_and_passes(student):
    """`.item()`/`.tolist()` cannot run on meta; the second probe keeps the data on the CPU."""
    assert "not verified" in assert_device_agnostic(student.data_dependent, [x64(2, 3)], "data_dependent")


@pytest.mark.parametrize("name", ["reads_values_fixed_device", "refuses_meta_fixed_device"])
def test_a_fixed_device_is_caught_when_the_code_cannot_run_on_meta_either(student, name):
    with pytest.raises(CheckFailed, match="device"):
        assert_device_agnostic(getattr(student, name), [x64(2, 3)], name)


def test_code_that_refuses_to_run_on_a_device_fails_the_check(student):
    """A check that could not run never passes."""
    with pytest.raises(CheckFailed, match="could not run on a non-CPU device"):
        assert_device_agnostic(student.refuses_devices, [x64(2, 3)], "refuses_devices")


def test_values_that_differ_from_the_cpu_run_fail(student):
    with pytest.raises(CheckFailed, match="differs from the same run on the CPU"):
        assert_device_agnostic(student.sums_differently_off_the_cpu, [x64(2, 3)], "sums_differently_off_the_cpu")


def test_a_sampler_that_passes_device_only_under_a_meta_default_fails(student):
    with pytest.raises(CheckFailed, match="mixes tensors on different devices"):
        assert_device_agnostic(student.default_device_sampler, [x64(2, 3), 5], "default_device_sampler")


def test_samplers_right_on_a_gpu_pass(student):
    """Gumbel-max from a CPU generator moved with .to(x.device), and a generator made on the device
    (also by a `Generator` imported from torch when the cell loaded)."""
    for name in ("gumbel_max", "device_generator", "imported_generator"):
        assert_device_agnostic(getattr(student, name), [x64(4, 6), 5], name, follows_dtype=False)


def test_draws_from_python_s_generator_are_the_same_in_both_runs(student):
    assert_device_agnostic(student.jittered, [x64(2, 3)], "jittered")


def test_a_cpu_generator_drawing_for_device_tensors_fails(student):
    with pytest.raises(CheckFailed, match="generator made for another device"):
        assert_device_agnostic(student.cpu_generator_for_device_draws, [x64(4, 6), 5], "cpu_generator_for_device_draws",
                               follows_dtype=False)


@pytest.fixture(scope="module")
def linear(student):
    return student.make_linear()


def test_a_training_loop_with_item_runs_on_the_device(student, linear):
    note = assert_device_agnostic(student.train_steps, [linear, x64(5, 3), x64(5, 2), 3], "train_steps",
                                  follows_dtype=False, dtypes=("float64",))
    assert "not verified" in note


def test_a_training_loop_with_a_cpu_tensor_fails(student, linear):
    with pytest.raises(CheckFailed, match="mixes tensors on different devices"):
        assert_device_agnostic(student.train_steps_cpu_ones, [linear, x64(5, 3), x64(5, 2), 3], "train_steps_cpu_ones",
                               follows_dtype=False, dtypes=("float64",))


def test_the_global_generator_check_catches_a_reseed_and_a_draw_without_generator(student):
    for name in ("reseeds_global", "draws_global"):
        with pytest.raises(CheckFailed, match="global random generator"):
            assert_global_generators_untouched(student, lambda: getattr(student, name)(3), name, seed=11)
    assert_global_generators_untouched(student, lambda: student.own_generator(3), "own_generator", seed=11)


def test_gradcheck_passes_autograd_and_catches_a_cut_graph(student):
    gradcheck(student.square, [x64(2, 3)], [0], "square")
    with pytest.raises(CheckFailed, match="gradcheck") as info:
        gradcheck(student.detached_square, [x64(2, 3)], [0], "detached_square")
    assert ".detach()" in str(info.value) and "lower precision" not in str(info.value)


def test_a_forward_in_float32_inside_is_told_about_precision_not_detach(student):
    with pytest.raises(CheckFailed, match="gradcheck") as info:
        gradcheck(student.square_in_float32, [x64(4, 5)], [0], "square_in_float32")
    assert "lower precision than float64" in str(info.value) and ".detach()" not in str(info.value)


def test_causality_by_perturbation(student):
    rng = np.random.default_rng(1)
    assert_causal(lambda x: student.prefix_mean(x), x64(2, 5, 3), "prefix_mean", rng=rng)
    with pytest.raises(CheckFailed, match="sees the future"):
        assert_causal(lambda x: student.total_mean(x), x64(2, 5, 3), "total_mean", rng=rng)


def test_causality_of_token_ids_redraws_every_later_id():
    """Token ids are redrawn to another id (never the same one), so a lookup that reads the last token fails at
    every position, and a running count of each id's earlier occurrences passes."""
    rng, table = np.random.default_rng(2), torch.randn(7, 3, dtype=torch.float64)
    ids = torch.from_numpy(rng.integers(0, 7, (2, 6)))
    assert_causal(lambda x: table[x].cumsum(1), ids, "prefix sums", rng=rng, vocab=7)
    with pytest.raises(CheckFailed, match="position 4 sees the future"):
        assert_causal(lambda x: table[x] + table[x[:, -1:]], ids, "last token", rng=rng, vocab=7, positions=(4,))


def test_permutation_equivariance(student):
    rng = np.random.default_rng(2)
    assert_permutation_equivariant(lambda x: student.square(x), x64(2, 6, 3), "square", rng=rng)
    with pytest.raises(CheckFailed, match="permuting"):
        assert_permutation_equivariant(lambda x: student.prefix_mean(x), x64(2, 6, 3), "prefix_mean", rng=rng)


def test_gradcheck_against_a_reference_catches_a_consistent_but_wrong_function(student):
    x = x64(2, 3)
    gradcheck(student.square, [x], [0], "square", reference=lambda v: v ** 2)
    gradcheck(student.prefix_mean, [x64(2, 4, 3)], [0], "prefix_mean")  # consistent with its own forward
    with pytest.raises(CheckFailed, match="against the reference"):
        gradcheck(student.prefix_mean, [x64(2, 4, 3)], [0], "prefix_mean",
                  reference=lambda v: v.mean(1, keepdim=True).expand_as(v))


def test_a_real_float32_output_fails_the_dtype_probe_whatever_meta_says(student):
    with pytest.raises(CheckFailed, match="float32"):  # seen by the grader in the real call's output
        assert_device_agnostic(student.float32_out, [x64(2, 3)], "float32_out")



class _ProbedOnAGpu:
    """A student's call as the device probe sees it when the grader started the worker for `device`:
    the CPU run gives `cpu`, the device run `gpu` (each marked with the device it came from)."""

    def __init__(self, device: str, cpu, gpu):
        self._student = types.SimpleNamespace(_channel=types.SimpleNamespace(device=device))
        self._target, self.cpu, self.gpu = {}, cpu, gpu

    def on_device(self, *args, simulated=True, dtype="float32", **_):
        value = (self.gpu if simulated else self.cpu).to(getattr(torch, dtype) if dtype else args[0].dtype)
        on_gpu = self._student._channel.device.startswith("cuda")
        value.lmgrade_device = ("cuda:0" if on_gpu else "accel:0") if simulated else "cpu"
        return {"outputs": value, "states": []}


def test_on_a_gpu_the_probe_judges_placement_and_dtype_and_leaves_values_to_the_other_checks():
    """The GPU branch of the device probe, chosen by the device the grader started the worker for (never by
    the worker's report): a GPU draws other random numbers and sums in other orders, so values differ from
    the CPU run's there for correct code; on the simulated device, which uses the CPU's kernels, they may not."""
    x = torch.linspace(-1, 1, 6)
    other = x + 0.1  # what a GPU's generator could draw instead
    assert_device_agnostic(_ProbedOnAGpu("cuda", x, other), [x], "f(x)", dtypes=("float32",))
    with pytest.raises(CheckFailed, match="differs from the same run on the CPU"):
        assert_device_agnostic(_ProbedOnAGpu("cpu", x, other), [x], "f(x)", dtypes=("float32",))
    made_on_the_cpu = _ProbedOnAGpu("cuda", x, other)
    made_on_the_cpu.on_device = lambda *a, dtype="float32", **k: {  # a CPU tensor back, no device named
        "outputs": a[0].clone().to(getattr(torch, dtype) if dtype else a[0].dtype), "states": []}
    with pytest.raises(CheckFailed, match="an output came back on"):
        assert_device_agnostic(made_on_the_cpu, [x], "f(x)", dtypes=("float32",))
    in_float32 = _ProbedOnAGpu("cuda", x, other)  # float64 asked, float32 given back
    in_float32.on_device = lambda *a, simulated=True, dtype="float32", **k: _ProbedOnAGpu("cuda", x, other).on_device(
        *a, simulated=simulated, dtype="float32" if simulated else dtype, **k)
    with pytest.raises(CheckFailed, match="an output was float32"):
        assert_device_agnostic(in_float32, [x], "f(x)", dtypes=("float64",))
