"""Failure messages point at the cause: each diagnosis fires on the bug it names, and stays silent on
a near miss that only looks like it (DESIGN.md, "Failure messages help a student find the bug")."""
import re

import numpy as np
import pytest
import torch

from autograder.authoring import assignments, build
from autograder.checking.checks import Context, seed_everything
from autograder.checking.compare import (ROUNDING_BAND, assert_close, assert_finite, explain_library_error, library_advice,
                                masked_rows_cause)
from autograder.checking.remote import InProcessChannel, Student, StudentError
from autograder.errors import CheckFailed
from autograder.grading.results import format_table
from autograder.grading.runner import CheckResult, Report
from autograder.sandbox.extract import Cell
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits
from tests.helpers import edited_solution

FLOAT32_BLAME = ("float32 where", "lower precision", "float32 rounding", "computed in float32")


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as info:
        fn(*args, **kwargs)
    return str(info.value)


def torch_error(fn) -> str:
    """PyTorch's own message for a bug, so that a change in its wording fails these tests."""
    with pytest.raises(RuntimeError) as info:
        fn()
    return str(info.value)


def as_student_error(message: str, label: str = "train_lm(<ToyRecurrentLM>, tensor(22,) int64, steps=3)") -> str:
    """The text remote.Student makes of an exception raised in the worker, with its traceback."""
    return (f"{label} raised RuntimeError: {message}\nTraceback (your code, most recent call last):\n"
            "  graded cell 9, line 14, in train_lm\n    loss.backward()")


def run_checks(assignment_id: str, text: str, names: set) -> dict:
    """{check name: failure message or None} for the staff solution edited into `text`, in this process."""
    assignment = assignments.get(assignment_id)
    student = Student(InProcessChannel(build.module_from_text(f"lmgrade_test_messages_{assignment_id}", text)))
    messages = {}
    for fn in assignment.checks():
        spec = fn.lmgrade_check
        if spec.name in names:
            ctx = Context(student=student, ref=assignment.reference(), spec=spec,
                          recording={} if spec.public else None)
            seed_everything(ctx.seed)
            try:
                fn(ctx)
                messages[spec.name] = None
            except CheckFailed as exc:
                messages[spec.name] = str(exc)
    return messages


# ---- 1. library errors raised in the student's code ----------------------------------------------
def backward_twice():
    """The truncated-BPTT bug: the carried state keeps the previous chunk's graph."""
    w = torch.ones(3, requires_grad=True)
    state = torch.zeros(3)
    for _ in range(2):
        state = torch.tanh(state + w)
        state.sum().backward()


def test_an_undetached_carried_state_is_named_and_retain_graph_is_not_advised():
    message = torch_error(backward_twice)
    assert "Specify retain_graph=True" in message  # PyTorch's advice, which misleads here
    text = as_student_error(message)
    explained = explain_library_error(text, ("batchify", "detach_state", "train_lm"))
    assert "Trying to backward through the graph a second time" in explained
    assert "carried hidden state was not detached" in explained and "`detach_state(state)`" in explained
    assert "Specify retain_graph=True" not in explained
    # the advice comes before the student's traceback, which is kept whole
    assert explained.index("Likely cause:") < explained.index("Traceback (your code")
    assert explained.endswith("graded cell 9, line 14, in train_lm\n    loss.backward()")
    assert explain_library_error(explained, ("detach_state",)) == explained  # the runner may apply it again


def test_without_the_starter_helper_the_advice_is_generic():
    explained = explain_library_error(as_student_error(torch_error(backward_twice)), ("train_seq2seq",))
    assert "Detach it (.detach())" in explained and "detach_state" not in explained
    assert "Specify retain_graph=True" not in explained


def test_other_errors_and_the_graders_own_words_are_left_alone():
    shapes = as_student_error(torch_error(lambda: torch.randn(2, 3) @ torch.randn(4, 3)))
    assert "cannot be multiplied" in shapes and explain_library_error(shapes, ("detach_state",)) == shapes
    # the library's words outside a student's exception (a check quoting them) are not a student error
    note = "train_lm: Trying to backward through the graph a second time is what an undetached state gives"
    assert explain_library_error(note, ("detach_state",)) == note


def modified_in_place():
    a = torch.randn(3, 4, requires_grad=True)
    b = a.tanh()
    b += 1
    b.sum().backward()


