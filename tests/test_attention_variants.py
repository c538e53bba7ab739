"""The attention grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it. The expected set of
failing checks is the bug's own checks plus those of code that calls the buggy function
(MultiHeadAttention and GroupedQueryAttention call scaled_dot_product_attention and split_heads).
Grading is limited to the questions a variant can affect, to keep the suite fast.
"""
import pytest

from autograder import assignments, runner
from tests.helpers import edited_solution

ATTENTION = assignments.get("attention")
SDPA_NUMERICS = {"public_sdpa", "sdpa_vs_builtin", "sdpa_stability", "sdpa_fully_masked"}
MODULE_NUMERICS = {"public_mha", "mha_vs_builtin", "cross_attention", "mha_gradients",
                   "public_gqa", "gqa_vs_builtin", "gqa_gradients"}
SCORES = "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)\n"
SOFTMAX = "    weights = torch.softmax(scores, dim=-1)\n    if mask is not None:  # a row"
FILL = "        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"

# name: (replacements, questions graded, failing checks expected)
BUGS = {
    "no sqrt(d_k) scaling": (
        [(SCORES, "    scores = q @ k.transpose(-2, -1)\n")], {"2", "4", "5"},
        SDPA_NUMERICS - {"sdpa_stability"} | MODULE_NUMERICS),  # at 1000x, softmax is one-hot either way
    "scaling by d_k instead of sqrt(d_k)": (
        [(SCORES, "    scores = q @ k.transpose(-2, -1) / q.size(-1)\n")], {"2", "4", "5"},
        SDPA_NUMERICS | MODULE_NUMERICS),
    "softmax over the query dimension": (
        [(SOFTMAX, SOFTMAX.replace("dim=-1", "dim=-2"))], {"2"},
        SDPA_NUMERICS | {"sdpa_weight_rows"}),
    "inverted mask": (
        [(FILL, FILL.replace("~mask", "mask"))], {"2"},
        {"public_sdpa", "sdpa_vs_builtin", "sdpa_weight_rows", "sdpa_fully_masked", "sdpa_stability"}),
    "mask applied after the softmax": (
        [(FILL + SOFTMAX, "        pass\n" + SOFTMAX.replace("\n    if mask", "\n    if mask is not None:\n"
                                                             "        weights = weights * mask\n    if mask"))],
        {"2"}, {"public_sdpa", "sdpa_vs_builtin", "sdpa_weight_rows", "sdpa_fully_masked", "sdpa_stability"}),
    "softmax weights detached from the graph": (
        [(SOFTMAX, SOFTMAX.replace("dim=-1)", "dim=-1).detach()"))], {"2"}, {"sdpa_gradients"}),
    "causal mask off by one": (
        [("    return j <= i + (T_k - T_q)", "    return j < i + (T_k - T_q)")], {"3"},
        {"public_masks", "causal_mask_hidden"}),
    "causal mask aligned upper-left": (
        [("    return j <= i + (T_k - T_q)", "    return j <= i")], {"3"},
        {"public_masks", "causal_mask_hidden"}),
    "heads split with a reshape that mixes heads and positions": (
        [("    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)",
          "    return x.reshape(B, n_heads, T, d_model // n_heads)")], {"4", "5"},
        {"split_merge_heads", "mha_causal", "mha_permutation"} | MODULE_NUMERICS),
    "missing output projection": (
        [("        return self.out_proj(merge_heads(out))  # (B, T_q, d_model)", "        return merge_heads(out)")],
        {"4", "5"}, {"public_mha", "mha_vs_builtin", "cross_attention", "mha_gradients", "gqa_equals_mha"}),
    "GQA groups heads with repeat instead of repeat_interleave": (
        [("        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n        v = v.repeat_interleave(group, dim=1)",
          "        k = k.repeat(1, group, 1, 1)\n        v = v.repeat(1, group, 1, 1)")], {"5"},
        {"public_gqa", "gqa_vs_builtin", "gqa_gradients"}),
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
        {"4", "7"}, {"device_agnostic_modules"}),
    "learned positions indexed without a device": (
        [("        positions = torch.arange(x.size(1), device=x.device)  # (T,)",
          "        positions = torch.arange(x.size(1))")], {"6", "7"}, {"device_agnostic_modules"}),
    "uses F.scaled_dot_product_attention": (
        [(SCORES, "    import torch.nn.functional as F\n    if mask is None or mask.any(-1).all():\n"
                  "        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None\n" + SCORES)],
        {"2"}, {"public_sdpa", "sdpa_vs_builtin", "sdpa_weight_rows", "sdpa_fully_masked", "sdpa_stability",
                "sdpa_gradients"}),
}

