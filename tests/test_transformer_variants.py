"""The transformer grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it, graded only on the
questions the edit concerns (later questions reuse the code, and their `needs` point back here).
"""
import pytest

from autograder import assignments, runner
from tests.helpers import edited_solution

TRANSFORMER = assignments.get("transformer")
LN_CHECKS = {"public_norms", "layernorm_builtin", "norm_gradients"}
ADAMW_CHECKS = {"public_training_pieces", "adamw_vs_torch"}
PRE_NORM = ("            a = self.attn(self.norm1(x), causal=self.causal, cache=cache)\n"
            "            a, new = a if cache is not None else (a, None)\n"
            "            x = x + a\n")
CACHE_CAT = "            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, T_past + T, d_head)\n"
KV_CHECKS = {"public_generation", "cache_step", "cache_growth", "generate_greedy"}

# name: (replacements, questions graded, failing checks expected)
BUGS = {
    "post-norm where pre-norm is asked": (
        [("        if self.post_norm:\n            a = self.attn(x,", "        if True:\n            a = self.attn(x,")],
        {"3"}, {"public_block", "block_builtin", "block_gradients"}),
    "no residual around attention": (
        [(PRE_NORM, PRE_NORM.replace("x = x + a", "x = a"))], {"3"},
        {"public_block", "block_builtin", "block_gradients"}),
    "residual added in place into the caller's tensor": (
        [(PRE_NORM, PRE_NORM.replace("x = x + a", "x += a"))], {"3"}, {"block_builtin", "block_gradients"}),
    "LayerNorm over the batch axis": (
        [("        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
          "        mean = x.mean(dim=0, keepdim=True)\n        var = ((x - mean) ** 2).mean(dim=0, keepdim=True)")],
        {"1"}, LN_CHECKS),
    "LayerNorm with the unbiased variance": (
        [("        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased",
          "        var = x.var(dim=-1, keepdim=True)")], {"1"}, LN_CHECKS),
    "GELU with the tanh approximation": (
        [("        return self.proj(F.gelu(self.fc(x)))", "        return self.proj(F.gelu(self.fc(x), approximate='tanh'))")],
        {"2"}, {"public_feed_forward", "mlp_formula", "ffn_gradients"}),
    "SwiGLU gates the wrong projection": (
        [("F.silu(self.gate(x)) * self.up(x)", "self.gate(x) * F.silu(self.up(x))")], {"2"},
        {"public_feed_forward", "swiglu_formula", "ffn_gradients"}),
    "attention scaled by sqrt(d_model)": (
        [("/ math.sqrt(self.d_head)  # (B, h, T, T_k)", "/ math.sqrt(x.shape[-1])")], {"3"},
        {"attention_self", "attention_cross", "attention_gradients", "public_block", "block_builtin",
         "block_gradients"}),
    "RoPE rotates the pairs (k, k + d/2)": (
        [("    even, odd = x[..., 0::2], x[..., 1::2]\n"
          "    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)",
          "    even, odd = x[..., : d // 2], x[..., d // 2:]\n"
          "    return torch.cat((even * cos - odd * sin, even * sin + odd * cos), dim=-1)")],
        {"3"}, {"rope_formula", "attention_self", "block_builtin"}),
    "untied head": (
        [("        if tie_weights:\n            self.head.weight = self.tok_emb.weight\n", "")], {"4"},
        {"lm_gradients"}),
    "param_count forgets the final norm": (
        [("    total = vocab_size * d_model + n_layers * (attention + mlp + 2 * norm) + norm\n",
          "    total = vocab_size * d_model + n_layers * (attention + mlp + 2 * norm)\n")], {"4"},
        {"public_lm", "param_count_formula"}),
    "AdamW with L2 regularization instead of decoupled decay": (
        [("    m = beta1 * m + (1 - beta1) * grad\n", "    grad = grad + weight_decay * param\n"
                                                     "    m = beta1 * m + (1 - beta1) * grad\n"),
         ("    param = param - lr * weight_decay * param - lr * m_hat", "    param = param - lr * m_hat")],
        {"5"}, ADAMW_CHECKS),
    "AdamW without bias correction": (
        [("    m_hat = m / (1 - beta1 ** step)\n    v_hat = v / (1 - beta2 ** step)\n", "    m_hat, v_hat = m, v\n")],
        {"5"}, ADAMW_CHECKS),
    "AdamW with eps inside the square root": (
        [("(v_hat.sqrt() + eps)", "(v_hat + eps).sqrt()")], {"5"}, {"adamw_vs_torch"}),
    "warmup off by one": (
        [("        return max_lr * (step + 1) / warmup_steps", "        return max_lr * step / warmup_steps")], {"5"},
        {"public_training_pieces", "schedule_edges"}),
    "clipping each gradient by its own norm": (
        [("    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))\n"
          "    factor = min(1.0, max_norm / (float(total) + 1e-6))\n"
          "    return [g * factor for g in grads], float(total)",
          "    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))\n"
          "    return [g * min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads], float(total)")],
        {"5"}, {"clip_global_norm"}),
    "get_batch never draws the last crop": (
        [("torch.randint(0, len(data) - block_size, (batch_size,)", "torch.randint(0, len(data) - block_size - 1, (batch_size,)")],
        {"5"}, {"get_batch_crops"}),
    "a cache that drops the oldest position": (
        [(CACHE_CAT, CACHE_CAT.replace("torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)",
                                       "torch.cat([cache[0], k], dim=2)[:, :, 1:], torch.cat([cache[1], v], dim=2)[:, :, 1:]"))],
        {"7"}, KV_CHECKS - {"generate_greedy"} | {"generate_sampling"}),  # greedy tokens of these weights survive the loss
    "cached tokens placed at positions from 0 (learned positions)": (
        [("self.pos_emb(torch.arange(past, past + idx.shape[1], device=idx.device))",
          "self.pos_emb(torch.arange(idx.shape[1], device=idx.device))")],
        {"7"}, KV_CHECKS),
    "causal mask aligned upper-left with a cache": (
        [("            i = torch.arange(T, device=x.device)[:, None] + (T_k - T)\n",
          "            i = torch.arange(T, device=x.device)[:, None]\n")],
        {"7"}, KV_CHECKS | {"generate_sampling"}),
    "top-p excluding the token that crosses p": (
        [("        logits = logits.masked_fill(above >= top_p, float(\"-inf\"))",
          "        logits = logits.masked_fill(above + probs > top_p, float(\"-inf\"))")],
        {"7"}, {"public_generation", "filter_boundaries", "generate_sampling"}),
    "cross-attention with keys and values from the decoder": (
        [("        x = x + self.cross_attn(self.norm2(x), context=memory)", "        x = x + self.cross_attn(self.norm2(x))")],
        {"8"}, {"public_seq2seq", "decoder_block_builtin", "seq2seq_builtin", "seq2seq_gradients",
                "greedy_decode_matches", "seq2seq_sorting"}),
}