@pytest.mark.parametrize("bug, advice", [
    (modified_in_place, "an in-place operation"),
    (lambda: torch.randn(2, 3, dtype=torch.float64) @ torch.randn(3, 4), "dtype=x.dtype"),
    (lambda: torch.nn.Linear(3, 4)(torch.randn(2, 3, dtype=torch.float64)), "dtype=x.dtype"),
    (lambda: torch.randn(2, 2, 3).bmm(torch.randn(2, 3, 4, dtype=torch.float64)), "dtype=x.dtype"),
    (lambda: torch.zeros(3).index_add_(0, torch.tensor([0]), torch.ones(1, dtype=torch.float64)), "dtype=x.dtype"),
    (lambda: torch.randn(2, 3).sum().backward(), "cut the graph"),
])
def test_each_known_library_error_gets_its_advice(bug, advice):
    explained = explain_library_error(as_student_error(torch_error(bug), "f(x (2, 3))"))
    assert advice in explained.split("Likely cause: ", 1)[1].split("\nTraceback")[0], explained


def test_the_device_message_gets_device_advice():
    # CUDA's wording, quoted: this test must run on machines without a GPU too
    text = as_student_error("Expected all tensors to be on the same device, but found at least two devices, "
                            "cuda:0 and cpu!")
    assert "device=x.device" in explain_library_error(text)


def test_library_advice_keeps_the_exception_type():
    """A StudentError stays one: the runner hides its message for a sealed check by that type."""
    with pytest.raises(StudentError) as info:
        with library_advice(("detach_state",)):
            raise StudentError(as_student_error(torch_error(backward_twice)))
    assert "detach_state" in str(info.value)

    @library_advice(("detach_state",))
    def a_check(t):
        raise CheckFailed("train_lm: expected 3 losses, got 2")
    assert a_check.__name__ == "a_check"
    assert failure(a_check, None) == "train_lm: expected 3 losses, got 2"


def test_through_a_real_worker_the_traceback_follows_the_advice():
    source = ("import torch\n\n\ndef train(steps):\n    w = torch.ones(3, requires_grad=True)\n"
              "    h = torch.zeros(3)\n    for _ in range(steps):\n        h = torch.tanh(h + w)\n"
              "        h.sum().backward()\n    return float(w.grad.sum())\n")
    cell = Cell(index=3, number=4, source=source)  # the 4th cell from the top, markdown cells counted
    with Sandbox([cell.wire()], import_torch=True, limits=Limits(call_timeout=30)) as box:
        with pytest.raises(StudentError) as info:
            with library_advice(("detach_state",)):
                Student(box, timeout=30).train(3)
    text = str(info.value)
    # named as Jupyter shows the cell (what it defines), not by a position that counts markdown
    assert re.search(r"detach_state.*\nTraceback \(your code, most recent call last\):\n  "
                     r"graded cell defining `train`, line 9", text, re.S), text
    assert "Specify retain_graph=True" not in text


def test_rnn_lm_training_checks_say_the_state_was_not_detached():
    carry = "        logits, state = model(inputs, detach_state(state))"
    undetached = edited_solution("rnn_lm", [(carry, "        logits, state = model(inputs, state)")])
    messages = run_checks("rnn_lm", undetached, {"train_lm_exact", "train_lm_repeatable"})
    for name, message in messages.items():
        assert message and "carried hidden state was not detached" in message, (name, message)
        assert "detach_state(state)" in message and "Specify retain_graph=True" not in message
    # near miss: a state reset at every chunk fails on the losses, with no talk of detaching
    reset = edited_solution("rnn_lm", [(carry, "        logits, state = model(inputs)")])
    message = run_checks("rnn_lm", reset, {"train_lm_exact"})["train_lm_exact"]
    assert message and "the loss of each step" in message and "Likely cause" not in message


# ---- 2. NaN rows that are the fully masked queries ----------------------------------------------
def attention(q, k, v, mask, fill):
    """The common buggy softmax attention: masked scores filled, no special case for empty rows."""
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def qkv(*lead, T_q=5, T_k=6, d=4, scale=1.0):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(*lead, T_q, d, generator=g, dtype=torch.float64) * scale,
            torch.randn(*lead, T_k, d, generator=g, dtype=torch.float64),
            torch.randn(*lead, T_k, 3, generator=g, dtype=torch.float64))


def test_nan_rows_that_are_the_fully_masked_queries_are_named():
    q, k, v = qkv(2, 3)
    mask = torch.ones(5, 6, dtype=torch.bool).tril(1)
    mask[[1, 3]] = False
    out, weights = attention(q, k, v, mask, float("-inf"))
    for got in (out, weights):
        message = failure(assert_finite, got, "attention(q (2, 3, 5, 4), ...)", mask=mask)
        assert "Query rows 1, 3 are NaN in all 6 slices over the leading dimensions" in message
        assert "these queries have every key masked" in message
        assert "all-zero weights and a zero output (the starter's convention)" in message
        assert "numerically stable" not in message
    # assert_close says the same where the expected row is 0 and the student's is NaN
    message = failure(assert_close, out, torch.nan_to_num(out, nan=0.0), "attention output", mask=mask)
    assert "Query rows 1, 3 are NaN" in message and "log(0)" not in message
    assert "log(0)" in failure(assert_close, out, torch.nan_to_num(out, nan=0.0), "attention output")


