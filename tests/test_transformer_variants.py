"""The transformer grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it, graded only on the
questions the edit concerns (later questions reuse the code, and their `needs` point back here).
"""
import pytest

from autograder.authoring import assignments
from autograder.grading import runner
from tests.helpers import edited_solution, failing_in_process

TRANSFORMER = assignments.get("transformer")
LN_CHECKS = {"public_norms", "layernorm_builtin", "norm_gradients"}
ADAMW_CHECKS = {"public_training_pieces", "adamw_vs_torch", "adamw_class"}  # AdamW runs adamw_step
PRE_NORM = ("            a = self.attn(self.norm1(x), causal=self.causal, cache=cache)\n"
            "            a, new = a if cache is not None else (a, None)\n"
            "            x = x + a\n")
CACHE_CAT = "            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, T_past + T, d_head)\n"
KV_CHECKS = {"public_generation", "cache_step", "cache_growth", "generate_greedy"}
CLIP_RETURN = "    return [g * factor for g in grads], float(total)"
ADAMW_LR = "        lr = self.lr if lr is None else lr\n"
ADAMW_SKIP = "            if p.grad is None:\n                continue\n"
SAMPLE_PROBS = "            probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)"
RMS_RETURN = "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight"
ATTN_SOFTMAX = "        out = torch.softmax(scores, dim=-1) @ v  # (B, h, T, d_head)"
ROPE_THETA = "    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)"