CORRECT = {
    "LayerNorm with var(unbiased=False) and rsqrt": (
        [("        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased\n"
          "        out = (x - mean) / torch.sqrt(var + self.eps) * self.weight\n",
          "        var = x.var(dim=-1, unbiased=False, keepdim=True)\n"
          "        out = (x - mean) * torch.rsqrt(var + self.eps) * self.weight\n")], {"1"}),
    "attention by einsum with a tril mask and the dtype's minimum": (
        [("        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, h, T, T_k)\n"
          "        if causal:\n"
          "            T_k = k.shape[2]\n"
          "            i = torch.arange(T, device=x.device)[:, None] + (T_k - T)\n"
          "            j = torch.arange(T_k, device=x.device)[None, :]\n"
          "            scores = scores.masked_fill(j > i, float(\"-inf\"))\n",
          "        scores = torch.einsum(\"bhqd,bhkd->bhqk\", q, k) * self.d_head ** -0.5\n"
          "        if causal:\n"
          "            T_k = k.shape[2]\n"
          "            allowed = torch.ones(T, T_k, dtype=torch.bool, device=x.device).tril(T_k - T)\n"
          "            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)\n")], {"3", "7"}),
    "AdamW the way torch writes it": (
        [("    m_hat = m / (1 - beta1 ** step)\n    v_hat = v / (1 - beta2 ** step)\n"
          "    param = param - lr * weight_decay * param - lr * m_hat / (v_hat.sqrt() + eps)\n",
          "    bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step\n"
          "    denom = v.sqrt() / math.sqrt(bc2) + eps\n"
          "    param = param * (1 - lr * weight_decay)\n"
          "    param = param - (lr / bc1) * m / denom\n")], {"5"}),
    "get_batch by index arithmetic": (
        [("    x = torch.stack([data[s:s + block_size] for s in starts.tolist()])\n"
          "    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts.tolist()])\n",
          "    offsets = starts[:, None] + torch.arange(block_size, device=data.device)\n"
          "    x, y = data[offsets], data[offsets + 1]\n")], {"5"}),
    "top-p by sorting, top-k by a threshold": (
        [("        probs = torch.softmax(logits, dim=-1)\n"
          "        above = (probs[..., None, :] * (probs[..., None, :] > probs[..., :, None])).sum(-1)  # (..., V)\n"
          "        logits = logits.masked_fill(above >= top_p, float(\"-inf\"))\n",
          "        probs = torch.softmax(logits, dim=-1)\n"
          "        ordered = torch.sort(probs, dim=-1, descending=True).values\n"
          "        before = ordered.cumsum(-1) - ordered\n"
          "        smallest = ordered.masked_fill(before >= top_p, float(\"inf\")).amin(-1, keepdim=True)\n"
          "        logits = logits.masked_fill(probs < smallest, float(\"-inf\"))\n")], {"7"}),
}