def test_a_padding_mask_with_an_empty_sequence_names_its_slice():
    q, k, v = qkv(2, T_q=4, T_k=4)
    lengths = torch.tensor([4, 0])
    mask = (torch.arange(4)[None, :] < lengths[:, None])[:, None, :]  # (B, 1, T_k): example 1 is empty
    out, _ = attention(q, k, v, mask, float("-inf"))
    message = failure(assert_finite, out, "attention", mask=mask)
    assert "Query rows 0, 1, 2, 3 are NaN in 1 of the 2 slices" in message


def test_nan_rows_elsewhere_are_not_blamed_on_the_mask():
    # overflow: exp of huge scores, by hand, gives NaN in rows that have keys to attend to
    q, k, v = qkv(2, scale=1000.0)
    mask = torch.ones(5, 6, dtype=torch.bool).tril(1)
    mask[1] = False
    scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, -1e300)
    e = torch.exp(scores)
    out = (e / e.sum(-1, keepdim=True)) @ v
    nan_rows = torch.isnan(out).any(-1)
    assert bool(nan_rows[:, [0, 2, 3, 4]].any())  # the near miss really has NaN outside the masked row
    message = failure(assert_finite, out, "attention", mask=mask)
    assert "every key masked" not in message and "numerically stable" in message
    # no fully masked row at all, NaN anyway
    no_empty = torch.ones(5, 6, dtype=torch.bool)
    assert masked_rows_cause(out, no_empty) == ""


def test_uniform_weights_on_fully_masked_rows_are_named_and_correct_ones_are_not():
    q, k, v = qkv(2, 3)
    mask = torch.ones(5, 6, dtype=torch.bool).tril(1)
    mask[2] = False
    _, weights = attention(q, k, v, mask, -1e9)
    cause = masked_rows_cause(weights, mask)
    assert cause.startswith("Query row 2 is uniform (every weight 1/6) in all 6 slices") and "zero" in cause
    zeroed = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    assert masked_rows_cause(zeroed, mask) == ""


def test_the_attention_checks_name_the_fully_masked_row():
    empty_rows = ("        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"
                  "    weights = torch.softmax(scores, dim=-1)\n"
                  "    if mask is not None:  # a row with nothing to attend to: uniform after the fill, so zero it\n"
                  "        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)\n")
    neg_inf = edited_solution("attention", [(empty_rows, '        scores = scores.masked_fill(~mask, float("-inf"))\n'
                                                         "    weights = torch.softmax(scores, dim=-1)\n")])
    messages = run_checks("attention", neg_inf, {"sdpa_fully_masked", "sdpa_stability"})
    assert "Query row 1 is NaN" in messages["sdpa_fully_masked"] and messages["sdpa_stability"] is None
    uniform = edited_solution("attention", [(empty_rows, "        scores = scores.masked_fill(mask == 0, -1e9)\n"
                                                         "    weights = torch.softmax(scores, dim=-1)\n")])
    assert "Query row 1 is uniform" in run_checks("attention", uniform, {"sdpa_fully_masked"})["sdpa_fully_masked"]
    # near miss: overflow in a hand-written softmax; no row of that check is fully masked
    by_hand = edited_solution("attention", [("    weights = torch.softmax(scores, dim=-1)\n    if mask is not None:  # a row",
                                             "    e = torch.exp(scores)\n    weights = e / e.sum(-1, keepdim=True)\n"
                                             "    if mask is not None:  # a row")])
    message = run_checks("attention", by_hand, {"sdpa_stability"})["sdpa_stability"]
    # the property matrix names what broke (huge scores) and the stable routine to use, not masked rows
    assert "property `extremes`" in message and "torch.softmax" in message and "every key masked" not in message


# ---- 3. question titles in the results table ----------------------------------------------------
def report_for(titles: dict, extra: str = "") -> Report:
    report = Report("transformer", "/tmp/alice.ipynb", "cpu")
    for q in titles:
        report.results.append(CheckResult(f"c{q}", q, "a check", 0.0 if q == "2" else 1.5, 1.5, q != "2",
                                          "wrong" if q == "2" else "Passed.", False, extra=q == extra))
    return report


def table_lines(table: str) -> list:
    return table.split("\n  x ")[0].splitlines()[1:]


def test_full_titles_in_a_table_that_fits_80_columns():
    titles = assignments.get("transformer").questions
    table = format_table(report_for(titles), titles)
    for title in ("Attention and the Transformer block", "Training a character-level Shakespeare LM"):
        assert title in table
    assert all(len(line) <= 80 for line in table_lines(table))
    assert re.search(r"^\s+total\s+10\.5/12\b", table, re.M)
    row = next(line for line in table_lines(table) if "Transformer block" in line)
    assert re.search(r"Transformer block\s+1\.5/1\.5\s+1/1$", row)


