"""attention's declarations in the property matrix: every graded function declares the `generator` property (the
masks, the head reshapes and the tables made from sizes were the last without it), and every device probe runs as
the matrix's `device` property, in the check that ran it by hand before.

Each bug is the staff solution with one edit, graded in this process on one question's checks (as in
tests/test_property_matrix.py): it must fail exactly the checks named, each with a message that starts with the
property's name and the function. Before these declarations every generator bug here got full marks; the device
bugs failed the same checks with a message that did not name the property.
"""
import pytest

from tests.helpers import edited_solution
from tests.test_property_matrix import failures_in_process

CAUSAL = "    T_k = T_q if T_k is None else T_k\n    i = torch.arange(T_q, device=device)[:, None]  # (T_q, 1)\n"
PADDING = "    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]"
SPLIT = "    B, T, d_model = x.shape\n    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)"
MERGE = "    B, h, T, d_head = x.shape\n    return x.transpose(1, 2).reshape(B, T, h * d_head)"
TABLE = "    return table.to(dtype)"
SLOPES = "    p = 2 ** math.floor(math.log2(n_heads))\n"
ALIBI = "    return alibi_slopes(n_heads).to(device)[:, None, None] * (j - i)  # (h, T_q, T_k)"
DOT = ('    weights = torch.softmax(scores, dim=-1)  # (B, S)\n'
       '    context = torch.einsum("bs,bsd->bd", weights, H_enc)  # (B, d)\n')
BILINEAR = '    scores = torch.einsum("bsd,bd->bs", H_enc, query)  # (B, S)\n'
EMPTY_ROWS = "        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)"
MHA_SDPA = "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_head)"
GQA_SDPA = "        out, _ = scaled_dot_product_attention(q, k, v, mask)\n        return self.out_proj(merge_heads(out))\n"
IMPORTS = "import torch\nfrom torch import nn\n\n\n"
GQA_CLASS = IMPORTS + "class GroupedQueryAttention"
MHA_HELPERS = IMPORTS + "def split_heads("
INLINE = ("        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, T_q, T_k)\n"
          "        if mask is not None:\n"
          "            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n")
SUM_OF_RATIOS = "        weights = 1 / torch.exp(scores[..., None, :] - scores[..., :, None]).sum(dim=-1)  # softmax, overflow-free\n"
SOFTMAX = "        weights = torch.softmax(scores, dim=-1)\n"
GQA_REPEAT = ("        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n"
              "        v = v.repeat_interleave(group, dim=1)\n")


def inline_attention(softmax: str, gqa: bool) -> list:
    """MultiHeadAttention's or GroupedQueryAttention's forward with the attention written out, `softmax` giving the
    weights (the edits of the blind-spot hunt's A10 and A11)."""
    body = INLINE + softmax + "        out = weights @ v" + ("\n        return self.out_proj(merge_heads(out))\n" if gqa else "")
    return [(GQA_SDPA if gqa else MHA_SDPA, body),
            (GQA_CLASS if gqa else MHA_HELPERS, "import math\n\n" + (GQA_CLASS if gqa else MHA_HELPERS))]


def extremes(function: str) -> str:
    return f"property `extremes` of {function}, input "


def edges(function: str) -> str:
    return f"property `edges` of {function}, input "


def generator(function: str) -> str:
    return f"property `generator` (torch's global generator left alone): {function}("


def device(function: str) -> str:
    return f"property `device` of {function}, input "


