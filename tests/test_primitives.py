"""The check primitives every assignment uses: comparisons, gradients, perplexity thresholds."""
import math

import numpy as np
import pytest
import torch

from autograder.checking.compare import as_bool, assert_close, assert_dtype, assert_equal, assert_finite, assert_shape, parts
from autograder.checking.gradients import assert_gradient, finite_difference, relative_error
from autograder.checking.perplexity import assert_perplexity, perplexity_from_logprobs
from autograder.checking.remote import Student
from autograder.errors import CheckFailed
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_assert_close_reports_worst_index_and_errors():
    expected = np.arange(12, dtype=np.float64).reshape(3, 4)
    got = expected.copy()
    got[2, 1] += 0.5
    got[0, 3] += 0.01
    message = failure(assert_close, got, expected, "f(x)")
    assert "2 of 12" in message and "(2, 1)" in message and "expected 9, got 9.5" in message
    assert "Max abs error 0.5" in message


def test_tolerances_follow_the_expected_dtype_never_the_returned_one():
    x = torch.randn(5, 7, dtype=torch.float64)
    noisy = x + 1e-7 * torch.randn_like(x)
    assert_close(noisy.float(), x.float(), "float32 result")  # float32 rounding is fine where float32 is expected
    assert "differ" in failure(assert_close, x + 1e-5, x, "float64 result")  # not where float64 is
    assert "differ" in failure(assert_close, noisy.float(), x, "float32 where float64 is expected")
    # returning float16 loosens nothing: float32 expected keeps float32's tolerance
    message = failure(assert_close, x.half(), x.float(), "float16 result")
    assert "rtol=1.3e-06" in message and "float16 where float32 was expected" in message
    assert_close(noisy.float(), x, "explicit tolerance", rtol=1e-5, atol=1e-5)  # the check may choose


def test_messages_show_enough_digits_name_the_item_and_never_divide_by_zero():
    message = failure(assert_close, np.array([0.1194031, 2.0]), np.array([0.1194035, 2.0]), "p(w)",
                      labels=["('the', 'cat')", "x"])
    assert "expected 0.1194035, got 0.1194031" in message and "('the', 'cat')" in message
    # an error of float32 size, but 0.1194031 is no float32 number: not blamed on float32 (test_messages.py)
    assert "float32" not in message
    message = failure(assert_close, np.array([1e-3, 1.0]), np.array([0.0, 1.0]), "f")
    assert "expected 0" in message and "no relative error" in message and "e+" not in message
    assert "computed in float32" not in failure(assert_close, np.array([1.5]), np.array([1.0]), "f")
    assert "NaN" in failure(assert_close, np.array([np.nan]), np.array([0.0]), "f", labels=lambda i: "w")


def test_shape_nan_and_finite_diagnostics():
    assert "shape (4, 3)" in failure(assert_close, np.zeros((3, 4)), np.zeros((4, 3)), "f")
    assert "NaN" in failure(assert_close, np.array([1.0, np.nan]), np.array([1.0, 2.0]), "f")
    assert_close(np.array([np.nan, np.inf]), np.array([np.nan, np.inf]), "matching specials")
    assert "infinite" in failure(assert_finite, np.array([0.0, -np.inf]), "softmax(x)")
    assert "expected shape" in failure(assert_shape, torch.zeros(2, 3), (3, 2), "h")
    assert "expected dtype float64, got float32" in failure(assert_dtype, torch.zeros(2), "float64", "h")
    assert_dtype(np.zeros(2, dtype=np.float32), "float32", "h")


def test_assert_equal_finds_the_first_difference():
    assert "missing key" in failure(assert_equal, {("a",): 1}, {("a",): 1, ("b",): 2}, "counts")
    assert "at [('a',)]" in failure(assert_equal, {("a",): 1}, {("a",): 2}, "counts")
    assert "at [1]" in failure(assert_equal, ["x", "y"], ["x", "z"], "tokens")
    assert "length 3" in failure(assert_equal, ["x"], ["x", "y", "z"], "tokens")
    assert "1 missing" in failure(assert_equal, {"a"}, {"a", "b"}, "vocab")
    assert "expected int" in failure(assert_equal, "1", 1, "n")
    assert_equal({"a": [1, (2, 3)]}, {"a": [1, (2, 3)]}, "same")


def softmax_sum_sq(x):
    e = np.exp(x - x.max())
    return float(((e / e.sum()) ** 2).sum())


