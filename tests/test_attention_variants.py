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
Every bug here but those in HIDDEN_ONLY is also caught by a public check
(`test_public_checks_catch_the_bugs`).
"""
import types

import pytest

from autograder.authoring import assignments
from autograder.checking.checks import Context, seed_everything
from autograder.checking.remote import InProcessChannel, Student
from autograder.errors import CheckFailed
from autograder.grading import runner
from autograder.sandbox import extract, forbidden
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
        [(SOFTMAX, SOFTMAX.replace("dim=-1)", "dim=-1).detach()"))], {"2"},
        {"public_sdpa", "sdpa_gradients", "sdpa_stability"}),  # stability: the gradients at extreme scores too
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
        {"1"}, {"public_dot_product", "bilinear_hidden", "q1_gradients"}),  # the matrix: NaN gradients at scores of 1000
    "additive -inf mask and nan_to_num: NaN gradients for fully masked rows": (
        [(FILL + SOFTMAX, "        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float('-inf'))\n"
                          "    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))\n    if mask is not None:  # a row")],
        {"2"}, {"public_sdpa", "sdpa_gradients"}),
    "scaled_dot_product_attention only for 4-D inputs": (
        [(SCORES, "    scores = q @ k.transpose(2, 3) / math.sqrt(q.size(-1))\n")], {"2"},
        {"public_sdpa", "sdpa_vs_builtin", "sdpa_gradients", "sdpa_fully_masked"}),  # edges: 3-D masks
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

# ---- a second blind-spot hunt: bugs written from the docstrings, each graded on its own question
# (plus Q7 where it is about dtypes or devices). Those in HIDDEN_ONLY are seen by hidden checks
# alone, by design: a batch of one, lengths shorter than T, 3-D masks, a very negative score.
DOT = ('    scores = torch.einsum("bsd,bd->bs", H_enc, h_dec)  # (B, S)\n'
       "    weights = torch.softmax(scores, dim=-1)  # (B, S)\n"
       '    context = torch.einsum("bs,bsd->bd", weights, H_enc)  # (B, d)\n')
ZERO = "        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)\n"
EMPTY_ROWS = FILL + SOFTMAX + " with nothing to attend to: uniform after the fill, so zero it\n" + ZERO
PADDING = "    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]"
MERGE = "    return x.transpose(1, 2).reshape(B, T, h * d_head)"
MHA_SDPA = "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_head)\n"
MHA_OUT = "        return self.out_proj(merge_heads(out))  # (B, T_q, d_model)"
GQA_REPEAT = ("        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n"
              "        v = v.repeat_interleave(group, dim=1)")
GQA_ATTEND = "        out, _ = scaled_dot_product_attention(q, k, v, mask)\n        return self.out_proj(merge_heads(out))\n"
GQA_BODY = "        group = self.n_heads // self.n_kv_heads\n" + GQA_REPEAT + "\n" + GQA_ATTEND.split("\n")[0] + "\n"
FREQ = "    freq = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)  # (ceil(d/2),)\n"
POS = "    pos = torch.arange(T, device=device, dtype=torch.float64)[:, None]  # (T, 1)\n"
LEARNED = "        positions = torch.arange(x.size(1), device=x.device)  # (T,)"
LEARNED_ADD = "        return x + self.table(positions)  # (B, T, d) + (T, d)"
SLOPES_TAIL = "        slopes += geometric(2 * p)[0::2][: n_heads - p]\n"
ALIBI = "    return alibi_slopes(n_heads).to(device)[:, None, None] * (j - i)  # (h, T_q, T_k)"
Q1 = {"public_dot_product", "dot_product_hidden", "q1_gradients"}
ALIBI_ALL = {"public_positions", "alibi_slopes_hidden", "alibi_bias_hidden"}
EMPTY_ROW_CHECKS = {"public_sdpa", "sdpa_fully_masked", "sdpa_gradients"}
SPLIT_MERGE = {"split_merge_heads", "public_mha", "mha_vs_builtin", "cross_attention", "mha_gradients"}
GQA_NUMERICS = {"public_gqa", "gqa_vs_builtin", "gqa_options", "gqa_gradients"}
FLOAT64_MODULES = {"device_agnostic_modules", "public_float64"}
NEW_BUGS = {
    # Q1
    "dot_product_attention: bmm and squeeze() drop the batch of one": (
        [(DOT, "    scores = torch.bmm(H_enc, h_dec.unsqueeze(-1)).squeeze()\n"
               "    weights = torch.softmax(scores, dim=-1)\n"
               "    context = (weights.unsqueeze(-1) * H_enc).sum(dim=-2)\n")], {"1"}, {"dot_product_hidden"}),
    "dot_product_attention unsqueezes h_dec in place": (
        [(DOT, "    h_dec.unsqueeze_(-1)\n    scores = torch.bmm(H_enc, h_dec).squeeze(-1)\n"
               "    weights = torch.softmax(scores, dim=-1)\n"
               '    context = torch.einsum("bs,bsd->bd", weights, H_enc)\n')], {"1"}, Q1),
    "dot_product_attention scaled by sqrt(d) as in Q2": (
        [(DOT, DOT.replace("H_enc, h_dec)", "H_enc, h_dec) / math.sqrt(h_dec.size(-1))"))], {"1"}, Q1),
    "dot_product_attention softmax over the batch": (
        [(DOT, DOT.replace("softmax(scores, dim=-1)", "softmax(scores, dim=0)"))], {"1"}, Q1),
    "dot_product_attention weights kept as (B, S, 1)": (
        [(DOT, "    scores = torch.bmm(H_enc, h_dec.unsqueeze(-1))  # (B, S, 1)\n"
               "    weights = torch.softmax(scores, dim=1)\n    context = (weights * H_enc).sum(dim=1)\n")], {"1"},
        {"public_dot_product", "dot_product_hidden", "q1_gradients"}),  # the matrix's samples see the shape too
    "dot_product_attention context from the raw scores": (
        [(DOT, DOT.replace('"bs,bsd->bd", weights', '"bs,bsd->bd", scores'))], {"1"}, Q1),
    "bilinear_attention projects in float32": (
        [("    query = h_dec @ W  # (B, d_enc)\n", "    query = (h_dec.float() @ W.float()).to(h_dec.dtype)\n")], {"1"},
        {"bilinear_hidden", "q1_gradients"}),
    # Q2
    "scale 1/torch.sqrt(torch.tensor(d_k)), a float32 constant": (
        [(SCORES, "    scores = q @ k.transpose(-2, -1) / torch.sqrt(torch.tensor(q.size(-1)))\n")], {"2", "7"},
        {"public_sdpa", "sdpa_vs_builtin", "sdpa_fully_masked"} | FLOAT64_MODULES),
    "softmax computed in float32 and cast back": (
        [(SOFTMAX, SOFTMAX.replace("torch.softmax(scores, dim=-1)",
                                   "torch.softmax(scores.float(), dim=-1).to(scores.dtype)"))], {"2", "7"},
        SDPA_NUMERICS | {"float64_functions"} | FLOAT64_MODULES),  # sdpa_stability: its float64 gradients at extremes
    "fully masked rows found with mask.all instead of ~mask.any": (
        [(ZERO, ZERO.replace("~mask.any(", "~mask.all("))], {"2"}, MASKING),
    "-1e9 fill and fully masked rows left uniform": (
        [(EMPTY_ROWS, "        scores = scores.masked_fill(mask == 0, -1e9)\n    weights = torch.softmax(scores, dim=-1)\n")],
        {"2"}, EMPTY_ROW_CHECKS),
    "output computed before the fully masked rows are zeroed": (
        [(EMPTY_ROWS + "    return weights @ v, weights",
          FILL + "    weights = torch.softmax(scores, dim=-1)\n    out = weights @ v\n    if mask is not None:\n" + ZERO
          + "    return out, weights")], {"2"}, EMPTY_ROW_CHECKS),
    "keys transposed with transpose(-1, 1)": (
        [(SCORES, SCORES.replace("k.transpose(-2, -1)", "k.transpose(-1, 1)"))], {"2"},
        {"public_sdpa", "sdpa_vs_builtin", "sdpa_fully_masked", "sdpa_stability", "sdpa_weight_rows"}),
    "a 2-D mask unsqueezed in place": (
        [(FILL, "        if mask.dim() == 2:\n            mask.unsqueeze_(0)\n" + FILL)], {"2"},
        {"public_sdpa", "sdpa_vs_builtin", "sdpa_fully_masked", "sdpa_stability", "sdpa_weight_rows"}),
    "a 3-D mask taken as (B, T_q, T_k) and given a head dimension": (
        [(FILL, "        if mask.dim() == 3:  # (B, T_q, T_k): add the head dimension\n"
                "            mask = mask.unsqueeze(1)\n" + FILL)], {"2"}, {"sdpa_vs_builtin", "sdpa_fully_masked"}),
    "masked scores filled with -1e4": (
        [(FILL, "        scores = scores.masked_fill(~mask, -1e4)\n")], {"2"}, {"sdpa_weight_rows"}),
    "additive -10000 mask": (
        [(FILL, "        scores = scores + (~mask) * -10000.0\n")], {"2"}, {"sdpa_weight_rows"}),
    # Q3
    "padding_mask unsqueezes lengths in place": (
        [(PADDING, "    lengths.unsqueeze_(1)\n    return torch.arange(T, device=lengths.device)[None, :] < lengths")],
        {"3"}, {"public_masks", "padding_mask_hidden"}),
    "padding_mask pads to lengths.max() instead of T": (
        [(PADDING, PADDING.replace("arange(T,", "arange(int(lengths.max()),"))], {"3"}, {"padding_mask_hidden"}),
    "padding_mask: arange without device": (
        [(PADDING, PADDING.replace("T, device=lengths.device", "T"))], {"3", "7"}, {"device_and_dtype_arguments"}),
    "causal_mask offset T_q - T_k": (
        [("    return j <= i + (T_k - T_q)", "    return j <= i + (T_q - T_k)")], {"3"},
        {"public_masks", "causal_mask_hidden"}),
    # Q4
    "merge_heads flattens (B, T, d_head, h)": (
        [(MERGE, MERGE.replace("transpose(1, 2)", "permute(0, 2, 3, 1)"))], {"4"}, SPLIT_MERGE),
    "merge_heads transposes its input in place": (
        [(MERGE, MERGE.replace("transpose(", "transpose_("))], {"4"}, {"split_merge_heads"}),
    "split_heads takes strided features for each head": (
        [("    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)",
          "    return x.view(B, T, d_model // n_heads, n_heads).permute(0, 3, 1, 2)")], {"4"}, SPLIT_MERGE),
    "MultiHeadAttention inverts the mask ('True = masked')": (
        [(MHA_SDPA, MHA_SDPA.replace("v, mask)", "v, None if mask is None else ~mask)"))], {"4"},
        {"public_mha", "mha_vs_builtin", "cross_attention", "mha_causal", "mha_gradients"}),  # extremes: a causal mask
    "MultiHeadAttention always causal": (
        [(MHA_SDPA, "        causal = causal_mask(q.size(2), k.size(2), device=x.device)\n"
                    "        mask = causal if mask is None else mask & causal\n" + MHA_SDPA)], {"4"},
        {"public_mha", "mha_vs_builtin", "cross_attention", "mha_gradients", "mha_permutation"}),
    "MultiHeadAttention rounds its output through float32": (
        [(MHA_OUT, "        return self.out_proj(merge_heads(out).float().to(x.dtype))")], {"4", "7"},
        {"mha_vs_builtin", "cross_attention", "mha_gradients"} | FLOAT64_MODULES),
    "MultiHeadAttention keeps dropout on its output": (
        [(MHA_OUT, "        return torch.nn.functional.dropout(self.out_proj(merge_heads(out)), 0.1, self.training)")],
        {"4"}, {"public_mha", "mha_vs_builtin", "cross_attention", "mha_gradients", "mha_causal", "mha_permutation"}),
    "MultiHeadAttention caches the first context's keys and values": (
        [(MHA_KV, "        if context is not x and getattr(self, 'kv_cache', None) is not None:\n"
                  "            k, v = self.kv_cache\n        else:\n" + MHA_KV.replace("        ", "            ")
                  + "            if context is not x:\n                self.kv_cache = (k, v)\n")], {"4"},
        {"cross_attention", "mha_gradients"}),
    # Q5
    "GQA repeats features before splitting the heads": (
        [("        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_head)\n"
          "        v = split_heads(self.v_proj(x), self.n_kv_heads)\n" + GQA_BODY.split(GQA_ATTEND.split("\n")[0])[0],
          "        group = self.n_heads // self.n_kv_heads\n"
          "        k = split_heads(self.k_proj(x).repeat_interleave(group, dim=-1), self.n_heads)\n"
          "        v = split_heads(self.v_proj(x).repeat_interleave(group, dim=-1), self.n_heads)\n")], {"5"},
        GQA_NUMERICS),
    "GQA drops the mask": (
        [(GQA_ATTEND, GQA_ATTEND.replace("v, mask)", "v)"))], {"5"},
        {"public_gqa", "gqa_vs_builtin", "gqa_options", "gqa_gradients"}),  # gqa_gradients: extremes with a causal mask
    "GQA repeats values with repeat, keys with repeat_interleave": (
        [(GQA_REPEAT, GQA_REPEAT.replace("v = v.repeat_interleave(group, dim=1)", "v = v.repeat(1, group, 1, 1)"))],
        {"5"}, GQA_NUMERICS),
    "GQA without the output projection": (
        [(GQA_ATTEND, GQA_ATTEND.replace("self.out_proj(merge_heads(out))", "merge_heads(out)"))], {"5"},
        GQA_NUMERICS | {"gqa_equals_mha"}),
    "GQA repeats keys and values over time": (
        [(GQA_REPEAT, GQA_REPEAT.replace("dim=1", "dim=2"))], {"5"}, GQA_NUMERICS),
    "GQA head loop takes key/value head h % n_kv_heads": (
        [(GQA_BODY, "        group = self.n_heads // self.n_kv_heads\n"
                    "        kv = [h % self.n_kv_heads for h in range(self.n_heads)]\n"
                    "        out = torch.cat([scaled_dot_product_attention(q[:, h:h + 1], k[:, g:g + 1], v[:, g:g + 1], mask)[0]\n"
                    "                         for h, g in enumerate(kv)], dim=1)\n")], {"5"}, GQA_NUMERICS),
    # Q6
    "sinusoidal frequencies 1/10000^(k/d)": (
        [(FREQ, FREQ.replace("arange(0, d, 2,", "arange(0, (d + 1) // 2,"))], {"6"}, {"public_positions", "sinusoidal_hidden"}),
    "sinusoidal positions start at 1": (
        [(POS, POS.replace("arange(T,", "arange(1, T + 1,"))], {"6"}, {"public_positions", "sinusoidal_hidden"}),
    "sinusoidal sin and cos in halves": (
        [(SIN_COS, "    table[:, : (d + 1) // 2] = torch.sin(pos * freq)\n"
                   "    table[:, (d + 1) // 2:] = torch.cos(pos * freq[: d // 2])")], {"6"},
        {"public_positions", "sinusoidal_hidden"}),
    "sinusoidal frequency from the column index 10000^(-i/d)": (
        [(SIN_COS, "    every = 10000.0 ** (-torch.arange(d, device=device, dtype=torch.float64) / d)\n"
                   "    table[:, 0::2] = torch.sin(pos * every[0::2])\n    table[:, 1::2] = torch.cos(pos * every[1::2])")],
        {"6"}, {"public_positions", "sinusoidal_hidden"}),
    "sinusoidal table in float32 whatever the dtype": (
        [("    table = torch.zeros(T, d, device=device, dtype=torch.float64)",
          "    table = torch.zeros(T, d, device=device)")], {"6", "7"}, Q7_ARGUMENTS),
    "sinusoidal_positions ignores device": (
        [(POS + FREQ + "    table = torch.zeros(T, d, device=device, dtype=torch.float64)\n",
          (POS + FREQ + "    table = torch.zeros(T, d, device=device, dtype=torch.float64)\n").replace("device=device, ", ""))],
        {"6", "7"}, {"device_and_dtype_arguments"}),
    "LearnedPositions adds a float32 copy of the table": (
        [(LEARNED_ADD, "        return x + self.table(positions).float()")], {"6", "7"},
        {"learned_positions", "device_agnostic_modules"}),
    "LearnedPositions counts positions from 1": (
        [(LEARNED, "        positions = torch.arange(1, x.size(1) + 1, device=x.device).clamp(max=self.table.num_embeddings - 1)")],
        {"6"}, {"public_positions", "learned_positions"}),
    "LearnedPositions detaches the table": (
        [(LEARNED_ADD, "        return x + self.table.weight[: x.size(1)].detach()")], {"6"}, {"learned_positions"}),
    "LearnedPositions indexes by the batch size": (
        [(LEARNED, "        positions = torch.arange(x.size(0), device=x.device)[:, None]")], {"6"},
        {"public_positions", "learned_positions"}),
    "RoPE rotates by minus the angle": (
        [(ROPE_OUT, ROPE_OUT.replace("even * cos - odd * sin, even * sin + odd * cos",
                                     "even * cos + odd * sin, -even * sin + odd * cos"))], {"6"}, ROPE),
    "RoPE frequencies in float32": (
        [(ROPE_THETA, "    theta = 1.0 / base ** (torch.arange(0, d, 2, device=x.device).float() / d)\n")], {"6", "7"},
        ROPE | {"float64_functions"}),
    "RoPE frequencies base^(-k/d)": (
        [(ROPE_THETA, ROPE_THETA.replace("arange(0, d, 2,", "arange(0, d // 2,"))], {"6"}, ROPE),
    "RoPE frequencies base^(+2k/d)": (
        [(ROPE_THETA, ROPE_THETA.replace("base ** (-torch", "base ** (torch"))], {"6"}, ROPE),
    "RoPE default positions from x.size(1)": (
        [("        positions = torch.arange(T, device=x.device)\n", "        positions = torch.arange(x.size(1), device=x.device)\n")],
        {"6"}, ROPE),
    "RoPE default positions without device": (
        [("        positions = torch.arange(T, device=x.device)\n", "        positions = torch.arange(T)\n")], {"6", "7"},
        {"float64_functions"}),
    "RoPE unsqueezes positions in place": (
        [(ROPE_ANGLE, "    angle = positions.unsqueeze_(-1).to(x.dtype) * theta\n")], {"6"}, ROPE),
    "alibi_slopes takes the odd slopes [1::2]": (
        [(SLOPES_TAIL, SLOPES_TAIL.replace("[0::2]", "[1::2]"))], {"6"}, ALIBI_ALL),
    "alibi_slopes geometric for every head count": (
        [("    p = 2 ** math.floor(math.log2(n_heads))\n", "    p = n_heads\n")], {"6"}, ALIBI_ALL),
    "alibi_slopes from the next power of two, truncated": (
        [("    p = 2 ** math.floor(math.log2(n_heads))\n    slopes = geometric(p)\n",
          "    p = 2 ** math.ceil(math.log2(n_heads))\n    slopes = geometric(p)[:n_heads]\n")], {"6"}, ALIBI_ALL),
    "alibi_bias -slope * |j - i|": (
        [(ALIBI, ALIBI.replace("alibi_slopes(n_heads).to(device)[:, None, None] * (j - i)",
                               "-alibi_slopes(n_heads).to(device)[:, None, None] * (j - i).abs()"))], {"6"},
        {"public_positions", "alibi_bias_hidden"}),
    "alibi_bias offset T_q - T_k": (
        [("    i = torch.arange(T_q, device=device)[:, None] + (T_k - T_q)\n",
          "    i = torch.arange(T_q, device=device)[:, None] - (T_k - T_q)\n")], {"6"}, {"public_positions", "alibi_bias_hidden"}),
    "alibi_bias leaves the slopes on the CPU": (
        [(ALIBI, ALIBI.replace(".to(device)", ""))], {"6", "7"}, {"device_and_dtype_arguments"}),
}
HIDDEN_ONLY = {  # what the public checks, small and fixed, do not show: held back for the hidden ones
    "dot_product_attention: bmm and squeeze() drop the batch of one", "bilinear_attention projects in float32",
    "a 3-D mask taken as (B, T_q, T_k) and given a head dimension", "masked scores filled with -1e4",
    "additive -10000 mask", "padding_mask pads to lengths.max() instead of T", "padding_mask: arange without device",
    "merge_heads transposes its input in place", "MultiHeadAttention caches the first context's keys and values",
    "sinusoidal_positions ignores device", "LearnedPositions adds a float32 copy of the table",
    "LearnedPositions detaches the table", "RoPE default positions without device",
    "alibi_bias leaves the slopes on the CPU",
}
BUGS |= NEW_BUGS

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

CORRECT |= {
    "dot product by bmm with unsqueeze/squeeze(-1)": ([
        (DOT, "    scores = torch.bmm(H_enc, h_dec.unsqueeze(-1)).squeeze(-1)\n"
              "    weights = torch.softmax(scores, dim=-1)\n"
              "    context = torch.bmm(weights.unsqueeze(1), H_enc).squeeze(1)\n")], {"1"}),
    "bilinear scores from keys projected by W^T": ([
        ("    query = h_dec @ W  # (B, d_enc)\n    scores = torch.einsum(\"bsd,bd->bs\", H_enc, query)  # (B, S)\n",
         "    keys = H_enc @ W.T  # (B, S, d_dec)\n    scores = (keys * h_dec[:, None, :]).sum(-1)\n")], {"1"}),
    "q pre-scaled, where() with -1e30, weights times the mask": ([
        (SCORES + "    if mask is not None:\n" + EMPTY_ROWS,
         "    q = q * q.size(-1) ** -0.5\n    scores = torch.matmul(q, k.mT)\n    if mask is not None:\n"
         "        scores = torch.where(mask, scores, torch.full_like(scores, -1e30))\n"
         "    weights = scores.softmax(-1)\n    if mask is not None:\n        weights = weights * mask\n")], {"2", "7"}),
    "attention computed in float64 and cast back": ([
        (SCORES, "    dtype = q.dtype\n    q, k, v = q.double(), k.double(), v.double()\n" + SCORES),
        ("    return weights @ v, weights", "    return (weights @ v).to(dtype), weights.to(dtype)")], {"2", "7"}),
    "-inf fill, fully masked rows zeroed by where()": ([
        (EMPTY_ROWS, '        scores = scores.masked_fill(~mask, float("-inf"))\n    weights = torch.softmax(scores, dim=-1)\n'
                     "    if mask is not None:\n        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0)\n")],
        {"2", "7"}),
    "-inf fill and nan_to_num (masked_fill keeps the gradients finite)": ([
        (EMPTY_ROWS, '        scores = scores.masked_fill(~mask, float("-inf"))\n'
                     "    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))\n")], {"2", "7"}),
    "scaled after the fill": ([
        (SCORES + "    if mask is not None:\n" + FILL,
         "    scores = q @ k.transpose(-2, -1)\n    if mask is not None:\n" + FILL
         + "    scores = scores / math.sqrt(q.size(-1))\n")], {"2", "7"}),
    "padding mask filled by a loop": ([
        (PADDING, "    mask = torch.zeros(len(lengths), T, dtype=torch.bool, device=lengths.device)\n"
                  "    for b, n in enumerate(lengths.tolist()):\n        mask[b, :n] = True\n    return mask")], {"3", "7"}),
    "LearnedPositions keeps its positions in a persistent buffer": ([
        ("        self.table = nn.Embedding(max_len, d_model)\n",
         "        self.table = nn.Embedding(max_len, d_model)\n"
         "        self.register_buffer(\"positions\", torch.arange(max_len))\n"),
        ("        positions = torch.arange(x.size(1), device=x.device)  # (T,)\n",
         "        positions = self.positions[: x.size(1)]\n")], {"6", "7"}),
    "causal mask as ~triu": ([
        ("    return j <= i + (T_k - T_q)",
         "    return ~torch.ones(T_q, T_k, dtype=torch.bool, device=device).triu(T_k - T_q + 1)")], {"3", "7"}),
    "heads by unflatten/permute, merged by contiguous().view": ([
        ("    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)",
         "    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)"),
        (MERGE, "    return x.transpose(1, 2).contiguous().view(B, T, -1)")], {"4", "5", "7"}),
    "GQA by grouping the query heads (no repeat)": ([
        (GQA_BODY, "        group = self.n_heads // self.n_kv_heads\n        B, h, T, dh = q.shape\n"
                   "        q = q.view(B, self.n_kv_heads, group, T, dh)\n        k, v = k[:, :, None], v[:, :, None]\n"
                   "        if mask is not None and mask.dim() == 4:\n            mask = mask[:, None]\n"
                   "        out, _ = scaled_dot_product_attention(q, k, v, mask)\n        out = out.reshape(B, h, T, dh)\n")],
        {"5", "7"}),
    "GQA head loop with key/value head h // group": ([
        (GQA_BODY, "        group = self.n_heads // self.n_kv_heads\n"
                   "        out = torch.cat([scaled_dot_product_attention(q[:, h:h + 1], k[:, h // group:h // group + 1],\n"
                   "                                                      v[:, h // group:h // group + 1], mask)[0]\n"
                   "                         for h in range(self.n_heads)], dim=1)\n")], {"5", "7"}),
    "alibi slopes in closed form, float64": ([
        ("    p = 2 ** math.floor(math.log2(n_heads))\n    slopes = geometric(p)\n    if p < n_heads:\n" + SLOPES_TAIL
         + "    return torch.tensor(slopes)",
         "    p = 1 << (n_heads.bit_length() - 1)\n"
         "    first = (2.0 ** (-8.0 / p)) ** torch.arange(1, p + 1, dtype=torch.float64)\n"
         "    extra = (2.0 ** (-4.0 / p)) ** (2 * torch.arange(n_heads - p, dtype=torch.float64) + 1)\n"
         "    return torch.cat([first, extra])")], {"6", "7"}),
    "RoPE angles in float64, cos and sin cast to x's dtype": ([
        (ROPE_THETA + ROPE_ANGLE + "    cos, sin = torch.cos(angle), torch.sin(angle)\n",
         "    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)\n"
         "    angle = positions.to(device=x.device, dtype=torch.float64)[:, None] * theta\n"
         "    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)\n")], {"6", "7"}),
    "RoPE with float32 positions (integers are exact)": ([
        (ROPE_ANGLE, "    angle = positions.float()[:, None] * theta\n")], {"6", "7"}),
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
    runner._blame_earlier_functions(rows, specs, specs)  # "`x` (Qn) fails its own checks; fix it first."
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
    """Issue 10: public inputs show the commonest bugs; here every bug the hidden checks catch, but those
    HIDDEN_ONLY names (edge inputs and devices that only the hidden checks try)."""
    public = {fn.__name__ for fn in ATTENTION.checks() if fn.lmgrade_check.public}
    hidden = {fn.__name__ for fn in ATTENTION.checks() if not fn.lmgrade_check.public}
    caught = [name for name, (_, _, failing) in BUGS.items() if failing & hidden]
    missed = {name for name in caught if not BUGS[name][2] & public}
    assert len(BUGS) >= 30 and missed == HIDDEN_ONLY, sorted(missed ^ HIDDEN_ONLY)