# name: (replacements, question, {failing check: the start of its message})
BUGS = {
    # generator: a seed or a draw left in a function that needs no randomness (each got full marks before)
    "causal_mask seeds torch's global generator (left from a test on random scores)": ([(
        CAUSAL, "    torch.manual_seed(0)  # reproducible while testing\n" + CAUSAL)], "3",
        {"causal_mask_hidden": generator("causal_mask")}),
    "padding_mask draws a word-dropout mask from the global generator (p = 0)": ([(
        PADDING, "    keep = torch.rand(len(lengths), T, device=lengths.device) >= 0.0  # word dropout, p = 0 for now\n"
                 "    return (torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]) & keep")],
        "3", {"padding_mask_hidden": generator("padding_mask")}),
    # MultiHeadAttention calls split_heads and merge_heads: its own generator property fails too (its checks name
    # the two as the functions to fix first)
    "split_heads seeds torch's global generator (left from debugging the shapes)": ([(
        SPLIT, "    torch.manual_seed(0)  # debugging the shapes\n" + SPLIT)], "4",
        {"split_merge_heads": generator("split_heads"), "mha_gradients": generator("MultiHeadAttention")}),
    "merge_heads keeps each value with torch.rand_like(out) >= p, p = 0 (dropout by hand)": ([(
        MERGE, "    B, h, T, d_head = x.shape\n    out = x.transpose(1, 2).reshape(B, T, h * d_head)\n"
               "    return out * (torch.rand_like(out) >= 0.0)  # dropout, p = 0 for now")], "4",
        {"split_merge_heads": generator("merge_heads"), "mha_gradients": generator("MultiHeadAttention")}),
    "sinusoidal_positions adds noise of scale 0 (torch.randn_like)": ([(
        TABLE, "    table = table + 0.0 * torch.randn_like(table)  # position noise, off for now\n" + TABLE)], "6",
        {"sinusoidal_hidden": generator("sinusoidal_positions")}),
    # alibi_bias calls alibi_slopes: its generator property fails too (it names alibi_slopes to fix first)
    "alibi_slopes seeds torch's global generator": ([(
        SLOPES, "    torch.manual_seed(0)  # reproducible\n" + SLOPES)], "6",
        {"alibi_slopes_hidden": generator("alibi_slopes"), "alibi_bias_hidden": generator("alibi_bias")}),
    "alibi_bias drops bias entries with torch.rand(T_q, T_k) >= p, p = 0": ([(
        ALIBI, "    keep = torch.rand(T_q, T_k, device=device) >= 0.0  # bias dropout, p = 0 for now\n"
               "    return alibi_slopes(n_heads).to(device)[:, None, None] * (j - i) * keep  # (h, T_q, T_k)")], "6",
        {"alibi_bias_hidden": generator("alibi_bias")}),
    # device: the hand-written probes, now the matrix's `device` declarations in the same checks
    "dot_product_attention sums the context into torch.zeros(B, d) (no device=)": ([(
        DOT, '    weights = torch.softmax(scores, dim=-1)  # (B, S)\n'
             '    context = torch.zeros(h_dec.shape, dtype=h_dec.dtype)\n'
             '    for s in range(H_enc.size(1)):\n'
             '        context = context + weights[:, s, None] * H_enc[:, s]\n')], "1",
        {"dot_product_hidden": device("dot_product_attention")}),
    "bilinear_attention fills its scores row by row into torch.empty(B, S) (no device=)": ([(
        BILINEAR, "    scores = torch.empty(H_enc.shape[:2], dtype=query.dtype)  # (B, S)\n"
                  "    for b in range(H_enc.size(0)):\n        scores[b] = H_enc[b] @ query[b]\n")], "1",
        {"bilinear_hidden": device("bilinear_attention")}),
    "merge_heads fills a torch.zeros(B, T, d_model) head by head (no device=)": ([(
        MERGE, "    B, h, T, d_head = x.shape\n    out = torch.zeros(B, T, h * d_head, dtype=x.dtype)\n"
               "    for i in range(h):\n        out[..., i * d_head:(i + 1) * d_head] = x[:, i]\n    return out")], "4",
        {"split_merge_heads": device("merge_heads")}),
    "GroupedQueryAttention copies the shared heads into torch.zeros(B, h, T, d_head) (no device=)": ([(
        GQA_REPEAT, "        B, _, T, d_head = k.shape\n"
                    "        k_all = torch.zeros(B, self.n_heads, T, d_head, dtype=k.dtype)\n"
                    "        v_all = torch.zeros(B, self.n_heads, T, d_head, dtype=v.dtype)\n"
                    "        for i in range(self.n_heads):\n"
                    "            k_all[:, i], v_all[:, i] = k[:, i // group], v[:, i // group]\n"
                    "        k, v = k_all, v_all\n")], "7",
        {"device_agnostic_modules": device("GroupedQueryAttention(12, 6, 2)")}),
    # edges and extremes of the blind-spot hunt (A4-A6, A10, A11): each got full marks before
    "scaled_dot_product_attention finds fully masked rows with mask.any(dim=1) (2-D masks only)": ([(
        EMPTY_ROWS, "        weights = weights.masked_fill(~mask.any(dim=1, keepdim=True), 0.0)")], "2",
        {"sdpa_fully_masked": edges("scaled_dot_product_attention")}),
    "scaled_dot_product_attention zeroes rows where mask.sum(dim=1) == 0 (2-D masks only)": ([(
        EMPTY_ROWS, "        weights = weights.masked_fill(mask.sum(dim=1, keepdim=True) == 0, 0.0)")], "2",
        {"sdpa_fully_masked": edges("scaled_dot_product_attention")}),
    "scaled_dot_product_attention multiplies the weights by mask.any(1, keepdim=True) (2-D masks only)": ([(
        EMPTY_ROWS, "        weights = weights * mask.any(dim=1, keepdim=True)")], "2",
        {"sdpa_fully_masked": edges("scaled_dot_product_attention")}),
    "MultiHeadAttention computes attention inline, softmax as 1 / sum_j exp(s_j - s_i)": (
        inline_attention(SUM_OF_RATIOS, gqa=False), "4",
        {"mha_gradients": extremes("MultiHeadAttention(12, 3)")}),
    "GroupedQueryAttention computes attention inline, softmax as 1 / sum_j exp(s_j - s_i)": (
        inline_attention(SUM_OF_RATIOS, gqa=True), "5",
        {"gqa_gradients": extremes("GroupedQueryAttention(12, 6, 2)")}),
}

