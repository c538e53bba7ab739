"""call_pure and call_twice: side effects and non-repeatable results are caught, pure code passes."""
import types

import numpy as np
import pytest
import torch

from autograder.checking.purity import call_pure, call_twice, first_difference
from autograder.checking.remote import InProcessChannel, Student
from autograder.errors import CheckFailed

CODE = '''
import random
import numpy as np
import torch

def normalize_copy(x):
    return x / x.sum()

def grad_norm_flagging_input(x):
    x.requires_grad_()
    return (x ** 2).sum().detach()

def grad_norm_on_a_copy(x):
    x = x.detach().requires_grad_()
    return (x ** 2).sum().detach()

def normalize_in_place(x):
    x /= x.sum()
    return x

def sorted_copy(words):
    return sorted(words)

def sort_in_place(words):
    words.sort()
    return words

def add_positions(x, pos):
    x += pos
    return x

def add_positions_copy(x, pos):
    return x + pos

def count_into(counts, words):
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return dict(counts)

def masked(scores, mask=None):
    scores.masked_fill_(~mask, float("-inf"))
    return scores

def noisy(x):
    return x + random.random()

def pure_noisy(x, seed=0):
    return x + random.Random(seed).random()
'''


@pytest.fixture(scope="module")
def student():
    module = types.ModuleType("submission")
    exec(CODE, module.__dict__)
    return Student(InProcessChannel(module))


def test_pure_functions_pass_and_return_their_result(student):
    x = np.array([1.0, 3.0])
    np.testing.assert_allclose(call_pure(student.normalize_copy, x), [0.25, 0.75])
    assert call_pure(student.sorted_copy, ["b", "a"]) == ["a", "b"]
    t = torch.arange(6.0).reshape(2, 3)
    assert torch.equal(call_pure(student.add_positions_copy, t, torch.ones(3)), t + 1)
    assert float(call_pure(student.grad_norm_on_a_copy, torch.ones(3))) == 3.0  # a new leaf: the caller's is left alone


@pytest.mark.parametrize("name, args, kwargs, needle", [
    ("normalize_in_place", (np.array([1.0, 3.0]),), {}, "argument 1"),
    ("sort_in_place", (["b", "a"],), {}, "argument 1"),
    ("add_positions", (torch.zeros(2, 3), torch.ones(3)), {}, "argument 1"),
    ("count_into", ({}, ["a", "a"]), {}, "keys changed"),
    ("grad_norm_flagging_input", (torch.ones(3),), {}, "requires_grad False became True"),
    ("masked", (torch.zeros(2, 2),), {"mask": torch.tensor([[True, False], [True, True]])}, "argument 1"),
])
def test_mutation_is_caught_and_named(student, name, args, kwargs, needle):
    with pytest.raises(CheckFailed) as info:
        call_pure(getattr(student, name), *args, **kwargs)
    assert needle in str(info.value) and "must not" in str(info.value) or "not modified" in str(info.value)
    assert needle in str(info.value)


def test_call_twice(student):
    assert call_twice(student.pure_noisy, 1.0) == call_twice(student.pure_noisy, 1.0)
    with pytest.raises(CheckFailed, match="randomness"):
        call_twice(student.noisy, 1.0)


def test_first_difference_describes_the_change():
    assert first_difference([1, 2], [1, 2]) is None
    assert first_difference(np.array([np.nan]), np.array([np.nan])) is None
    assert "element (1,)" in first_difference(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    assert "dtype" in first_difference(np.zeros(2), np.zeros(2, dtype=np.float32))
    assert "list of 2 became list of 3" in first_difference([1, 2], [1, 2, 3])
    assert "1 became 2" in first_difference({"a": 1}, {"a": 2})