# Bugs in questions that share no code are graded together in one submission, to keep the suite
# fast: the failing set must then be exactly the union of each bug's own set.
TOGETHER = [
    ("LayerNorm over the batch axis", "GELU with the tanh approximation"),
    ("LayerNorm with the unbiased variance", "SwiGLU gates the wrong projection"),
    ("post-norm where pre-norm is asked", "AdamW with L2 regularization instead of decoupled decay"),
    ("no residual around attention", "AdamW without bias correction"),
    ("residual added in place into the caller's tensor", "AdamW with eps inside the square root"),
    ("attention scaled by sqrt(d_model)", "warmup off by one"),
    ("RoPE rotates the pairs (k, k + d/2)", "clipping each gradient by its own norm"),
    ("param_count forgets the final norm", "get_batch never draws the last crop"),
    ("untied head", "cross-attention with keys and values from the decoder"),
]
GROUPS = TOGETHER + [(name,) for name in sorted(BUGS) if not any(name in group for group in TOGETHER)]


def grade(tmp_path, text, questions):
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, TRANSFORMER, device="cpu", questions=questions)
    assert report.results, "no checks ran"
    return report


def test_groups_hold_every_bug_once_and_share_no_question():
    assert sorted(name for group in GROUPS for name in group) == sorted(BUGS)
    for group in TOGETHER:
        assert not set.intersection(*(BUGS[name][1] for name in group)), group


@pytest.mark.parametrize("group", GROUPS, ids=" + ".join)
def test_bug_is_caught_by_exactly_its_checks(tmp_path, group):
    replacements = [edit for name in group for edit in BUGS[name][0]]
    questions = set().union(*(BUGS[name][1] for name in group))
    expected = set().union(*(BUGS[name][2] for name in group))
    report = grade(tmp_path, edited_solution("transformer", replacements), questions)
    assert {r.name for r in report.results if not r.passed} == expected
    assert not any("grader could not finish" in r.output for r in report.results)


def test_correct_variants_together_get_full_marks(tmp_path):
    """All correct variants in one submission (they edit different functions): every check of their questions passes."""
    replacements = [edit for edits, _ in CORRECT.values() for edit in edits]
    questions = set().union(*(questions for _, questions in CORRECT.values()))
    report = grade(tmp_path, edited_solution("transformer", replacements), questions)
    assert {r.name: r.output for r in report.results if not r.passed} == {}


# Q6's training bugs, checked in this process against the exact-step and seeding checks only (a
# full Q6 grading run trains three models; these two checks decide such bugs before any threshold).
TRAINING_BUGS = {
    "a constant learning rate (no warmup or cosine)": (
        [("        optimizer.step(lr)\n        losses.append", "        optimizer.step()\n        losses.append")],
        {"train_exact_steps"}),
    "no gradient clipping": (
        [('        clipped, _ = clip_grads([p.grad for p in params], s["grad_clip"])\n'
          "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses",
          "        optimizer.step(lr)\n        losses")], {"train_exact_steps"}),
    "AdamW created anew at every step": (
        [("        optimizer.zero_grad()\n        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], "
          's["grad_clip"])\n        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n'
          "        losses",
          "        optimizer = AdamW(params, lr=s[\"max_lr\"], betas=tuple(s[\"betas\"]), eps=s[\"eps\"], "
          "weight_decay=s[\"weight_decay\"])\n"
          "        optimizer.zero_grad()\n        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], "
          's["grad_clip"])\n        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n'
          "        losses")], {"train_exact_steps"}),
    "the model's seed not set": (
        [('    torch.manual_seed(s["seed"])\n    model = TransformerLM', "    model = TransformerLM")], {"train_seeded"}),
}


def run_in_process(text: str, names: set) -> set:
    from autograder import build
    from autograder.checks import Context, seed_everything
    from autograder.errors import CheckFailed
    from autograder.remote import InProcessChannel, Student
    module = build.module_from_text("lmgrade_test_transformer_variant", text)
    student = Student(InProcessChannel(module))
    failed = set()
    for fn in TRANSFORMER.checks():
        spec = fn.lmgrade_check
        if spec.name not in names:
            continue
        ctx = Context(student=student, ref=TRANSFORMER.reference(), spec=spec)
        seed_everything(ctx.seed)
        try:
            fn(ctx)
        except CheckFailed:
            failed.add(spec.name)
    return failed


@pytest.mark.parametrize("bug", sorted(TRAINING_BUGS))
def test_training_bug_is_caught_by_the_exact_step_or_seed_check(bug):
    replacements, expected = TRAINING_BUGS[bug]
    assert run_in_process(edited_solution("transformer", replacements), {"train_exact_steps", "train_seeded"}) == expected


def test_staff_training_passes_the_exact_step_and_seed_checks_in_process():
    assert run_in_process(edited_solution("transformer", []), {"train_exact_steps", "train_seeded"}) == set()