def test_a_title_too_long_for_the_column_wraps_whole_words():
    long_title = "Generation with a KV cache, beam search and nucleus sampling on a long context window"
    titles = {"1": "Norms", "2": long_title, "10": "Encoder-decoder"}
    table = format_table(report_for(titles, extra="10"), titles, details=False)
    lines = table_lines(table)
    assert all(len(line) <= 80 for line in lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("  2 "))
    end = next(i for i, line in enumerate(lines) if line.startswith("  10 "))
    first = re.match(r"  2\s+(.*?)\s+0/1\.5\s+0/1$", lines[start]).group(1)
    assert end - start > 1 and " ".join([first] + [line.strip() for line in lines[start + 1:end]]) == long_title
    assert re.search(r"^  10  Encoder-decoder\s+\+1\.5/1\.5\s+1/1$", table, re.M)
    short = format_table(report_for({"1": "Norms"}), {"1": "Norms"}, details=False)
    assert max(len(line) for line in table_lines(short)) < 60  # short titles keep the table narrow


# ---- 4. float32 blamed only for errors of float32 size ----------------------------------------
def test_float32_result_with_rounding_size_errors_is_blamed_on_precision():
    g = torch.Generator().manual_seed(1)
    x, w = (torch.randn(6, 50, generator=g, dtype=torch.float64), torch.randn(50, 9, generator=g, dtype=torch.float64))
    message = failure(assert_close, x.float() @ w.float(), x @ w, "linear(x, w)")  # float64 inputs, float32 math
    assert "Your result is float32 where float64 was expected" in message


def test_float32_result_with_a_large_error_shows_the_difference_not_precision():
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    wrong = x.clone()
    wrong[2, 3] += 1.6  # a real bug in one element, returned in float32
    message = failure(assert_close, wrong.float(), x, "layer(x)", rtol=1e-5, atol=1e-5)
    assert "Worst at index (2, 3)" in message and "abs error 1.6" in message
    assert not any(blame in message for blame in FLOAT32_BLAME), message


def test_a_float64_result_computed_in_float32_is_recognized():
    x = np.random.default_rng(0).normal(size=200)
    got = np.cumsum(x.astype(np.float32)).astype(np.float64)  # float32 arithmetic, float64 returned
    message = failure(assert_close, got, np.cumsum(x), "running_sum(x)")
    assert "exact float32 numbers" in message and "computed in float32?" in message


def adamw_step(p, grad, lr, eps_inside_sqrt):
    """One AdamW step from zero moments; where ε goes is the algorithmic difference."""
    m_hat, v_hat = grad, grad ** 2
    denom = np.sqrt(v_hat + 1e-8) if eps_inside_sqrt else np.sqrt(v_hat) + 1e-8
    return p * (1 - lr * 0.01) - lr * m_hat / denom


@pytest.mark.parametrize("lr, band", [(5e-3, (2e-6, 3e-5)), (3e-4, ROUNDING_BAND)])
def test_a_float64_algorithm_difference_is_not_called_float32_rounding(lr, band):
    rng = np.random.default_rng(3)
    p = rng.uniform(-2, 2, size=(4, 5))
    grad = rng.choice([-1.0, 1.0], size=(4, 5)) * rng.uniform(1e-3, 2e-3, size=(4, 5))  # ε/(2 g²): 1e-3..5e-3 of a step
    expected, got = adamw_step(p, grad, lr, False), adamw_step(p, grad, lr, True)
    relative = np.abs(got - expected).max() / np.abs(expected).max()
    assert band[0] < relative < band[1]  # 1e-5: the old band's misfire; in-band: only the float32 test tells
    message = failure(assert_close, got, expected, "adamw_step(p, grad)")
    assert not any(blame in message for blame in FLOAT32_BLAME), message


def test_a_helper_left_in_an_ungraded_cell_is_named_by_that_cells_content(tmp_path):
    """The NameError advice names the cell as a student finds it, not by a count of every cell."""
    import nbformat

    from autograder.grading import runner
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# notes"),
                nbformat.v4.new_code_cell("def pad_helper(s, n):\n    return ['<s>'] * (n - 1) + s + ['</s>']"),
                nbformat.v4.new_code_cell("# GRADED CELL\ndef pad_sentence(s, n):\n    return pad_helper(s, n)")]
    nb.cells[2].metadata["tags"] = ["graded"]
    nb.metadata["lmgrade"] = {"assignment": "ngram"}
    path = tmp_path / "sub.ipynb"
    nbformat.write(nb, path)
    from autograder.sandbox import extract
    sub = extract.read_submission(path)
    advice = runner._explain_name_error("name 'pad_helper' is not defined", sub)
    assert advice.startswith("`pad_helper` is defined in the cell defining `pad_helper`, which is not graded")
