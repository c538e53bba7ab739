"""The attention grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it. The expected set of
failing checks is the bug's own checks plus those of code that calls the buggy function
(MultiHeadAttention and GroupedQueryAttention call scaled_dot_product_attention and split_heads).
Grading is limited to the questions a variant can affect (its own, the ones whose code calls it,
and Q7 where the variant is about devices or dtypes), and runs the checks against the variant
loaded in this process (`InProcessChannel`, the same worker code without a process and limits):
what is tested here is the checks, and starting a sandboxed worker per variant would double the
time. `test_in_process_grading_agrees_with_the_runner` grades a bug both ways; the staff solution,
the starter and forbidden built-ins go through the real runner in test_attention_grading.py.
Every bug here is also caught by a public check (`test_public_checks_catch_the_bugs`).
"""
import types

import pytest

from autograder import assignments, extract, forbidden, runner
from autograder.checks import Context, seed_everything
from autograder.errors import CheckFailed
from autograder.remote import InProcessChannel, Student
from tests.helpers import edited_solution

ATTENTION = assignments.get("attention")
SDPA_NUMERICS = {"public_sdpa", "sdpa_vs_builtin", "sdpa_stability", "sdpa_fully_masked", "sdpa_gradients"}
MASKING = SDPA_NUMERICS | {"sdpa_weight_rows"}
MODULE_NUMERICS = {"public_mha", "mha_vs_builtin", "cross_attention", "mha_gradients",
                   "public_gqa", "gqa_vs_builtin", "gqa_options", "gqa_gradients"}
SCORES = "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)\n"
SOFTMAX = "    weights = torch.softmax(scores, dim=-1)\n    if mask is not None:  # a row"
FILL = "        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"

# name: (replacements, questions graded, failing checks expected)
BUGS = {
    "no sqrt(d_k) scaling": (
        [(SCORES, "    scores = q @ k.transpose(-2, -1)\n")], {"2", "4", "5"}, SDPA_NUMERICS | MODULE_NUMERICS),
    "scaling by d_k instead of sqrt(d_k)": (
        [(SCORES, "    scores = q @ k.transpose(-2, -1) / q.size(-1)\n")], {"2", "4", "5"},
        SDPA_NUMERICS | MODULE_NUMERICS),
    "softmax over the query dimension": (
        [(SOFTMAX, SOFTMAX.replace("dim=-1", "dim=-2"))], {"2"}, MASKING),
    "inverted mask": (
        [(FILL, FILL.replace("~mask", "mask"))], {"2"}, MASKING),
    "mask applied after the softmax": (
        [(FILL + SOFTMAX, "        pass\n" + SOFTMAX.replace("\n    if mask", "\n    if mask is not None:\n"
                                                             "        weights = weights * mask\n    if mask"))],
        {"2"}, MASKING),
    "softmax weights detached from the graph": (
        [(SOFTMAX, SOFTMAX.replace("dim=-1)", "dim=-1).detach()"))], {"2"}, {"public_sdpa", "sdpa_gradients"}),
    "causal mask off by one": (
        [("    return j <= i + (T_k - T_q)", "    return j < i + (T_k - T_q)")], {"3"},
        {"public_masks", "causal_mask_hidden"}),
    "causal mask aligned upper-left": (
        [("    return j <= i + (T_k - T_q)", "    return j <= i")], {"3"},
        {"public_masks", "causal_mask_hidden"}),
    "heads split with a reshape that mixes heads and positions": (
        [("    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)",
          "    return x.reshape(B, n_heads, T, d_model // n_heads)")], {"4", "5"},
        {"split_merge_heads", "mha_causal", "mha_permutation"} | MODULE_NUMERICS),  # GQA calls split_heads
    "missing output projection": (
        [("        return self.out_proj(merge_heads(out))  # (B, T_q, d_model)", "        return merge_heads(out)")],
        {"4", "5"}, {"public_mha", "mha_vs_builtin", "cross_attention", "mha_gradients", "gqa_equals_mha"}),
    "GQA groups heads with repeat instead of repeat_interleave": (
        [("        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n        v = v.repeat_interleave(group, dim=1)",
          "        k = k.repeat(1, group, 1, 1)\n        v = v.repeat(1, group, 1, 1)")], {"5"},
        {"public_gqa", "gqa_vs_builtin", "gqa_options", "gqa_gradients"}),
    "RoPE rotates the pairs (k, k + d/2)": (
        [("    even, odd = x[..., 0::2], x[..., 1::2]", "    even, odd = x[..., : d // 2], x[..., d // 2:]"),
         ("    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)\n"
          "    return out.flatten(-2)",
          "    return torch.cat((even * cos - odd * sin, even * sin + odd * cos), dim=-1)")], {"6"},
        {"public_positions", "rope_hidden"}),
    "sin and cos swapped": (
        [("    table[:, 0::2] = torch.sin(pos * freq)\n    table[:, 1::2] = torch.cos(pos * freq[: d // 2])",
          "    table[:, 0::2] = torch.cos(pos * freq)\n    table[:, 1::2] = torch.sin(pos * freq[: d // 2])")], {"6"},
        {"public_positions", "sinusoidal_hidden"}),
    "a device='cpu' tensor inside forward": (
        [("        context = x if context is None else context\n",
          "        context = x if context is None else context\n        if mask is None:\n"
          "            mask = torch.ones(x.size(1), context.size(1), dtype=torch.bool, device='cpu')\n")],
        {"4", "7"}, {"device_agnostic_modules", "public_float64"}),
    "learned positions indexed without a device": (
        [("        positions = torch.arange(x.size(1), device=x.device)  # (T,)",
          "        positions = torch.arange(x.size(1))")], {"6", "7"}, {"device_agnostic_modules", "public_float64"}),
    "uses F.scaled_dot_product_attention": (
        [(SCORES, "    import torch.nn.functional as F\n    if mask is None or mask.any(-1).all():\n"
                  "        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None\n" + SCORES)],
        {"2"}, MASKING),
}


