"""The shared torch check primitives fail the code they are meant to fail and pass correct code.

Student code here runs in this process through `InProcessChannel` (same bytes as over the pipe).
"""
import types

import numpy as np
import pytest
import torch

from autograder.checking.remote import InProcessChannel, Student
from autograder.checking.torch_checks import (assert_causal, assert_device_agnostic, assert_global_generator_untouched,
                                     assert_permutation_equivariant, gradcheck)
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

def refuses_both(x):
    if x.is_meta or torch.get_default_device().type == "meta":
        raise ValueError("no")
    return x * 2

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
def test_a_fixed_device_is_caught_when_the_code_cannot_run_on_meta(student, name):
    with pytest.raises(CheckFailed, match="device"):
        assert_device_agnostic(getattr(student, name), [x64(2, 3)], name)


def test_code_that_runs_in_neither_probe_fails_the_check(student):
    """A check that could not run never passes."""
    with pytest.raises(CheckFailed, match="could not run on the meta device"):
        assert_device_agnostic(student.refuses_both, [x64(2, 3)], "refuses_both")


def test_the_global_generator_check_catches_a_reseed_and_a_draw_without_generator(student):
    for name in ("reseeds_global", "draws_global"):
        with pytest.raises(CheckFailed, match="global random generator"):
            assert_global_generator_untouched(student, lambda: getattr(student, name)(3), name, seed=11)
    assert_global_generator_untouched(student, lambda: student.own_generator(3), "own_generator", seed=11)


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