CORRECT = {
    "einsum instead of matmul": [
        (SCORES, '    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.size(-1))\n'),
        ("    return weights @ v, weights", '    return torch.einsum("...qk,...kd->...qd", weights, v), weights')],
    "-inf fill and a hand-written stable softmax": [
        (FILL + SOFTMAX.split("\n")[0] + "\n",
         '        scores = scores.masked_fill(~mask, float("-inf"))\n'
         "    peak = scores.amax(dim=-1, keepdim=True)\n"
         "    peak = torch.where(torch.isinf(peak), torch.zeros_like(peak), peak)\n"
         "    e = torch.exp(scores - peak)\n"
         "    weights = e / e.sum(dim=-1, keepdim=True).clamp_min(1.0)\n")],
    "fused QKV projection for self-attention": [
        ("        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T_q, d_head)\n"
         "        k = split_heads(self.k_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n"
         "        v = split_heads(self.v_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n",
         "        if context is x:\n"
         "            weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])\n"
         "            bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])\n"
         "            q, k, v = (split_heads(part, self.n_heads) for part in\n"
         "                       torch.nn.functional.linear(x, weight, bias).split(self.d_model, dim=-1))\n"
         "        else:\n"
         "            q = split_heads(self.q_proj(x), self.n_heads)\n"
         "            k = split_heads(self.k_proj(context), self.n_heads)\n"
         "            v = split_heads(self.v_proj(context), self.n_heads)\n")],
    "one head at a time in a loop": [
        ("        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_head)\n",
         "        heads = []\n"
         "        for head in range(self.n_heads):\n"
         "            shape = (q.size(0), self.n_heads, q.size(2), k.size(2))\n"
         "            m = None if mask is None else torch.broadcast_to(mask, shape)[:, head]\n"
         "            heads.append(scaled_dot_product_attention(q[:, head], k[:, head], v[:, head], m)[0])\n"
         "        out = torch.stack(heads, dim=1)\n")],
    "GQA by expand and reshape": [
        ("        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n        v = v.repeat_interleave(group, dim=1)",
         "        B, h_kv, T, d_head = k.shape\n"
         "        k = k[:, :, None].expand(B, h_kv, group, T, d_head).reshape(B, h_kv * group, T, d_head)\n"
         "        v = v[:, :, None].expand(B, h_kv, group, T, d_head).reshape(B, h_kv * group, T, d_head)")],
    "RoPE with complex numbers": [
        ("    even, odd = x[..., 0::2], x[..., 1::2]\n"
         "    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)\n"
         "    return out.flatten(-2)",
         "    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())\n"
         "    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angle), angle)).flatten(-2)")],
    "sinusoids from exp and log in the requested dtype": [
        ("    pos = torch.arange(T, device=device, dtype=torch.float64)[:, None]  # (T, 1)\n",
         "    pos = torch.arange(T, device=device, dtype=dtype)[:, None]\n"),
        ("    freq = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)  # (ceil(d/2),)\n",
         "    freq = torch.exp(torch.arange(0, d, 2, device=device, dtype=dtype) * (-math.log(10000.0) / d))\n")],
}


def edited(replacements) -> str:
    return edited_solution("attention", replacements)


def grade(tmp_path, text, questions=None):
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, ATTENTION, device="cpu", questions=questions)
    assert report.results, "no checks ran"
    return report


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_is_caught_by_exactly_its_checks(tmp_path, bug):
    replacements, questions, expected = BUGS[bug]
    report = grade(tmp_path, edited(replacements), questions)
    assert {r.name for r in report.results if not r.passed} == expected
    assert not any("grader could not finish" in r.output for r in report.results)


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_gets_full_marks(tmp_path, variant):
    report = grade(tmp_path, edited(CORRECT[variant]))
    assert {r.name: r.output for r in report.results if not r.passed} == {}