def test_finite_differences_match_torch_autograd_in_float64():
    x = np.random.default_rng(0).normal(size=6)
    t = torch.tensor(x, requires_grad=True)
    (torch.softmax(t, 0) ** 2).sum().backward()
    numeric = finite_difference(softmax_sum_sq, x)
    assert relative_error(numeric, t.grad.numpy()) < 1e-7
    assert_gradient(numeric, t.grad.numpy(), "d/dx", rtol=1e-6, atol=1e-9)


def test_wrong_and_all_zero_gradients_are_caught():
    grad = np.array([0.1, -0.2, 0.3])
    assert "all zeros" in failure(assert_gradient, np.zeros(3), grad, "dL/dW")
    assert "differ" in failure(assert_gradient, grad.T * 1.01, grad, "dL/dW")


STUDENT_TORCH = '''
import torch

def scaled_tanh(x, w):
    return torch.tanh(x @ w) * 2.0

def tanh_wrong_grad(x, w):
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return torch.tanh(a)
        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * (1 - torch.tanh(a))  # should be 1 - tanh(a)**2
    return F.apply(x @ w) * 2.0
'''


def test_student_autograd_is_compared_with_reference_in_float64():
    x = torch.randn(3, 4, dtype=torch.float64)
    w = torch.randn(4, 5, dtype=torch.float64)
    cot = torch.randn(3, 5, dtype=torch.float64)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    ((torch.tanh(xr @ wr) * 2.0) * cot).sum().backward()
    cells = [{"index": 0, "number": 1, "source": STUDENT_TORCH}]
    with Sandbox(cells, import_torch=True, limits=Limits(call_timeout=30)) as box:
        student = Student(box, timeout=30)
        good = student.scaled_tanh.vjp([x, w], wrt=[0, 1], cotangent=cot)
        assert good["output"].dtype == torch.float64
        assert_gradient(good["input_grads"][0], xr.grad, "dL/dx")
        assert_gradient(good["input_grads"][1], wr.grad, "dL/dw")
        bad = student.tanh_wrong_grad.vjp([x, w], wrt=[0, 1], cotangent=cot)
        assert_close(bad["output"], torch.tanh(x @ w) * 2.0, "forward is right")
        assert "differ" in failure(assert_gradient, bad["input_grads"][1], wr.grad, "dL/dw")


def test_perplexity_threshold_and_floor():
    assert perplexity_from_logprobs(10 * math.log(0.1), 10) == pytest.approx(10.0)
    assert perplexity_from_logprobs(-math.inf, 3) == math.inf
    assert assert_perplexity(11.0, 12.0, "model", floor=9.0).endswith("within the threshold.")
    assert "worse than expected" in failure(assert_perplexity, 13.0, 12.0, "model")
    assert "entropy floor" in failure(assert_perplexity, 8.0, 12.0, "model", floor=9.0)
    assert "probability 0" in failure(assert_perplexity, math.inf, 12.0, "model")


@pytest.mark.gpu
def test_worker_places_tensors_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cells = [{"index": 0, "number": 1, "source": "def where(x):\n    return str(x.device), x * 2\n"}]
    with Sandbox(cells, device="cuda", import_torch=True) as box:
        device, doubled = Student(box).where(torch.ones(3))
    assert device.startswith("cuda") and doubled.lmgrade_device.startswith("cuda")
    assert_close(doubled, torch.full((3,), 2.0), "x * 2 on cuda")


def test_parts_and_as_bool_accept_what_they_should_and_say_what_was_wrong():
    assert parts((1, 2), 2, "f()") == [1, 2] and parts([1, 2], 2, "f()") == [1, 2]
    with pytest.raises(CheckFailed, match="expected a tuple of 2 values, got tuple of length 3"):
        parts((1, 2, 3), 2, "f()")
    with pytest.raises(CheckFailed, match="got ndarray"):
        parts(np.zeros(2), 2, "f()")
    assert as_bool(True, "ok") is True and as_bool(np.bool_(False), "ok") is False
    assert as_bool(np.array(True), "ok") is True
    for wrong in (1, 0.0, np.array([True, False]), "True"):
        with pytest.raises(CheckFailed, match="expected a bool"):
            as_bool(wrong, "ok")


def test_a_value_that_is_not_numbers_names_the_call():
    for compare in (lambda: assert_close("oops", 1.0, "f(x)"), lambda: assert_shape(None, (2,), "f(x)"),
                    lambda: assert_finite({"a": 1}, "f(x)")):
        with pytest.raises(CheckFailed, match=r"^f\(x\): expected a number or an array, got"):
            compare()