# ---- bugs of the classes issue 10 names: side effects, keywords and flags never exercised, edge
# inputs, dtypes and shapes. Each is graded on its own question (plus Q7 where the function is one
# Q7 runs in float64 or on another device).
SIN_COS = "    table[:, 0::2] = torch.sin(pos * freq)\n    table[:, 1::2] = torch.cos(pos * freq[: d // 2])"
ROPE_THETA = "    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)  # (d/2,)\n"
ROPE_ANGLE = "    angle = positions.to(x.dtype)[:, None] * theta  # (T, d/2)\n"
ROPE_OUT = ("    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)\n"
            "    return out.flatten(-2)")
MHA_KV = ("        k = split_heads(self.k_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n"
          "        v = split_heads(self.v_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n")
ROPE = {"public_positions", "rope_hidden"}
Q7_ARGUMENTS = {"public_float64", "device_and_dtype_arguments"}
BUGS |= {
    "scaled_dot_product_attention divides q in place": (
        [(SCORES, "    q.div_(math.sqrt(q.size(-1)))\n    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)\n")],
        {"2"}, MASKING),
    "LearnedPositions adds into its input (x += ...)": (
        [("        return x + self.table(positions)  # (B, T, d) + (T, d)",
          "        x += self.table(positions)\n        return x")], {"6"}, {"learned_positions", "public_positions"}),
    "apply_rope writes the rotated pairs back into x": (
        [(ROPE_OUT, "    even, odd = even.clone(), odd.clone()\n"
                    "    x[..., 0::2] = even * cos - odd * sin\n    x[..., 1::2] = even * sin + odd * cos\n    return x")],
        {"6"}, ROPE | {"rope_properties"}),
    "MultiHeadAttention ignores bias=False": (
        [("        self.q_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        self.k_proj = nn.Linear(d_model, d_model, bias=bias)",
          "        self.q_proj = nn.Linear(d_model, d_model)\n"
          "        self.k_proj = nn.Linear(d_model, d_model, bias=bias)")],
        {"4"}, {"mha_vs_builtin", "public_mha"}),
    "MultiHeadAttention ignores context (always self-attention)": (
        [(MHA_KV, MHA_KV.replace("(context)", "(x)"))], {"4"}, {"cross_attention", "mha_gradients", "public_mha"}),
    "MultiHeadAttention drops the mask in cross-attention": (
        [("        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_head)\n",
          "        out, _ = scaled_dot_product_attention(q, k, v, mask if context is x else None)\n")],
        {"4"}, {"cross_attention", "public_mha"}),
    "GQA group size n_kv_heads instead of n_heads // n_kv_heads": (
        [("        group = self.n_heads // self.n_kv_heads\n", "        group = self.n_kv_heads\n")], {"5"},
        {"public_gqa", "gqa_vs_builtin", "gqa_options", "gqa_gradients", "gqa_equals_mha"}),
    "apply_rope ignores base": (
        [(ROPE_THETA, ROPE_THETA.replace("base **", "10000.0 **"))], {"6"}, ROPE),
    "apply_rope ignores positions": (
        [(ROPE_ANGLE, "    angle = torch.arange(T, device=x.device, dtype=x.dtype)[:, None] * theta\n")], {"6"}, ROPE),
    "apply_rope with a table of 2048 cached positions": (
        [(ROPE_ANGLE, "    table = torch.arange(2048, device=x.device, dtype=x.dtype)[:, None] * theta  # (2048, d/2)\n"
                      "    angle = table[positions]\n")], {"6"}, ROPE | {"rope_properties"}),
    "sinusoidal_positions breaks for odd d": (
        [(SIN_COS, SIN_COS.replace("freq[: d // 2]", "freq"))], {"6"}, {"public_positions", "sinusoidal_hidden"}),
    "bilinear_attention softmax without subtracting the maximum": (
        [("    weights = torch.softmax(scores, dim=-1)\n    return torch.einsum",
          "    e = torch.exp(scores)\n    weights = e / e.sum(dim=-1, keepdim=True)\n    return torch.einsum")],
        {"1"}, {"public_dot_product", "bilinear_hidden"}),
    "additive -inf mask and nan_to_num: NaN gradients for fully masked rows": (
        [(FILL + SOFTMAX, "        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float('-inf'))\n"
                          "    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))\n    if mask is not None:  # a row")],
        {"2"}, {"public_sdpa", "sdpa_gradients"}),
    "scaled_dot_product_attention only for 4-D inputs": (
        [(SCORES, "    scores = q @ k.transpose(2, 3) / math.sqrt(q.size(-1))\n")], {"2"},
        {"public_sdpa", "sdpa_vs_builtin", "sdpa_gradients"}),
    "sinusoidal_positions ignores dtype": (
        [("    return table.to(dtype)", "    return table.float()")], {"7"}, Q7_ARGUMENTS),
    "causal_mask returns a float mask": (
        [("    return j <= i + (T_k - T_q)", "    return (j <= i + (T_k - T_q)).float()")], {"3"},
        {"public_masks", "causal_mask_hidden"}),
    "dropout left on the attention weights": (
        [(SOFTMAX, SOFTMAX.replace("dim=-1)", "dim=-1)\n    weights = torch.nn.functional.dropout(weights, 0.1)"))],
        {"2"}, MASKING),
    "alibi_bias aligned upper-left": (
        [("    i = torch.arange(T_q, device=device)[:, None] + (T_k - T_q)\n",
          "    i = torch.arange(T_q, device=device)[:, None]\n")], {"6"}, {"public_positions", "alibi_bias_hidden"}),
    "causal_mask ignores device": (
        [("    i = torch.arange(T_q, device=device)[:, None]  # (T_q, 1)\n    j = torch.arange(T_k, device=device)[None, :]",
          "    i = torch.arange(T_q)[:, None]\n    j = torch.arange(T_k)[None, :]")], {"7"}, Q7_ARGUMENTS),
}