# name: (replacements, questions graded, failing checks expected)
BUGS = {
    # tensors made on the default device: they break only on a GPU, and the probe that keeps the data finds them
    "AdamW moments from torch.zeros(p.shape)": (
        [("        self.m = [torch.zeros_like(p) for p in self.params]\n        self.v = [torch.zeros_like(p) for p in self.params]",
          "        self.m = [torch.zeros(p.shape) for p in self.params]\n        self.v = [torch.zeros(p.shape) for p in self.params]")],
        {"5"}, {"adamw_class"}),
    "generate writes the greedy token into a tensor made without device": (
        [("            nxt = logits.argmax(dim=-1, keepdim=True)",
          "            nxt = torch.zeros(idx.shape[0], 1, dtype=torch.long)\n            nxt[:, 0] = logits.argmax(dim=-1)")],
        {"7"}, {"generate_greedy"}),
    "greedy_decode's BOS column without device": (
        [("    out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)",
          "    out = torch.full((src.shape[0], 1), bos, dtype=torch.long)")], {"8"}, {"greedy_decode_matches"}),
    "post-norm where pre-norm is asked": (
        [("        if self.post_norm:\n            a = self.attn(x,", "        if True:\n            a = self.attn(x,")],
        {"3"}, {"public_block", "block_builtin", "block_gradients"}),
    "no residual around attention": (
        [(PRE_NORM, PRE_NORM.replace("x = x + a", "x = a"))], {"3"},
        {"public_block", "block_builtin", "block_gradients"}),
    "residual added in place into the caller's tensor": (
        [(PRE_NORM, PRE_NORM.replace("x = x + a", "x += a"))], {"3"}, {"block_builtin", "block_gradients",
                                                                       "public_block"}),
    "LayerNorm over the batch axis": (
        [("        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
          "        mean = x.mean(dim=0, keepdim=True)\n        var = ((x - mean) ** 2).mean(dim=0, keepdim=True)")],
        {"1"}, LN_CHECKS | {"norm_extremes"}),
    "LayerNorm with the unbiased variance": (
        [("        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased",
          "        var = x.var(dim=-1, keepdim=True)")], {"1"}, LN_CHECKS | {"norm_extremes"}),
    "GELU with the tanh approximation": (
        [("        return self.proj(F.gelu(self.fc(x)))", "        return self.proj(F.gelu(self.fc(x), approximate='tanh'))")],
        {"2"}, {"public_feed_forward", "mlp_formula", "ffn_gradients"}),
    "SwiGLU gates the wrong projection": (
        [("F.silu(self.gate(x)) * self.up(x)", "self.gate(x) * F.silu(self.up(x))")], {"2"},
        {"public_feed_forward", "swiglu_formula", "ffn_gradients"}),
    "attention scaled by sqrt(d_model)": (
        [("/ math.sqrt(self.d_head)  # (B, h, T, T_k)", "/ math.sqrt(x.shape[-1])")], {"3"},
        {"attention_self", "attention_cross", "attention_gradients", "public_block", "block_builtin",
         "block_gradients", "attention_extremes"}),  # extremes: scores of 1000 / sqrt(2) are not quite one-hot
    "RoPE rotates the pairs (k, k + d/2)": (
        [("    even, odd = x[..., 0::2], x[..., 1::2]\n"
          "    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)",
          "    even, odd = x[..., : d // 2], x[..., d // 2:]\n"
          "    return torch.cat((even * cos - odd * sin, even * sin + odd * cos), dim=-1)")],
        {"3"}, {"attention_self", "block_builtin", "public_block", "rope_formula"}),
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
        [("(v_hat.sqrt() + eps)", "(v_hat + eps).sqrt()")], {"5"}, {"adamw_class", "adamw_vs_torch",
                                                                    "public_training_pieces"}),
    "warmup off by one": (
        [("        return max_lr * (step + 1) / warmup_steps", "        return max_lr * step / warmup_steps")], {"5"},
        {"public_training_pieces", "schedule_edges"}),
    "clipping each gradient by its own norm": (
        [("    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))\n"
          "    factor = min(1.0, max_norm / (float(total) + 1e-6))\n"
          "    return [g * factor for g in grads], float(total)",
          "    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))\n"
          "    return [g * min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads], float(total)")],
        {"5"}, {"clip_global_norm", "public_training_pieces"}),
    "get_batch never draws the last crop": (
        [("torch.randint(0, len(data) - block_size, (batch_size,)", "torch.randint(0, len(data) - block_size - 1, (batch_size,)")],
        {"5"}, {"get_batch_crops", "public_training_pieces"}),
    "a cache that drops the oldest position": (
        [(CACHE_CAT, CACHE_CAT.replace("torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)",
                                       "torch.cat([cache[0], k], dim=2)[:, :, 1:], torch.cat([cache[1], v], dim=2)[:, :, 1:]"))],
        {"7"}, KV_CHECKS | {"generate_sampling"}),
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
        {"8"}, {"decoder_block_builtin", "greedy_decode_matches", "public_seq2seq", "public_seq2seq_train",
                "seq2seq_builtin", "seq2seq_gradients", "seq2seq_sorting", "seq2seq_train_seeded",
                "seq2seq_train_steps"}),
    # (the encoder then gets no gradient: training crashes in clip_grads)
    # ---- a second hunt: blind spots (flags, keywords, in-place edits, state, randomness) ----
    "RMSNorm with eps outside the square root": (
        [("        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
          "        return x / (torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + self.eps) * self.weight")], {"1"},
        {"norm_extremes", "norm_gradients", "public_norms", "rmsnorm_builtin"}),
    "LayerNorm with eps fixed at 1e-5": (
        [("        out = (x - mean) / torch.sqrt(var + self.eps) * self.weight",
          "        out = (x - mean) / torch.sqrt(var + 1e-5) * self.weight")], {"1"}, {"layernorm_builtin",
                                                                                       "public_norms"}),
    "LayerNorm centering its input in place": (
        [("        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n",
          "        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n        x -= mean\n        mean = 0\n")], {"1"},
        {"norm_gradients", "norm_extremes", "public_norms"}),  # norm_extremes' samples go through call_pure
    "SwiGLU with SiLU after the product": (
        [("self.down(F.silu(self.gate(x)) * self.up(x))", "self.down(F.silu(self.gate(x) * self.up(x)))")], {"2"},
        {"public_feed_forward", "swiglu_formula", "ffn_gradients"}),
    "MLP with ReLU": (
        [("self.proj(F.gelu(self.fc(x)))", "self.proj(F.relu(self.fc(x)))")], {"2"},
        {"public_feed_forward", "mlp_formula", "ffn_gradients"}),
    "RoPE ignores its base argument": (
        [("    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)",
          "    theta = 10000.0 ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)")], {"3"},
        {"public_block", "rope_formula"}),
    "RoPE with theta_k = base^(-k/d)": (
        [("    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)",
          "    theta = base ** (-torch.arange(0, d // 2, device=x.device, dtype=x.dtype) / d)")], {"3"},
        {"attention_self", "block_builtin", "public_block", "rope_formula"}),
    "RoPE also rotates the values": (
        [("            q, k = apply_rope(q, positions), apply_rope(k, positions)",
          "            q, k, v = apply_rope(q, positions), apply_rope(k, positions), apply_rope(v, positions)")], {"3"},
        {"attention_self", "block_builtin", "public_block"}),
    "heads merged without the transpose": (
        [("        out = self.out_proj(out.transpose(1, 2).reshape(B, T, -1))",
          "        out = self.out_proj(out.reshape(B, T, -1))")], {"3"},
        {"attention_cross", "attention_extremes", "attention_gradients", "attention_self", "block_builtin",
         "block_causal", "block_gradients", "public_block"}),
    "causal mask hides the diagonal too": (
        [('            scores = scores.masked_fill(j > i, float("-inf"))', "            scores = scores.masked_fill(j >= i, -1e9)")],
        {"3"}, {"attention_extremes", "attention_gradients", "attention_self", "block_builtin", "block_causal",
                "block_gradients", "public_block"}),
    "Block reuses norm1 before the MLP": (
        [("            x = x + self.mlp(self.norm2(x))", "            x = x + self.mlp(self.norm1(x))")], {"3"},
        {"public_block", "block_builtin", "block_gradients"}),
    "no final norm": (
        [("        logits = self.head(self.norm_f(x))  # (B, T, V)", "        logits = self.head(x)  # (B, T, V)")], {"4"},
        {"public_lm", "lm_builtin", "lm_edges", "lm_gradients"}),
    "param_count counts learned positions for RoPE too": (
        [('    total += max_len * d_model if positions == "learned" else 0\n', "    total += max_len * d_model\n")], {"4"},
        {"param_count_formula", "public_lm"}),
    "param_count counts LayerNorm biases when bias=False": (
        [("    norm = d_model * (2 if bias else 1)", "    norm = 2 * d_model")], {"4"}, {"param_count_formula",
                                                                                         "public_lm"}),
    "param_count returns a float": (
        [("    return total\n", "    return total * 1.0\n")], {"4"}, {"param_count_formula", "public_lm"}),
    "lr_at cosine over total_steps, not after warmup": (
        [("    progress = (step - warmup_steps) / (total_steps - warmup_steps)", "    progress = step / total_steps")],
        {"5"}, {"public_training_pieces", "schedule_edges"}),
    "lr_at keeps the cosine after total_steps": (
        [("    if step >= total_steps:\n        return min_lr\n", "")], {"5"}, {"public_training_pieces",
                                                                                "schedule_edges"}),
    "clip_grads returns the norm after clipping": (
        [(CLIP_RETURN, "    return [g * factor for g in grads], float(total) * factor")], {"5"}, {"clip_global_norm",
                                                                                                  "public_training_pieces"}),
    "clip_grads scales the gradients in place": (
        [(CLIP_RETURN, "    return [g.mul_(factor) for g in grads], float(total)")], {"5"}, {"clip_global_norm",
                                                                                             "public_training_pieces"}),
    "clip_grads returns the norm as a tensor": (
        [(CLIP_RETURN, "    return [g * factor for g in grads], total")], {"5"}, {"clip_global_norm",
                                                                                  "public_training_pieces"}),
    "get_batch makes a new generator from a Generator's seed each call": (
        [("    if isinstance(generator, int):\n        generator = torch.Generator().manual_seed(generator)\n",
          "    if isinstance(generator, int):\n        generator = torch.Generator().manual_seed(generator)\n"
          "    else:\n        generator = torch.Generator().manual_seed(generator.initial_seed())\n")], {"5"},
        {"get_batch_crops"}),
    "AdamW defaults eps to 1e-5 (a mutant that survived)": (  # lmgrade mutants transformer
        [("    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):",
          "    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-5, weight_decay=0.01):")], {"5"},
        {"adamw_class"}),
    "AdamW.step ignores the lr it is given": (
        [(ADAMW_LR, "        lr = self.lr\n")], {"5"}, {"adamw_class", "public_training_pieces"}),
    "AdamW.step keeps a given lr for later steps": (
        [(ADAMW_LR, "        if lr is not None:\n            self.lr = lr\n        lr = self.lr\n")], {"5"}, {"adamw_class",
                                                                                                              "public_training_pieces"}),
    "AdamW counts its step once per parameter": (
        [("        self.t += 1\n        lr = self.lr", "        lr = self.lr"),
         (ADAMW_SKIP + "            new,", ADAMW_SKIP + "            self.t += 1\n            new,")], {"5"}, {"adamw_class",
                                                                                                               "public_training_pieces"}),
    "AdamW does not pass eps and weight_decay on": (
        [("self.t, lr, self.betas,\n                                                   self.eps, self.weight_decay)",
          "self.t, lr, self.betas)")], {"5"}, {"adamw_class", "public_training_pieces"}),
    "AdamW replaces the list entry instead of the parameter": (
        [("            p.copy_(new)", "            self.params[i] = new")], {"5"}, {"adamw_class",
                                                                                    "public_training_pieces"}),
    "AdamW decays parameters without a gradient": (
        [(ADAMW_SKIP + "            new, self.m[i], self.v[i] = adamw_step(p, p.grad,",
          "            grad = p.grad if p.grad is not None else torch.zeros_like(p)\n"
          "            new, self.m[i], self.v[i] = adamw_step(p, grad,")], {"5"}, {"adamw_class",
                                                                                   "public_training_pieces"}),
    "AdamW with one state for all parameters": (
        [("        self.m = [torch.zeros_like(p) for p in self.params]\n        self.v = [torch.zeros_like(p) for p in self.params]\n",
          "        self.m = [0.0] * len(self.params)\n        self.v = [0.0] * len(self.params)\n"),
         ("            new, self.m[i], self.v[i] = adamw_step(p, p.grad, self.m[i], self.v[i],",
          "            new, m, v = adamw_step(p, p.grad, self.m[0], self.v[0],"),
         ("            p.copy_(new)", "            p.copy_(new)\n            self.m = [m] * len(self.params)\n"
                                    "            self.v = [v] * len(self.params)")], {"5"}, {"adamw_class",
                                                                                             "public_training_pieces"}),
    "temperature applied after the softmax": (
        [(SAMPLE_PROBS, "            probs = torch.softmax(filter_logits(logits, 1.0, top_k, top_p), dim=-1) / temperature")],
        {"7"}, {"generate_sampling", "public_generation"}),
    "top-k and top-p not passed on when sampling": (
        [(SAMPLE_PROBS, "            probs = torch.softmax(filter_logits(logits, temperature), dim=-1)")], {"7"},
        {"generate_sampling", "public_generation"}),
    "sampling generator re-created at every step": (
        [("            nxt = torch.multinomial(probs, 1, generator=generator)",
          "            nxt = torch.multinomial(probs, 1, generator=torch.Generator(device=idx.device).manual_seed(seed))")],
        {"7"}, {"generate_sampling"}),
    "generate seeds torch's global generator": (
        [("    generator = torch.Generator(device=idx.device).manual_seed(seed)",
          "    torch.manual_seed(seed)\n    generator = None")], {"7"}, {"generate_sampling", "public_generation"}),
    "top-k drops ties at the k-th value": (
        [('        logits = logits.masked_fill(logits < kth, float("-inf"))',
          "        idx_k = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).indices\n"
          "        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, idx_k, True)\n"
          '        logits = logits.masked_fill(~keep, float("-inf"))')], {"7"}, {"filter_boundaries",
                                                                                 "public_generation"}),
    "top-p on the probabilities from before top-k": (
        [("    logits = logits / temperature\n    if top_k is not None:",
          "    logits = logits / temperature\n    probs = torch.softmax(logits, dim=-1)\n    if top_k is not None:"),
         ("    if top_p is not None:\n        probs = torch.softmax(logits, dim=-1)\n", "    if top_p is not None:\n")],
        {"7"}, {"filter_boundaries", "public_generation"}),
    "filter_logits divides the caller's logits in place": (
        [("    logits = logits / temperature\n", "    logits /= temperature\n")], {"7"}, {"filter_boundaries",
                                                                                          "public_generation"}),
    "cached generation feeds the whole sequence every step": (
        [("            logits, cache = model(new, cache)", "            logits, cache = model(idx, cache)")], {"7"},
        {"generate_greedy", "generate_sampling", "public_generation"}),
    # ---- a third hunt: extreme values, devices, the edges the docstrings fix ----
    "LayerNorm variance as E[x^2] - E[x]^2": (
        [("        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased",
          "        var = (x * x).mean(dim=-1, keepdim=True) - mean ** 2")], {"1"},
        {"public_norms", "norm_extremes", "norm_gradients"}),  # the matrix's extremes: 1e6 + noise cancels
    "RMSNorm upcast to float32 and back (LLaMA style)": (
        [(RMS_RETURN, "        h = x.float()\n        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)\n"
                      "        return h.type_as(x) * self.weight")], {"1"},
        {"public_norms", "rmsnorm_builtin", "norm_extremes", "norm_gradients"}),
    "MLP written for (B, T, d) input": (
        [("        return self.proj(F.gelu(self.fc(x)))",
          "        B, T, d = x.shape\n        return self.proj(F.gelu(self.fc(x.reshape(B * T, d)))).reshape(B, T, d)")],
        {"2"}, {"mlp_formula"}),
    "RMSNorm written for 3-D input": (
        [(RMS_RETURN, RMS_RETURN.replace("dim=-1", "dim=2"))], {"1"}, {"public_norms", "rmsnorm_builtin"}),
    "attention softmax by hand": (
        [(ATTN_SOFTMAX, "        weights = torch.exp(scores)\n"
                        "        out = (weights / weights.sum(dim=-1, keepdim=True)) @ v  # (B, h, T, d_head)")], {"3"},
        {"public_block", "attention_extremes"}),
    "causal mask made without device=": (
        [("            i = torch.arange(T, device=x.device)[:, None] + (T_k - T)\n"
          "            j = torch.arange(T_k, device=x.device)[None, :]\n",
          "            i = torch.arange(T)[:, None] + (T_k - T)\n            j = torch.arange(T_k)[None, :]\n")], {"3"},
        {"attention_gradients", "block_gradients"}),
    "RoPE frequencies made without device=": (
        [(ROPE_THETA, ROPE_THETA.replace("device=x.device, ", ""))], {"3"}, {"rope_formula", "attention_gradients"}),
    "RoPE angles in float32 (one bug, one question: Q4 and Q7 grade on the student's own RoPE)": (
        [(ROPE_THETA + "  # (d/2,)\n    angle = positions.to(x.dtype)[:, None] * theta",
          "    theta = base ** (-torch.arange(0, d, 2, device=x.device).float() / d)  # (d/2,)\n"
          "    angle = positions.float()[:, None] * theta")], {"3", "4", "7"},
        {"public_block", "rope_formula", "attention_self", "block_builtin"}),
    "apply_rope written for 4-D x": (
        [("    even, odd = x[..., 0::2], x[..., 1::2]", "    even, odd = x[:, :, :, 0::2], x[:, :, :, 1::2]")], {"3"},
        {"rope_formula"}),
    "learned positions made without device=": (
        [("self.pos_emb(torch.arange(past, past + idx.shape[1], device=idx.device))",
          "self.pos_emb(torch.arange(past, past + idx.shape[1]))")], {"4"}, {"lm_edges"}),
    "AdamW.step with lr or self.lr (step(lr=0.0) trains at the default rate)": (
        [(ADAMW_LR, "        lr = lr or self.lr\n")], {"5"}, {"public_training_pieces", "adamw_class"}),
    "get_batch from Python lists (batches off the data's device)": (
        [("    x = torch.stack([data[s:s + block_size] for s in starts.tolist()])\n"
          "    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts.tolist()])\n",
          "    x = torch.tensor([data[s:s + block_size].tolist() for s in starts.tolist()])\n"
          "    y = torch.tensor([data[s + 1:s + block_size + 1].tolist() for s in starts.tolist()])\n")], {"5"},
        {"get_batch_crops"}),
    "lr_at divides by warmup_steps before testing it (warmup_steps=0)": (
        [("    if step < warmup_steps:\n        return max_lr * (step + 1) / warmup_steps\n",
          "    warm = max_lr * (step + 1) / warmup_steps\n    if step < warmup_steps:\n        return warm\n")], {"5"},
        {"schedule_edges"}),
    "filter_logits top-p by a hand softmax": (
        [("        probs = torch.softmax(logits, dim=-1)\n        above",
          "        probs = torch.exp(logits) / torch.exp(logits).sum(dim=-1, keepdim=True)\n        above")], {"7"},
        {"public_generation", "filter_boundaries"}),
    "filter_logits masks with a tensor made without device=": (
        [('        logits = logits.masked_fill(logits < kth, float("-inf"))',
          '        logits = torch.where(logits < kth, torch.full(logits.shape, float("-inf"), dtype=logits.dtype), logits)')],
        {"7"}, {"filter_boundaries", "public_generation"}),  # generate calls filter_logits: its public device probe
    "generate normalises exp(logits / T) by hand": (
        [(SAMPLE_PROBS, "            weights = torch.exp(filter_logits(logits, temperature, top_k, top_p))\n"
                        "            probs = weights / weights.sum(dim=-1, keepdim=True)")], {"7"},
        {"public_generation", "generate_sampling"}),
    # the fourth hunt: code paths no check reached
    "Block's post-norm branch ignores the cache (the cache wired into pre-norm only)": (
        [("        if self.post_norm:\n            a = self.attn(x, causal=self.causal, cache=cache)\n"
          "            a, new = a if cache is not None else (a, None)\n",
          "        if self.post_norm:\n            a, new = self.attn(x, causal=self.causal), cache\n")], {"7"},
        {"cache_step"}),
    "lr_at computes progress before the end test (warmup_steps == total_steps divides by 0)": (
        [("    if step >= total_steps:\n        return min_lr\n"
          "    progress = (step - warmup_steps) / (total_steps - warmup_steps)\n",
          "    progress = (step - warmup_steps) / (total_steps - warmup_steps)\n"
          "    if progress >= 1:\n        return min_lr\n")], {"5"}, {"schedule_edges"}),
    "generate without the cache samples from softmax(logits / T), ignoring top_k and top_p": (
        [("    generator = torch.Generator(device=idx.device).manual_seed(seed)\n",
          "    generator = torch.Generator(device=idx.device).manual_seed(seed)\n"
          "    if not use_cache:  # the plain loop written before the cache\n"
          "        for _ in range(max_new_tokens):\n            logits = model(idx)[:, -1, :]  # (B, V)\n"
          "            if temperature == 0:\n                nxt = logits.argmax(dim=-1, keepdim=True)\n"
          "            else:\n                probs = torch.softmax(logits / temperature, dim=-1)\n"
          "                nxt = torch.multinomial(probs, 1, generator=generator)\n"
          "            idx = torch.cat([idx, nxt], dim=1)\n        return idx\n")], {"7"},
        {"generate_sampling", "public_generation"}),
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
    "get_batch by index arithmetic": (  # the starts moved first: a CPU index plus a GPU arange would not add
        [("    x = torch.stack([data[s:s + block_size] for s in starts.tolist()])\n"
          "    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts.tolist()])\n",
          "    offsets = starts.to(data.device)[:, None] + torch.arange(block_size, device=data.device)\n"
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
    "RMSNorm by x.pow(2).mean and a division by the square root": (
        [("        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
          "        rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)\n        return self.weight * (x / rms)")],
        {"1"}),
    "RoPE with repeated cos/sin and a rotate-half of pairs": (
        [("    even, odd = x[..., 0::2], x[..., 1::2]\n"
          "    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)",
          "    cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)\n"
          "    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)\n"
          "    return x * cos + rotated * sin")], {"3"}),
    "AdamW with its state in a dict by index, keyword calls and p.data": (
        [("        self.m = [torch.zeros_like(p) for p in self.params]\n        self.v = [torch.zeros_like(p) for p in self.params]\n"
          "        self.t = 0\n",
          "        self.state = {i: (torch.zeros_like(p), torch.zeros_like(p)) for i, p in enumerate(self.params)}\n"
          "        self.steps = 0\n"),
         ("        self.t += 1\n        lr = self.lr if lr is None else lr\n        for i, p in enumerate(self.params):\n"
          "            if p.grad is None:\n                continue\n"
          "            new, self.m[i], self.v[i] = adamw_step(p, p.grad, self.m[i], self.v[i], self.t, lr, self.betas,\n"
          "                                                   self.eps, self.weight_decay)\n            p.copy_(new)",
          "        self.steps += 1\n        for i, p in enumerate(self.params):\n            if p.grad is None:\n"
          "                continue\n            m, v = self.state[i]\n"
          "            new, m, v = adamw_step(p.detach(), p.grad, m, v, self.steps, self.lr if lr is None else lr,\n"
          "                                   betas=self.betas,\n"
          "                                   eps=self.eps, weight_decay=self.weight_decay)\n"
          "            self.state[i] = (m, v)\n            p.data = new")], {"5"}),
    "attention with a hand softmax that subtracts each row's maximum": (
        [(ATTN_SOFTMAX, "        scores = scores - scores.amax(dim=-1, keepdim=True)\n        weights = scores.exp()\n"
                        "        out = (weights / weights.sum(dim=-1, keepdim=True)) @ v  # (B, h, T, d_head)")], {"3",
                                                                                                                   "7"}),
    "LayerNorm's mean accumulated in float64 and cast back": (
        [("        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n",
          "        mean = x.double().mean(dim=-1, keepdim=True).to(x.dtype)  # (..., 1)\n")], {"1"}),
    "sampling from log_softmax(...).exp()": (
        [(SAMPLE_PROBS, "            probs = torch.log_softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1).exp()")],
        {"7"}),
    "clip_grads by vector norms in the gradients' dtype": (
        [("    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))\n",
          "    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))\n")], {"5"}),
}


# Q8 in this process on every check but the sorting run (a full Q8 run trains a sorter, ~10 s): its model and
# decoding bugs with their exact failing checks, and correct variants that pass all of them.
SEQ2SEQ_BUGS = {
    "cross-attention made causal": (
        [("        x = x + self.cross_attn(self.norm2(x), context=memory)",
          "        x = x + self.cross_attn(self.norm2(x), context=memory, causal=True)")],
        {"decoder_block_builtin", "greedy_decode_matches", "public_seq2seq", "public_seq2seq_train", "seq2seq_builtin", "seq2seq_gradients", "seq2seq_train_seeded", "seq2seq_train_steps"}),  # a query row may see no key: NaN
    "greedy_decode feeds only the last token": (
        [("        nxt = model.decode(out, memory)[:, -1].argmax(dim=-1, keepdim=True)",
          "        nxt = model.decode(out[:, -1:], memory)[:, -1].argmax(dim=-1, keepdim=True)")],
        {"greedy_decode_matches", "public_seq2seq"}),
}

SEQ2SEQ_CORRECT = {
    "train_seq2seq returns a CPU copy of its weights (for saving)": [
        ("    return {k: v.detach().clone() for k, v in model.state_dict().items()}\n",
         "    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}\n")],
    "greedy_decode into a preallocated tensor": (
        [("    out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)\n"
          "    for _ in range(n):\n        nxt = model.decode(out, memory)[:, -1].argmax(dim=-1, keepdim=True)\n"
          "        out = torch.cat([out, nxt], dim=1)\n    return out[:, 1:]",
          "    out = torch.full((src.shape[0], n + 1), bos, dtype=torch.long, device=src.device)\n"
          "    for i in range(n):\n        out[:, i + 1] = model.decode(out[:, :i + 1], memory)[:, -1].argmax(dim=-1)\n"
          "    return out[:, 1:]")]),
    "train_seq2seq with the loss on transposed logits and rows by randint(N, ...)": (
        [('        rows = torch.randint(0, src.shape[0], (s["batch_size"],), generator=generator).to(src.device)',
          '        rows = torch.randint(src.shape[0], (s["batch_size"],), generator=generator).to(src.device)'),
         ("        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n        optimizer.zero_grad()\n"
          "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
          "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n    return",
          "        loss = F.cross_entropy(logits.transpose(1, 2), y)\n        optimizer.zero_grad()\n"
          "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
          "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n    return")]),
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
    ("param_count forgets the final norm", "get_batch never draws the last crop",
     "cached generation feeds the whole sequence every step"),
    ("untied head", "cross-attention with keys and values from the decoder",
     "filter_logits divides the caller's logits in place"),
    # the second hunt: a Q5 bug beside bugs whose code Q5 never runs; Q7 and Q8 bugs beside code they never run
    ("RoPE ignores its base argument", "AdamW.step ignores the lr it is given", "RMSNorm with eps outside the square root"),
    ("RoPE with theta_k = base^(-k/d)", "AdamW.step keeps a given lr for later steps", "SwiGLU with SiLU after the product"),
    ("RoPE also rotates the values", "AdamW counts its step once per parameter"),
    ("heads merged without the transpose", "AdamW does not pass eps and weight_decay on"),
    ("causal mask hides the diagonal too", "AdamW replaces the list entry instead of the parameter"),
    ("Block reuses norm1 before the MLP", "AdamW decays parameters without a gradient"),
    ("temperature applied after the softmax", "AdamW with one state for all parameters", "LayerNorm with eps fixed at 1e-5"),
    ("LayerNorm centering its input in place", "MLP with ReLU", "lr_at cosine over total_steps, not after warmup"),
    ("no final norm", "lr_at keeps the cosine after total_steps"),
    ("top-k and top-p not passed on when sampling", "clip_grads returns the norm after clipping",
     "param_count counts learned positions for RoPE too"),
    ("sampling generator re-created at every step", "clip_grads scales the gradients in place",
     "param_count counts LayerNorm biases when bias=False"),
    ("top-k drops ties at the k-th value", "clip_grads returns the norm as a tensor", "param_count returns a float"),
    ("top-p on the probabilities from before top-k", "get_batch makes a new generator from a Generator's seed each call"),
    # the third hunt: RMSNorm is used by no later question; a LayerNorm bug goes only beside Q5
    ("LayerNorm variance as E[x^2] - E[x]^2", "AdamW.step with lr or self.lr (step(lr=0.0) trains at the default rate)",
     "MLP written for (B, T, d) input"),
    ("RMSNorm upcast to float32 and back (LLaMA style)", "attention softmax by hand",
     "get_batch from Python lists (batches off the data's device)"),
    ("RMSNorm written for 3-D input", "causal mask made without device=",
     "lr_at divides by warmup_steps before testing it (warmup_steps=0)"),
    # the fourth hunt
    ("Block's post-norm branch ignores the cache (the cache wired into pre-norm only)",
     "lr_at computes progress before the end test (warmup_steps == total_steps divides by 0)"),
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


LM_UPDATE = ("        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n"
             "        optimizer.zero_grad()\n        loss.backward()\n"
             '        clipped, _ = clip_grads([p.grad for p in params], s["grad_clip"])\n'
             "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses")

# Q6's training bugs, checked in this process against the exact-step and seeding checks only (a
# full Q6 grading run trains three models; these two checks decide such bugs before any threshold).
TRAINING_BUGS = {
    "a constant learning rate (no warmup or cosine)": (
        [("        optimizer.step(lr)\n        losses.append", "        optimizer.step()\n        losses.append")],
        {"public_train_one_step", "train_exact_steps"}),
    "no gradient clipping": (
        [('        clipped, _ = clip_grads([p.grad for p in params], s["grad_clip"])\n'
          "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses",
          "        optimizer.step(lr)\n        losses")], {"public_train_one_step", "train_exact_steps"}),
    "AdamW created anew at every step": (
        [("        optimizer.zero_grad()\n        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], "
          's["grad_clip"])\n        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n'
          "        losses",
          "        optimizer = AdamW(params, lr=s[\"max_lr\"], betas=tuple(s[\"betas\"]), eps=s[\"eps\"], "
          "weight_decay=s[\"weight_decay\"])\n"
          "        optimizer.zero_grad()\n        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], "
          's["grad_clip"])\n        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n'
          "        losses")], {"public_train_one_step", "train_exact_steps"}),
    "the model's seed not set": (
        [('    torch.manual_seed(s["seed"])\n    model = TransformerLM', "    model = TransformerLM")], {"train_seeded"}),
    "zero_grad between backward and step": (
        [(LM_UPDATE, LM_UPDATE.replace("        optimizer.zero_grad()\n", "").replace(
            "        optimizer.step(lr)", "        optimizer.zero_grad()\n        optimizer.step(lr)"))], {"public_train_one_step",
                                                                                                           "train_exact_steps"}),
    "no zero_grad (gradients pile up)": (
        [(LM_UPDATE, LM_UPDATE.replace("        optimizer.zero_grad()\n", ""))], {"public_train_one_step",
                                                                                  "train_exact_steps"}),
    "clipped gradients computed but never used": (
        [(LM_UPDATE, LM_UPDATE.replace("        clipped, _ = clip_grads(", "        clip_grads(").replace(
            "        for p, g in zip(params, clipped):\n            p.grad = g\n", ""))], {"public_train_one_step",
                                                                                           "train_exact_steps"}),
    "the schedule one step ahead": (
        [('        lr = lr_at(step, s["max_lr"], s["warmup_steps"], s["steps"], s["min_lr"])\n        x, y = get_batch(',
          '        lr = lr_at(step + 1, s["max_lr"], s["warmup_steps"], s["steps"], s["min_lr"])\n        x, y = get_batch(')],
        {"public_train_one_step", "train_exact_steps"}),
    "the batch generator re-made from the seed at every step": (  # only the varied stream shows it
        [('        x, y = get_batch(train_ids, s["batch_size"], s["block_size"], generator)',
          '        x, y = get_batch(train_ids, s["batch_size"], s["block_size"], s["seed"])')], {"public_train_one_step",
                                                                                                 "train_exact_steps"}),
    "init_state ignored": (
        [("    if init_state is not None:\n        model.load_state_dict(init_state)\n", "")], {"public_train_one_step",
                                                                                                "train_exact_steps"}),
    "losses kept as tensors": (
        [("        losses.append(loss.item())", "        losses.append(loss)")], {"public_train_one_step",
                                                                                  "train_exact_steps"}),
    "the loss summed over the batch": (
        [(LM_UPDATE, LM_UPDATE.replace("y.reshape(-1))", 'y.reshape(-1), reduction="sum")'))], {"public_train_one_step",
                                                                                                "train_exact_steps"}),
    "train_lm prints its last loss after the loop (IndexError at steps=0)": (
        [("    return {k: v.detach().clone() for k, v in model.state_dict().items()}, losses",
          "    print(f\"trained {s['steps']} steps, last loss {losses[-1]:.4f}\")\n"
          "    return {k: v.detach().clone() for k, v in model.state_dict().items()}, losses")], {"train_exact_steps"}),
}

TRAINING_BUGS["the loss as -log(softmax) in two steps (inf for a confident wrong guess)"] = (
    [(LM_UPDATE, LM_UPDATE.replace(
        "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n",
        "        probs = torch.softmax(logits, dim=-1)\n        loss = -torch.log(probs.gather(-1, y[..., None])).mean()\n"))],
    {"public_train_one_step", "train_exact_steps"})

# train_seq2seq's bugs, against Q8's exact-step and seeding checks in this process (the sorting run is slow).
S2S_UPDATE = LM_UPDATE.replace("        losses", "    return")
SEQ2SEQ_TRAINING_BUGS = {
    "train_seq2seq with a constant learning rate": (
        [(S2S_UPDATE, S2S_UPDATE.replace("optimizer.step(lr)", "optimizer.step()"))], {"public_seq2seq_train",
                                                                                       "seq2seq_train_steps"}),
    "train_seq2seq without clipping": (
        [(S2S_UPDATE, S2S_UPDATE.replace('        clipped, _ = clip_grads([p.grad for p in params], s["grad_clip"])\n'
                                         "        for p, g in zip(params, clipped):\n            p.grad = g\n", ""))],
        {"public_seq2seq_train", "seq2seq_train_steps"}),
    "train_seq2seq without the seed": (
        [('    torch.manual_seed(s["seed"])\n    model = Seq2Seq', "    model = Seq2Seq")],
        {"seq2seq_train_seeded", "seq2seq_train_steps"}),
    "train_seq2seq drawing rows without the generator": (
        [('        rows = torch.randint(0, src.shape[0], (s["batch_size"],), generator=generator)',
          '        rows = torch.randint(0, src.shape[0], (s["batch_size"],))')], {"public_seq2seq_train",
                                                                                  "seq2seq_train_steps"}),
    "train_seq2seq without the weight decay": (
        [('eps=s["eps"], weight_decay=s["weight_decay"])\n    generator = torch.Generator().manual_seed(s["seed"])\n    bos',
          'eps=s["eps"])\n    generator = torch.Generator().manual_seed(s["seed"])\n    bos')], {"public_seq2seq_train",
                                                                                                 "seq2seq_train_steps"}),
    "train_seq2seq with the loss as -log(softmax) in two steps": (
        [(S2S_UPDATE, S2S_UPDATE.replace(
            "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n",
            "        probs = torch.softmax(logits, dim=-1)\n"
            "        loss = -torch.log(probs.gather(-1, y[..., None])).mean()\n"))],
        {"public_seq2seq_train", "seq2seq_train_steps"}),
    "train_seq2seq scoring position t against target t + 1": (
        [(S2S_UPDATE, S2S_UPDATE.replace("logits.reshape(-1, logits.shape[-1]), y.reshape(-1)",
                                         "logits[:, :-1].reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1)"))],
        {"public_seq2seq_train", "seq2seq_train_steps"}),
}
# correct training loops written differently: every exact-step and seeding check passes
TRAINING_CORRECT = {
    "train_lm returns a CPU copy of its weights (for saving)": [
        ("    return {k: v.detach().clone() for k, v in model.state_dict().items()}, losses",
         "    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}, losses")],
    "train_lm with the loss in float64 by nll_loss of log_softmax, the model moved by .to(device=...)": [
        (LM_UPDATE, LM_UPDATE.replace(
            "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n",
            "        logp = F.log_softmax(logits.double(), dim=-1)\n"
            "        loss = F.nll_loss(logp.flatten(0, 1), y.flatten()).float()\n")),
        ("    model = TransformerLM(**config).to(train_ids.device)", "    model = TransformerLM(**config).to(device=train_ids.device)")],
    "train_lm with zero_grad first, a log-softmax loss and AdamW over model.parameters()": [
        (LM_UPDATE, LM_UPDATE.replace("        optimizer.zero_grad()\n", "").replace(
            "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n",
            "        optimizer.zero_grad()\n"
            "        loss = -torch.log_softmax(logits, -1).gather(-1, y[..., None]).mean()\n")),
        ('    optimizer = AdamW(params, lr=s["max_lr"], betas=tuple(s["betas"]), eps=s["eps"], weight_decay=s["weight_decay"])\n'
         "    generator = torch.Generator().manual_seed(s[\"seed\"])\n    losses = []",
         '    optimizer = AdamW(model.parameters(), s["max_lr"], s["betas"], s["eps"], s["weight_decay"])\n'
         "    generator = torch.Generator().manual_seed(s[\"seed\"])\n    losses = []")],
}
TRAINING_CHECKS = {"public_train_one_step", "train_exact_steps", "train_seeded"}
SEQ2SEQ_TRAINING_CHECKS = {"public_seq2seq_train", "seq2seq_train_steps", "seq2seq_train_seeded"}


def run_in_process(text: str, names: set) -> set:
    return failing_in_process("transformer", text, names)


@pytest.mark.parametrize("bug", sorted(TRAINING_BUGS))
def test_training_bug_is_caught_by_the_exact_step_or_seed_check(bug):
    replacements, expected = TRAINING_BUGS[bug]
    assert run_in_process(edited_solution("transformer", replacements), TRAINING_CHECKS) == expected


@pytest.mark.parametrize("bug", sorted(SEQ2SEQ_TRAINING_BUGS))
def test_seq2seq_training_bug_is_caught_by_q8s_exact_step_or_seed_check(bug):
    replacements, expected = SEQ2SEQ_TRAINING_BUGS[bug]
    assert run_in_process(edited_solution("transformer", replacements), SEQ2SEQ_TRAINING_CHECKS) == expected


def test_staff_training_passes_the_exact_step_and_seed_checks_in_process():
    assert run_in_process(edited_solution("transformer", []), TRAINING_CHECKS | SEQ2SEQ_TRAINING_CHECKS) == set()


SEQ2SEQ_QUICK = {fn.lmgrade_check.name for fn in TRANSFORMER.checks() if fn.lmgrade_check.question == "8"} - {"seq2seq_sorting"}


@pytest.mark.parametrize("bug", sorted(SEQ2SEQ_BUGS))
def test_seq2seq_bug_is_caught_by_exactly_its_checks_in_process(bug):
    replacements, expected = SEQ2SEQ_BUGS[bug]
    assert run_in_process(edited_solution("transformer", replacements), SEQ2SEQ_QUICK) == expected


def test_correct_seq2seq_variants_pass_every_q8_check_but_the_sorting_run_in_process():
    replacements = [edit for edits in SEQ2SEQ_CORRECT.values() for edit in edits]
    assert run_in_process(edited_solution("transformer", replacements), SEQ2SEQ_QUICK) == set()


@pytest.mark.parametrize("variant", sorted(TRAINING_CORRECT))
def test_correct_training_loop_passes_the_exact_step_and_seed_checks_in_process(variant):
    assert run_in_process(edited_solution("transformer", TRAINING_CORRECT[variant]), TRAINING_CHECKS) == set()