# name: (replacements, questions): code right on any device or that leaves the global generator alone
CORRECT = {
    "padding_mask counts positions with lengths.new_ones(B, T).cumsum(1)": ([(
        PADDING, "    positions = lengths.new_ones(len(lengths), T).cumsum(dim=1) - 1  # (B, T): 0 .. T-1\n"
                 "    return positions < lengths[:, None]")], ("3", "7")),
    "split_heads gathers each head's features with an index tensor made on the CPU (CUDA moves indices)": ([(
        SPLIT, "    B, T, d_model = x.shape\n"
               "    index = torch.arange(d_model).view(n_heads, d_model // n_heads)  # (h, d_head)\n"
               "    return x[:, :, index].transpose(1, 2)")], ("4",)),
    "merge_heads fills x.new_zeros(B, T, d_model) head by head": ([(
        MERGE, "    B, h, T, d_head = x.shape\n    out = x.new_zeros(B, T, h * d_head)\n"
               "    for i in range(h):\n        out[..., i * d_head:(i + 1) * d_head] = x[:, i]\n    return out")],
        ("4",)),
    "dot_product_attention sums the context into torch.zeros(..., device=h_dec.device)": ([(
        DOT, '    weights = torch.softmax(scores, dim=-1)  # (B, S)\n'
             '    context = torch.zeros(h_dec.shape, dtype=h_dec.dtype, device=h_dec.device)\n'
             '    for s in range(H_enc.size(1)):\n'
             '        context = context + weights[:, s, None] * H_enc[:, s]\n')], ("1",)),
    "GroupedQueryAttention picks each query head's key/value head with a CPU index tensor": ([(
        GQA_REPEAT, "        index = torch.arange(self.n_heads) // group  # (h,): the shared head of each query head\n"
                    "        k, v = k[:, index], v[:, index]  # (B, h, T, d_head)\n")], ("5", "7")),
    "alibi_bias multiplies in float64 on the device and rounds to float32 once": ([(
        ALIBI, "    slopes = alibi_slopes(n_heads).to(device=device, dtype=torch.float64)  # (h,)\n"
               "    return (slopes[:, None, None] * (j - i)).float()  # (h, T_q, T_k)")], ("6", "7")),
    "sinusoidal_positions jitters the table from its own seeded generator (scale 0)": ([(
        TABLE, "    jitter = torch.Generator(device=table.device).manual_seed(0)\n"
               "    noise = torch.randn(table.shape, generator=jitter, device=table.device, dtype=table.dtype)\n"
               "    table = table + 0.0 * noise\n"
               + TABLE)], ("6", "7")),
    "scaled_dot_product_attention finds fully masked rows with mask.sum(-1, keepdim=True) > 0": ([(
        EMPTY_ROWS, "        weights = weights.masked_fill(~(mask.sum(-1, keepdim=True) > 0), 0.0)")], ("2", "4", "7")),
    "scaled_dot_product_attention multiplies the weights by mask.any(-1, keepdim=True)": ([(
        EMPTY_ROWS, "        weights = weights * mask.any(-1, keepdim=True)")], ("2",)),
    "MultiHeadAttention computes attention inline with torch.softmax": (inline_attention(SOFTMAX, gqa=False), ("4", "7")),
    "GroupedQueryAttention computes attention inline with torch.softmax": (inline_attention(SOFTMAX, gqa=True), ("5", "7")),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_fails_exactly_its_property(bug):
    replacements, question, expected = BUGS[bug]
    failed = failures_in_process("attention", edited_solution("attention", replacements), question)
    assert set(failed) == set(expected), failed
    for check, start in expected.items():
        assert failed[check].startswith(start), failed[check]


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_keeps_full_marks(variant):
    replacements, questions = CORRECT[variant]
    text = edited_solution("attention", replacements)
    for question in questions:
        assert failures_in_process("attention", text, question) == {}, question