# name: (replacements, questions graded)
CORRECT = {
    "einsum instead of matmul": ([
        (SCORES, '    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.size(-1))\n'),
        ("    return weights @ v, weights", '    return torch.einsum("...qk,...kd->...qd", weights, v), weights')],
        {"2", "4", "5"}),
    "-inf fill and a hand-written stable softmax": ([
        (FILL + SOFTMAX.split("\n")[0] + "\n",
         '        scores = scores.masked_fill(~mask, float("-inf"))\n'
         "    peak = scores.amax(dim=-1, keepdim=True)\n"
         "    peak = torch.where(torch.isinf(peak), torch.zeros_like(peak), peak)\n"
         "    e = torch.exp(scores - peak)\n"
         "    weights = e / e.sum(dim=-1, keepdim=True).clamp_min(1.0)\n")], {"2", "4", "5"}),
    "fused QKV projection for self-attention": ([
        ("        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T_q, d_head)\n"
         "        k = split_heads(self.k_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n"
         "        v = split_heads(self.v_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n",
         "        if context is x:\n"
         "            weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])\n"
         "            bias = None if self.q_proj.bias is None else \\\n"
         "                torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])\n"
         "            q, k, v = (split_heads(part, self.n_heads) for part in\n"
         "                       torch.nn.functional.linear(x, weight, bias).split(self.d_model, dim=-1))\n"
         "        else:\n"
         "            q = split_heads(self.q_proj(x), self.n_heads)\n"
         "            k = split_heads(self.k_proj(context), self.n_heads)\n"
         "            v = split_heads(self.v_proj(context), self.n_heads)\n")], {"4", "7"}),
    "one head at a time in a loop": ([
        ("        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_head)\n",
         "        heads = []\n"
         "        for head in range(self.n_heads):\n"
         "            shape = (q.size(0), self.n_heads, q.size(2), k.size(2))\n"
         "            m = None if mask is None else torch.broadcast_to(mask, shape)[:, head]\n"
         "            heads.append(scaled_dot_product_attention(q[:, head], k[:, head], v[:, head], m)[0])\n"
         "        out = torch.stack(heads, dim=1)\n")], {"4", "7"}),
    "GQA by expand and reshape": ([
        ("        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n        v = v.repeat_interleave(group, dim=1)",
         "        B, h_kv, T, d_head = k.shape\n"
         "        k = k[:, :, None].expand(B, h_kv, group, T, d_head).reshape(B, h_kv * group, T, d_head)\n"
         "        v = v[:, :, None].expand(B, h_kv, group, T, d_head).reshape(B, h_kv * group, T, d_head)")], {"5", "7"}),
    "RoPE with complex numbers": ([
        ("    even, odd = x[..., 0::2], x[..., 1::2]\n"
         "    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)\n"
         "    return out.flatten(-2)",
         "    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())\n"
         "    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angle), angle)).flatten(-2)")], {"6", "7"}),
    "sinusoids from exp and log in the requested dtype": ([
        ("    pos = torch.arange(T, device=device, dtype=torch.float64)[:, None]  # (T, 1)\n",
         "    pos = torch.arange(T, device=device, dtype=dtype)[:, None]\n"),
        ("    freq = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)  # (ceil(d/2),)\n",
         "    freq = torch.exp(torch.arange(0, d, 2, device=device, dtype=dtype) * (-math.log(10000.0) / d))\n")], {"6", "7"}),
    "additive -1e9 mask, empty rows zeroed by multiplying": ([
        (FILL + SOFTMAX + " with nothing to attend to: uniform after the fill, so zero it\n"
         "        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)\n",
         "        scores = scores + (~mask).to(scores.dtype) * -1e9\n"
         "    weights = torch.softmax(scores, dim=-1)\n"
         "    if mask is not None:\n"
         "        weights = weights * mask.any(dim=-1, keepdim=True)\n")], {"2", "7"}),
    "causal mask from tril with an offset": ([
        ("    i = torch.arange(T_q, device=device)[:, None]  # (T_q, 1)\n"
         "    j = torch.arange(T_k, device=device)[None, :]  # (1, T_k)\n    return j <= i + (T_k - T_q)",
         "    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(T_k - T_q)")], {"3", "7"}),
    "sinusoids interleaved by stack, cropped for odd d": ([
        ("    table = torch.zeros(T, d, device=device, dtype=torch.float64)\n" + SIN_COS + "\n    return table.to(dtype)",
         "    angles = pos * freq  # (T, ceil(d/2))\n"
         "    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[:, :d].to(dtype)")], {"6", "7"}),
    "learned positions by slicing the embedding weight": ([
        ("        positions = torch.arange(x.size(1), device=x.device)  # (T,)\n"
         "        return x + self.table(positions)  # (B, T, d) + (T, d)",
         "        return x + self.table.weight[: x.size(1)]")], {"6", "7"}),
    "RoPE by rotating half-pairs with repeated cos and sin": ([
        ("    cos, sin = torch.cos(angle), torch.sin(angle)\n    even, odd = x[..., 0::2], x[..., 1::2]\n" + ROPE_OUT,
         "    cos, sin = angle.cos().repeat_interleave(2, -1), angle.sin().repeat_interleave(2, -1)  # (T, d)\n"
         "    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # (-x1, x0, -x3, x2, ...)\n"
         "    return x * cos + rotated * sin")], {"6", "7"}),
}


def edited(replacements) -> str:
    return edited_solution("attention", replacements)


def grade(tmp_path, text, questions) -> dict[str, str]:
    """check name -> "Passed." or its failure, for the checks of `questions`, graded in this process.

    As the runner does: the forbidden-API scan first, then each check seeded on both sides. A check
    that raises anything but CheckFailed is a bug in the check and fails the test.
    """
    path = tmp_path / "submission.py"
    path.write_text(text)
    sub = extract.read_submission(path)
    module = types.ModuleType("submission")
    for cell in sub.cells:
        exec(compile(cell.source, f"<graded cell {cell.number}>", "exec"), module.__dict__)  # noqa: S102
    student = Student(InProcessChannel(module))
    tainted = forbidden.tainted_names(sub.cells, ATTENTION.forbidden)
    ref, fixtures = ATTENTION.reference(), ATTENTION.fixtures()
    results = {}
    for fn in ATTENTION.checks():
        spec = fn.lmgrade_check
        if spec.question not in questions:
            continue
        banned = runner._banned_message(spec, tainted)
        if banned:
            results[spec.name] = banned
            continue
        ctx = Context(student=student, ref=ref, spec=spec, fixtures=fixtures, device="cpu")
        seed_everything(ctx.seed)
        student._request({"op": "seed", "seed": ctx.seed}, {}, "seeding")
        try:
            fn(ctx)
            results[spec.name] = "Passed."
        except CheckFailed as exc:
            results[spec.name] = str(exc)
    assert results, "no checks ran"
    specs = [fn.lmgrade_check for fn in ATTENTION.checks() if fn.__name__ in results]
    rows = [runner._result(spec, results[spec.name] == "Passed.", results[spec.name]) for spec in specs]
    runner._blame_earlier_functions(rows, specs)  # "`x` (Qn) fails its own checks; fix it first."
    return {row.name: row.output for row in rows}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_is_caught_by_exactly_its_checks(tmp_path, bug):
    replacements, questions, expected = BUGS[bug]
    results = grade(tmp_path, edited(replacements), questions)
    assert {name for name, out in results.items() if out != "Passed."} == expected


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_gets_full_marks(tmp_path, variant):
    replacements, questions = CORRECT[variant]
    results = grade(tmp_path, edited(replacements), questions)
    assert {name: out for name, out in results.items() if out != "Passed."} == {}
    assert {fn.lmgrade_check.question for fn in ATTENTION.checks() if fn.__name__ in results} == questions


def test_a_module_failing_through_scaled_dot_product_attention_blames_it_and_nothing_else(tmp_path):
    replacements, questions, _ = BUGS["no sqrt(d_k) scaling"]
    results = grade(tmp_path, edited(replacements), questions)
    for name in ("mha_vs_builtin", "cross_attention", "public_mha", "gqa_vs_builtin", "public_gqa"):
        assert "`scaled_dot_product_attention` (Q2) fails its own checks; fix it first." in results[name], name
    assert not any("`split_heads`" in out or "`merge_heads`" in out for out in results.values())


def test_randomness_is_named_as_the_likely_cause(tmp_path):
    replacements, questions, _ = BUGS["dropout left on the attention weights"]
    results = grade(tmp_path, edited(replacements), questions)
    assert "is randomness left on" in results["sdpa_vs_builtin"]


def test_in_process_grading_agrees_with_the_runner(tmp_path):
    """The shortcut above changes nothing a check decides: one bug, both ways, same failures and messages."""
    replacements, questions, expected = BUGS["LearnedPositions adds into its input (x += ...)"]
    text = edited(replacements)
    results = grade(tmp_path, text, questions)
    path = tmp_path / "real.py"
    path.write_text(text)
    report = runner.grade(path, ATTENTION, device="cpu", questions=questions)
    assert {r.name: r.output.split("\nHint:")[0] for r in report.results if not r.passed} == \
        {name: out for name, out in results.items() if name in expected}
    assert "changed its argument 1" in results["learned_positions"]


def test_public_checks_catch_the_bugs():
    """Issue 10: public inputs show the commonest bugs; here every bug the hidden checks catch."""
    public = {fn.__name__ for fn in ATTENTION.checks() if fn.lmgrade_check.public}
    hidden = {fn.__name__ for fn in ATTENTION.checks() if not fn.lmgrade_check.public}
    caught = [name for name, (_, _, failing) in BUGS.items() if failing & hidden]
    missed = [name for name in caught if not BUGS[name][2] & public]
    assert len(BUGS) >= 30 and not missed, missed
