"""The rnn_lm grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it. The expected set of
failing checks is the bug's own checks; later questions are graded on grader-made pieces (Q4 on the
given ToyRecurrentLM, Q6 on the given TableModel), so a bug costs its own question. Grading is
limited to the questions a variant can affect, and Q7/Q8's trainings are left out where a variant
cannot reach them, to keep the suite fast.
"""
import pytest

from autograder.authoring import assignments
from autograder.grading import runner
from tests.helpers import edited_solution, failing_in_process

RNN_LM = assignments.get("rnn_lm")
RNN = {"public_rnn", "rnn_cell_hidden", "rnn_layer_hidden", "rnn_gradients"}
LSTM = {"public_lstm", "lstm_cell_hidden", "lstm_layer_hidden", "lstm_gradients"}
TRAIN = {"public_train_lm", "train_lm_exact", "train_lm_repeatable"}
RNN_CELL = "        return torch.tanh(x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh)"
GATES = "        i, f, g, o = gates.chunk(4, dim=-1)"
C_UPDATE = "        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)"
H0 = "        h = x.new_zeros(x.size(0), self.cell.hidden_size) if h0 is None else h0\n        outputs = []\n" \
     "        for t in range(x.size(1)):\n            h = self.cell(x[:, t], h)  # (B, H)"
LOSS_MEAN = "    keep = (targets.reshape(-1) != pad_id).to(losses.dtype)"
CARRY = "        logits, state = model(inputs, detach_state(state))"
SCALE = "            g.mul_(max_norm / (total + 1e-6))"
TEMPERATURE = ("            probs = torch.softmax(logits[0, -1].double() / temperature, dim=-1)"
               ".cpu()  # the generator's device")
SCORED = "    scored = [(tokens, logprob / len(tokens) ** alpha) for tokens, logprob in finished]"
ATTN_SOFTMAX = "        weights = torch.softmax(scores, dim=-1)  # (B, S)"

# name: (replacements, questions graded, failing checks expected)
BUGS = {
    "W_hh not transposed": ([(RNN_CELL, RNN_CELL.replace("self.weight_hh.T", "self.weight_hh"))], {"1"}, RNN),
    "bias_hh left out": ([(RNN_CELL, RNN_CELL.replace(" + self.bias_hh", ""))], {"1"}, RNN),
    "the layer ignores h0": ([(H0, H0.replace(" if h0 is None else h0", ""))], {"1"},
                             {"public_rnn", "rnn_layer_hidden", "rnn_gradients"}),
    "LSTM gates in the order i, f, o, g": ([(GATES, "        i, f, o, g = gates.chunk(4, dim=-1)")], {"2"}, LSTM),
    "forget gate on the candidate, input gate on the old cell": (
        [(C_UPDATE, "        c = torch.sigmoid(i) * c + torch.sigmoid(f) * torch.tanh(g)")], {"2"}, LSTM),
    "LSTM output from the old cell": (
        [(C_UPDATE + "\n        h = torch.sigmoid(o) * torch.tanh(c)",
          "        h = torch.sigmoid(o) * torch.tanh(c)\n" + C_UPDATE)], {"2"}, LSTM),
    "GRU reset gate outside the hidden bias": (
        [("        h_r, h_z, h_n = (h @ self.weight_hh.T + self.bias_hh).chunk(3, dim=-1)\n",
          "        h_r, h_z, h_n = (h @ self.weight_hh.T).chunk(3, dim=-1)\n"
          "        b_r, b_z, b_n = self.bias_hh.chunk(3)\n        h_r, h_z = h_r + b_r, h_z + b_z\n"),
         ("        n = torch.tanh(x_n + r * h_n)", "        n = torch.tanh(x_n + r * h_n + b_n)")], {"2"},
        {"gru_hidden", "gru_gradients"}),
    "loss averaged over padding too": ([(LOSS_MEAN, "    keep = torch.ones_like(losses)")], {"3"},
                                       {"public_rnnlm", "lm_loss_hidden"}),
    "loss without the shift (predicting the input token)": (
        [("    logits, _ = model(tokens[:, :-1])  # (B, T-1, V)\n    targets = tokens[:, 1:]  # (B, T-1)",
          "    logits, _ = model(tokens[:, 1:])\n    targets = tokens[:, 1:]")], {"3"}, {"public_rnnlm", "lm_loss_hidden"}),
    "tied weights by copying the embedding": (
        [("            self.proj.weight = self.embedding.weight",
          "            self.proj.weight = nn.Parameter(self.embedding.weight.detach().clone())")], {"3"},
        {"rnnlm_tied", "public_rnnlm"}),
    "batchify column-major": ([("    return stream[: batch_size * L].reshape(batch_size, L).clone()",
                                "    return stream[: batch_size * L].reshape(L, batch_size).T.clone()")], {"4"},
                              {"public_tbptt_pieces", "batchify_hidden", "public_train_lm", "train_lm_exact"}),
    "targets not shifted in get_chunk": ([("    return data[:, i:i + n], data[:, i + 1:i + 1 + n]",
                                           "    return data[:, i:i + n], data[:, i:i + n]")], {"4"},
                                         {"public_tbptt_pieces", "get_chunk_hidden"} | TRAIN),
    "state carried without detaching": ([(CARRY, "        logits, state = model(inputs, state)")], {"4"}, TRAIN),
    "state reset at every chunk": ([(CARRY, "        logits, state = model(inputs)")], {"4"}, TRAIN),
    "clipping each parameter by its own norm": (
        [(SCALE, "            if g.norm() > max_norm:\n                g.mul_(max_norm / (g.norm() + 1e-6))")], {"4"},
        {"public_tbptt_pieces", "clip_hidden"} | TRAIN),
    "clip returns the norm after clipping": (
        [("    return float(total)", "    return float(torch.sqrt(sum((g ** 2).sum() for g in grads)))")], {"4"},
        {"public_tbptt_pieces", "clip_hidden"}),
    "gradient norms of the mean instead of the sum": (
        [("        grads = torch.autograd.grad(hs[-1].sum(), hs)", "        grads = torch.autograd.grad(hs[-1].mean(), hs)")],
        {"5"}, {"public_hidden_grad_norms", "hidden_grad_norms_hidden"}),
    "greedy decoding runs past </s>": (
        [("            token = int(logits[0, -1].argmax())\n            out.append(token)\n            if token == eos_id:\n"
          "                break\n",
          "            token = int(logits[0, -1].argmax())\n            out.append(token)\n")],
        {"6"}, {"public_decoding", "greedy_hidden"}),
    "temperature ignored": ([(TEMPERATURE, TEMPERATURE.replace(" / temperature", ""))], {"6"},
                            {"public_sample", "sample_hidden"}),
    "a new generator at every step": (
        [(TEMPERATURE, TEMPERATURE + "\n            generator = torch.Generator().manual_seed(seed)")], {"6"},
        {"sample_hidden"}),
    "beam scores not length-normalized": ([(SCORED, SCORED.replace(" / len(tokens) ** alpha", ""))], {"6"},
                                          {"public_decoding", "beam_width_one", "beam_exhaustive", "beam_narrow"}),
    "finished hypotheses ranked by raw log-probability": (
        [("    scored.sort(key=lambda pair: -pair[1])",
          "    scored.sort(key=lambda pair: -pair[1] * len(pair[0]) ** alpha)")], {"6"}, {"beam_exhaustive", "beam_narrow"}),
    "attention softmax over the batch": ([(ATTN_SOFTMAX, ATTN_SOFTMAX.replace("dim=-1", "dim=0"))], {"8"},
                                         {"public_attention", "attention_hidden", "attention_gradients",
                                          "seq2seq_forward_hidden", "train_seq2seq_exact", "seq2seq_reversal",
                                          "greedy_translate_hidden", "public_seq2seq"}),
    "greedy_translate reverses the source by hand (no model)": (
        [("        src = src.to(next(model.parameters()).device)\n",
          "        return [[d for d in reversed(row) if d != PAD] for row in src.tolist()]\n")], {"8"},
        {"greedy_translate_hidden", "public_seq2seq"}),  # Q8's accuracy: the trained weights, decoded by the grader
}

# name: (replacements, questions graded)
CORRECT = {
    # graded with Q8's training: its float32 trajectory parts from the reference's (this one once scored 89.6% on
    # seq2seq_reversal against a 90% threshold; the threshold now comes from the spread of correct runs)
    "LSTMLayer writes into a preallocated output": ([(
        "        outputs = []\n        for t in range(x.size(1)):\n            state = self.cell(x[:, t], state)\n"
        "            outputs.append(state[0])\n        return torch.stack(outputs, dim=1), state\n",
        "        B, T = x.shape[:2]\n        out = x.new_empty(B, T, self.cell.hidden_size)  # (B, T, H)\n"
        "        for t in range(T):\n            state = self.cell(x[:, t], state)\n            out[:, t] = state[0]\n"
        "        return out, state\n")], {"2", "8"}),
    "Elman cell with F.linear": ([(RNN_CELL, "        return torch.tanh(F.linear(x, self.weight_ih, self.bias_ih)"
                                             " + F.linear(h, self.weight_hh, self.bias_hh))"),
                                 ("import math\n\nimport torch\nfrom torch import nn\n\n\nclass RNNCell",
                                  "import math\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\n"
                                  "class RNNCell")], {"1", "5"}),
    "LSTM gates by slicing, addmm": ([(
        "        gates = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh  # (B, 4H)\n" + GATES,
        "        H = self.hidden_size\n"
        "        gates = torch.addmm(self.bias_ih, x, self.weight_ih.t()) + torch.addmm(self.bias_hh, h, self.weight_hh.t())\n"
        "        i, f, g, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]")], {"2"}),
    "loss by log_softmax and gather, clipping always scaled by a clamped factor": ([
        ("    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction=\"none\")",
         "    logp = torch.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))\n"
         "    losses = -logp.gather(1, targets.reshape(-1, 1))[:, 0]"),
        ("    if total > max_norm:\n        for g in grads:\n" + SCALE,
         "    factor = torch.clamp(max_norm / (total + 1e-6), max=1.0)\n    for g in grads:\n        g.mul_(factor)")],
        {"3", "4"}),
    "sampling by inverse CDF of one uniform per step": ([(
        "            token = int(torch.multinomial(probs, 1, generator=generator))",
        "            u = torch.rand((), generator=generator, dtype=probs.dtype)\n"
        "            token = min(int((probs.cumsum(0) < u).sum()), probs.numel() - 1)")], {"6"}),
    "greedy as beam search of width 1": ([(
        "    with torch.no_grad():\n        logits, state = model(torch.tensor([prefix], device=device), None)\n        out = []\n"
        "        for _ in range(max_len):\n            token = int(logits[0, -1].argmax())\n",
        "    return beam_search(model, prefix, 1, max_len, eos_id)[0][0]\n"
        "    with torch.no_grad():\n        logits, state = model(torch.tensor([prefix], device=device), None)\n        out = []\n"
        "        for _ in range(max_len):\n            token = int(logits[0, -1].argmax())\n")], {"6"}),
    "additive scores by einsum, -1e9 fill, context by bmm": ([(
        "        scores = self.score(torch.tanh(self.query_proj(query)[:, None, :] + self.key_proj(keys))).squeeze(-1)"
        "  # (B, S)\n        if mask is not None:\n            scores = scores.masked_fill(~mask, float(\"-inf\"))\n"
        "        weights = torch.softmax(scores, dim=-1)  # (B, S)\n"
        "        context = torch.einsum(\"bs,bsh->bh\", weights, keys)  # (B, Hk)\n",
        "        hidden = torch.tanh(self.query_proj(query).unsqueeze(1) + self.key_proj(keys))  # (B, S, A)\n"
        "        scores = torch.einsum(\"bsa,a->bs\", hidden, self.score.weight[0])\n"
        "        if mask is not None:\n            scores = torch.where(mask, scores, scores.new_tensor(-1e9))\n"
        "        weights = torch.softmax(scores, dim=-1)\n"
        "        context = torch.bmm(weights.unsqueeze(1), keys).squeeze(1)\n")], {"8"}),
}


def grade(tmp_path, text, questions=None):
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, RNN_LM, device="cpu", questions=questions)
    assert report.results, "no checks ran"
    return report


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_is_caught_by_exactly_its_checks(tmp_path, bug):
    replacements, questions, expected = BUGS[bug]
    report = grade(tmp_path, edited_solution("rnn_lm", replacements), questions)
    assert {r.name for r in report.results if not r.passed} == expected
    assert not any("grader could not finish" in r.output for r in report.results)


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_gets_full_marks(tmp_path, variant):
    replacements, questions = CORRECT[variant]
    report = grade(tmp_path, edited_solution("rnn_lm", replacements), questions)
    assert {r.name: r.output for r in report.results if not r.passed} == {}


# ---- the second hunt: bugs graded in this process on their question's checks ---------------------
# Each bug is graded by every check of its question except the two trainings (Q7, and Q8's reversal run),
# in this process (the staff module with the edit, called through an in-process channel), which
# keeps these fast; the failing set must be exactly the one given.
RNN_LAYER_LOOP = ("        for t in range(x.size(1)):\n            h = self.cell(x[:, t], h)  # (B, H)\n"
                  "            outputs.append(h)\n        return torch.stack(outputs, dim=1), h\n")
LOSS_TAIL = ("    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction=\"none\")\n"
             "    if pad_id is None:\n        return losses.mean()\n"
             "    keep = (targets.reshape(-1) != pad_id).to(losses.dtype)\n    return (losses * keep).sum() / keep.sum()\n")
DETACH = "    if isinstance(state, torch.Tensor):\n        return state.detach()\n    return tuple(detach_state(s) for s in state)"
CLIP_BODY = ("    total = torch.sqrt(sum((g.detach() ** 2).sum() for g in grads))\n    if total > max_norm:\n"
             "        for g in grads:\n" + SCALE + "\n    return float(total)\n")
WRAP = "        if i >= data.size(1) - 1:\n            state, i = None, 0\n"
UPDATE = ("        optimizer.zero_grad()\n        loss.backward()\n        clip_grad_norm(model.parameters(), clip)\n"
          "        optimizer.step()\n        losses.append(loss.item())\n        i += bptt\n")
NORMS = "    return torch.stack([g.norm() for g in grads])"
GREEDY_STEP = ("            token = int(logits[0, -1].argmax())\n            out.append(token)\n            if token == eos_id:\n"
               "                break\n            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n\n\n"
               "def sample")
SAMPLE_START = ("    generator = torch.Generator().manual_seed(seed)\n    device = model_device(model)\n"
                "    with torch.no_grad():\n"
                "        logits, state = model(torch.tensor([prefix], device=device), None)\n")
MULTINOMIAL = "            token = int(torch.multinomial(probs, 1, generator=generator))\n            out.append(token)\n"
BEAM_EXTEND = ("            candidates = []\n            for tokens, logprob, last, st in beam:\n"
               "                scores = torch.log_softmax(last.double(), dim=-1)\n")
BEAM_KEEP = "            for tokens, logprob, st in candidates[:beam_size]:\n"
BEAM_START = ("    with torch.no_grad():\n        logits, state = model(torch.tensor([prefix], device=device), None)\n"
              "        beam = [([], 0.0, logits[0, -1], state)]\n")
MASK_FILL = "            scores = scores.masked_fill(~mask, float(\"-inf\"))"
TRANSLATE_STEP = ("            logits, state, _ = model.decode_step(token, state, enc, src != PAD)\n"
                  "            token = logits.argmax(dim=-1)\n            rows.append(token)\n")
SEQ2SEQ_LOSS = "        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=PAD)"
S2S_EXACT = {"train_seq2seq_exact"}

# name: (replacements, question, failing checks expected)
HUNT_BUGS = {
    "RNNLayer outputs preallocated by torch.zeros (float32 whatever x is)": ([(RNN_LAYER_LOOP,
        "        outputs = torch.zeros(x.size(0), x.size(1), self.cell.hidden_size)\n"
        "        for t in range(x.size(1)):\n            h = self.cell(x[:, t], h)\n            outputs[:, t] = h\n"
        "        return outputs, h\n")], "1", {"rnn_layer_hidden", "rnn_gradients"}),
    "RNNLayer keeps the state before each step (h_0..h_{T-1})": ([(RNN_LAYER_LOOP,
        "        for t in range(x.size(1)):\n            outputs.append(h)\n            h = self.cell(x[:, t], h)\n"
        "        return torch.stack(outputs, dim=1), h\n")], "1", RNN - {"rnn_cell_hidden"}),
    "RNNLayer writes each state into h0": ([(RNN_LAYER_LOOP,
        "        for t in range(x.size(1)):\n            h.copy_(self.cell(x[:, t], h))\n            outputs.append(h.clone())\n"
        "        return torch.stack(outputs, dim=1), h\n")], "1", {"rnn_layer_hidden", "rnn_gradients"}),
    "RNNLayer zeros made without the device": ([(H0, H0.replace(
        "x.new_zeros(x.size(0), self.cell.hidden_size)", "torch.zeros(x.size(0), self.cell.hidden_size, dtype=x.dtype)"))],
        "1", {"rnn_layer_hidden"}),
    "RNNLayer detaches h0": ([(H0, H0.replace("else h0", "else h0.detach()"))], "1", {"rnn_gradients"}),
    "LSTM cell state updated in place (the caller's c)": ([(C_UPDATE,
        "        c = c.mul_(torch.sigmoid(f)).add_(torch.sigmoid(i) * torch.tanh(g))")], "2",
        {"lstm_cell_hidden", "lstm_layer_hidden", "lstm_gradients"}),  # the matrix's `inputs`: the caller's c changed
    "LSTMLayer outputs the cell states": ([("            outputs.append(state[0])", "            outputs.append(state[1])")],
                                          "2", {"public_lstm", "lstm_layer_hidden", "lstm_gradients"}),
    "GRU interpolation swapped": ([("        return (1 - z) * n + z * h", "        return z * n + (1 - z) * h")], "2",
                                  {"gru_hidden", "gru_gradients"}),
    "LSTM forget gate with a +1 bias": ([(C_UPDATE, C_UPDATE.replace("sigmoid(f)", "sigmoid(f + 1.0)"))], "2", LSTM),
    "LSTMLayer zero cell state made as float32 on the CPU": ([(
        "            h = x.new_zeros(x.size(0), self.cell.hidden_size)\n            state = (h, h)\n",
        "            h = x.new_zeros(x.size(0), self.cell.hidden_size)\n"
        "            state = (h, torch.zeros(x.size(0), self.cell.hidden_size))\n")], "2", {"lstm_layer_hidden"}),
    "RNNLM forward drops the given state": ([(
        "        outputs, state = self.rnn(self.embedding(tokens), state)  # (B, T, H)",
        "        outputs, state = self.rnn(self.embedding(tokens))")], "3", {"rnnlm_forward_hidden"}),
    "lm_loss `if not pad_id` (pad 0 counted)": ([("    if pad_id is None:\n        return losses.mean()\n",
                                                  "    if not pad_id:\n        return losses.mean()\n")], "3",
                                                {"public_rnnlm", "lm_loss_hidden"}),
    "lm_loss masks where the input is pad": ([(LOSS_MEAN,
        "    keep = (tokens[:, :-1].reshape(-1) != pad_id).to(losses.dtype)")], "3", {"public_rnnlm", "lm_loss_hidden"}),
    "lm_loss writes -100 into the caller's tokens": ([(LOSS_TAIL,
        "    if pad_id is not None:\n        targets[targets == pad_id] = -100\n"
        "    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))\n")], "3",
        {"lm_loss_hidden"}),
    "lm_loss mean of per-sequence means": ([(LOSS_TAIL,
        "    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction=\"none\")\n"
        "    losses = losses.view(targets.shape)\n    if pad_id is None:\n        return losses.mean()\n"
        "    keep = (targets != pad_id).to(losses.dtype)\n    return ((losses * keep).sum(1) / keep.sum(1)).mean()\n")],
        "3", {"public_rnnlm", "lm_loss_hidden"}),
    "tied sizes checked by assert": ([(
        "            if emb_dim != hidden_size:\n                raise ValueError(f\"tied weights need emb_dim == hidden_size, "
        "got {emb_dim} and {hidden_size}\")\n",
        "            assert emb_dim == hidden_size, \"tied weights need emb_dim == hidden_size\"\n")], "3", {"rnnlm_tied"}),
    "lm_loss returns loss.item()": ([("    return (losses * keep).sum() / keep.sum()\n",
                                      "    return ((losses * keep).sum() / keep.sum()).item()\n"),
                                     ("        return losses.mean()\n", "        return losses.mean().item()\n")], "3",
                                    {"lm_loss_hidden"}),
    "lm_loss divides by the non-pad tokens, not targets": ([("    return (losses * keep).sum() / keep.sum()\n",
        "    return (losses * keep).sum() / (tokens != pad_id).sum()\n")], "3", {"public_rnnlm", "lm_loss_hidden"}),
    "tied by nn.Parameter(embedding.weight) (a second parameter)": ([(
        "            self.proj.weight = self.embedding.weight", "            self.proj.weight = nn.Parameter(self.embedding.weight)")],
        "3", {"rnnlm_tied"}),
    "lm_loss ignore_index=pad_id or -100 (pad 0 counted)": ([(LOSS_TAIL,
        "    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id or -100)\n")],
        "3", {"public_rnnlm", "lm_loss_hidden"}),
    "batchify cuts with stream[:-(N % B)]": ([("    return stream[: batch_size * L].reshape(batch_size, L).clone()",
        "    return stream[:-(stream.size(0) % batch_size)].reshape(batch_size, -1).clone()")], "4",
        {"batchify_hidden", "public_train_lm", "train_lm_repeatable"}),
    "get_chunk n = min(bptt, L - i)": ([("    n = min(bptt, data.size(1) - 1 - i)", "    n = min(bptt, data.size(1) - i)")], "4",
                                       {"public_tbptt_pieces", "get_chunk_hidden"} | TRAIN),
    "detach_state detaches in place": ([(DETACH,
        "    if isinstance(state, torch.Tensor):\n        return state.detach_()\n    for s in state:\n        s.detach_()\n"
        "    return state")], "4", {"detach_state_hidden"}),
    "detach_state returns a list for a pair": ([(DETACH, DETACH.replace("tuple(detach_state(s) for s in state)",
                                                                         "[s.detach() for s in state]"))], "4",
                                               {"detach_state_hidden"}),
    "detach_state clones instead of detaching": ([(DETACH, DETACH.replace("state.detach()", "state.clone()"))], "4",
                                                 {"detach_state_hidden"} | TRAIN),
    "clip_grad_norm walks the parameters generator twice": ([(
        "    grads = [p.grad for p in parameters if p.grad is not None]\n    if not grads:\n        return 0.0\n" + CLIP_BODY,
        "    total = torch.sqrt(sum((p.grad.detach() ** 2).sum() for p in parameters if p.grad is not None))\n"
        "    if total > max_norm:\n        for p in parameters:\n            if p.grad is not None:\n"
        "                p.grad.mul_(max_norm / (total + 1e-6))\n    return float(total)\n")], "4",
        {"clip_hidden"} | TRAIN),  # and with no gradient at all, the sum is the int 0
    "clip_grad_norm without the 1e-6": ([(SCALE, SCALE.replace("(total + 1e-6)", "total"))], "4",
                                        {"clip_hidden", "train_lm_exact", "train_lm_repeatable"}),
    "clip_grad_norm fails when no parameter has a gradient": ([(
        "    grads = [p.grad for p in parameters if p.grad is not None]\n    if not grads:\n        return 0.0\n",
        "    grads = [p.grad for p in parameters if p.grad is not None]\n")], "4", {"clip_hidden"}),
    "train_lm detaches with state.detach() (a tensor state only)": ([(CARRY,
        "        if state is not None:\n            state = state.detach()\n        logits, state = model(inputs, state)")],
        "4", {"train_lm_exact"}),  # on an LSTM LM's (h, c), as Q7 does
    "train_lm wraps around at i >= L (an empty chunk)": ([(WRAP, WRAP.replace("data.size(1) - 1", "data.size(1)"))], "4",
                                                         {"train_lm_exact"}),
    "train_lm wraps around but keeps the state": ([(WRAP, "        if i >= data.size(1) - 1:\n            i = 0\n")], "4",
                                                  {"train_lm_exact"}),
    "train_lm drops the short last chunk": ([(WRAP, WRAP.replace("i >= data.size(1) - 1", "i + bptt > data.size(1) - 1"))],
                                            "4", {"public_train_lm", "train_lm_exact"}),
    "train_lm clips after the step": ([(UPDATE, UPDATE.replace(
        "        clip_grad_norm(model.parameters(), clip)\n        optimizer.step()\n",
        "        optimizer.step()\n        clip_grad_norm(model.parameters(), clip)\n"))], "4", TRAIN),
    "train_lm zeroes the gradients after backward": ([(UPDATE, UPDATE.replace(
        "        optimizer.zero_grad()\n        loss.backward()\n", "        loss.backward()\n        optimizer.zero_grad()\n"))],
        "4", TRAIN),
    "train_lm clips before backward": ([(UPDATE, UPDATE.replace(
        "        loss.backward()\n        clip_grad_norm(model.parameters(), clip)\n",
        "        clip_grad_norm(model.parameters(), clip)\n        loss.backward()\n"))], "4", TRAIN),
    "train_lm sums the chunk's losses": ([(
        "        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))\n        optimizer.zero_grad()",
        "        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction=\"sum\")\n"
        "        optimizer.zero_grad()")], "4", {"public_train_lm", "train_lm_exact"}),
    "batchify returns floats": ([("    return stream[: batch_size * L].reshape(batch_size, L).clone()",
                                  "    return stream[: batch_size * L].reshape(batch_size, L).float()")], "4",
                                {"batchify_hidden"} | TRAIN),
    "hidden_grad_norms in float32 (a tensor of .item()s)": ([(NORMS, "    return torch.tensor([g.norm().item() for g in grads])")],
                                                           "5", {"hidden_grad_norms_hidden"}),
    "hidden_grad_norms ignores the given state": ([("        if state is None:\n            h = x.new_zeros(x.size(0), cell.",
                                                    "        if True:\n            h = x.new_zeros(x.size(0), cell.")], "5",
                                                  {"hidden_grad_norms_hidden"}),
    "hidden_grad_norms of an LSTM's c": ([("            hs.append(state[0] if isinstance(state, tuple) else state)",
                                           "            hs.append(state[-1] if isinstance(state, tuple) else state)")], "5",
                                         {"hidden_grad_norms_hidden"}),
    "hidden_grad_norms averages per-row norms": ([(NORMS, "    return torch.stack([g.norm(dim=-1).mean() for g in grads])")],
                                                 "5", {"public_hidden_grad_norms", "hidden_grad_norms_hidden"}),
    "hidden_grad_norms starts an LSTM from one zero tensor": ([(
        "            state = (h, h) if isinstance(cell, LSTMCell) else h\n", "            state = h\n")], "5",
        {"hidden_grad_norms_hidden"}),
    "greedy_decode appends to the caller's prefix": ([(
        "        logits, state = model(torch.tensor([prefix], device=device), None)\n        out = []\n        for _ in range(max_len):\n"
        "            token = int(logits[0, -1].argmax())\n",
        "        seq = prefix\n        out = []\n        for _ in range(max_len):\n"
        "            logits, _ = model(torch.tensor([seq], device=device), None)\n            token = int(logits[0, -1].argmax())\n"
        "            seq.append(token)\n"),
        ("            out.append(token)\n            if token == eos_id:\n                break\n"
         "            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n\n\ndef sample",
         "            out.append(token)\n            if token == eos_id:\n                break\n    return out\n\n\n"
         "def sample")], "6", {"greedy_hidden"}),
    "greedy_decode breaks ties towards the highest id": ([(GREEDY_STEP, GREEDY_STEP.replace(
        "            token = int(logits[0, -1].argmax())\n",
        "            row = logits[0, -1].tolist()\n            token = max(range(len(row)), key=lambda v: (row[v], v))\n"))],
        "6", {"public_decoding"}),
    "greedy_decode counts the prefix in max_len": ([(
        "        out = []\n        for _ in range(max_len):\n            token = int(logits[0, -1].argmax())\n",
        "        out = []\n        for _ in range(max_len - len(prefix) + 1):\n            token = int(logits[0, -1].argmax())\n")],
        "6", {"greedy_hidden", "public_decoding"}),
    "temperature applied after the softmax": ([(TEMPERATURE,
        "            probs = torch.softmax(logits[0, -1].double(), dim=-1) / temperature")], "6", {"sample_hidden"}),
    "temperature multiplies the logits": ([(TEMPERATURE, TEMPERATURE.replace(" / temperature", " * temperature"))], "6",
                                          {"sample_hidden"}),
    "generator made without the seed": ([("    generator = torch.Generator().manual_seed(seed)",
                                          "    generator = torch.Generator()")], "6", {"sample_hidden"}),
    "generator not passed to multinomial": ([(MULTINOMIAL, MULTINOMIAL.replace(", generator=generator", ""))], "6",
                                            {"sample_hidden"}),
    "sample seeds torch's global generator": ([("    generator = torch.Generator().manual_seed(seed)",
                                                "    torch.manual_seed(seed)\n    generator = None")], "6",
                                              {"sample_hidden"}),
    "sample extends the caller's prefix": ([(SAMPLE_START, SAMPLE_START + "        seq = prefix\n"),
                                            (MULTINOMIAL, MULTINOMIAL + "            seq.append(token)\n")], "6",
                                           {"sample_hidden"}),
    "beam keeps beam_size open hypotheses, finished ones take no place": ([(
        "            beam = []\n" + BEAM_KEEP,
        "            beam = []\n            for tokens, logprob, st in candidates:\n                if len(beam) == beam_size:\n"
        "                    break\n")], "6", {"beam_width_one", "beam_narrow"}),
    "beam stops once beam_size hypotheses are finished": ([("            if not beam:\n                break\n",
        "            if not beam or len(finished) >= beam_size:\n                break\n")], "6",
        {"beam_exhaustive", "beam_narrow"}),
    "beam drops the hypotheses still open at max_len": ([(
        "        finished += [(tokens, logprob) for tokens, logprob, _, _ in beam]\n", "")], "6",
        {"beam_width_one", "beam_exhaustive", "beam_narrow"}),
    "beam length counts the prefix": ([(SCORED, SCORED.replace("len(tokens) ** alpha", "(len(prefix) + len(tokens)) ** alpha"))],
                                      "6", {"public_decoding", "beam_width_one", "beam_exhaustive", "beam_narrow"}),
    "beam keeps finished hypotheses in the beam, competing for places": ([(BEAM_EXTEND,
        "            candidates = []\n            for tokens, logprob, last, st in beam:\n"
        "                if tokens and tokens[-1] == eos_id:\n                    candidates.append((tokens, logprob, st))\n"
        "                    continue\n                scores = torch.log_softmax(last.double(), dim=-1)\n"),
        ("                if tokens[-1] == eos_id:\n                    finished.append((tokens, logprob))\n",
         "                if tokens[-1] == eos_id:\n                    beam.append((tokens, logprob, None, st))\n"),
        ("            if not beam:\n                break\n",
         "            if all(b[0][-1] == eos_id for b in beam):\n                break\n")], "6", {"beam_narrow"}),
    "beam prunes per hypothesis, not over all extensions": ([(BEAM_KEEP,
        "            per, kept = {}, []\n            for c in candidates:\n                key = tuple(c[0][:-1])\n"
        "                if per.get(key, 0) < beam_size:\n                    per[key] = per.get(key, 0) + 1\n"
        "                    kept.append(c)\n            for tokens, logprob, st in kept:\n")], "6", {"beam_narrow"}),
    "beam returns the prefix with each hypothesis": ([(SCORED, SCORED.replace("[(tokens, ", "[(list(prefix) + tokens, "))],
                                                     "6", {"public_decoding", "beam_width_one", "beam_exhaustive",
                                                           "beam_narrow"}),
    "attention masked after the softmax, not renormalized": ([(
        "        if mask is not None:\n" + MASK_FILL + "\n" + ATTN_SOFTMAX + "\n",
        ATTN_SOFTMAX + "\n        if mask is not None:\n            weights = weights * mask\n")], "8",
        {"public_attention", "attention_hidden", "attention_gradients", "seq2seq_forward_hidden",
         "greedy_translate_hidden"} | S2S_EXACT),
    "attention scores divided by sqrt(attn_size)": ([(ATTN_SOFTMAX, ATTN_SOFTMAX.replace(
        "softmax(scores,", "softmax(scores / self.key_proj.out_features ** 0.5,"))], "8",
        {"public_attention", "attention_hidden", "attention_gradients", "seq2seq_forward_hidden",
         "greedy_translate_hidden"} | S2S_EXACT),
    "decoder attends with the new h": ([(
        "        context, weights = self.attention(state[0], enc, src_mask)  # (B, H), (B, S)\n"
        "        state = self.decoder(torch.cat([self.tgt_embedding(token), context], dim=-1), state)\n",
        "        context, _ = self.attention(state[0], enc, src_mask)\n"
        "        state = self.decoder(torch.cat([self.tgt_embedding(token), context], dim=-1), state)\n"
        "        context, weights = self.attention(state[0], enc, src_mask)\n")], "8",
        {"seq2seq_forward_hidden", "greedy_translate_hidden"} | S2S_EXACT),
    "train_seq2seq batches without the wrap-around": ([("        start = k * batch_size % src.size(0)",
                                                        "        start = k * batch_size")], "8", S2S_EXACT),
    "train_seq2seq loss over padding too": ([(SEQ2SEQ_LOSS, SEQ2SEQ_LOSS.replace(", ignore_index=PAD", ""))], "8", S2S_EXACT),
    "train_seq2seq writes -100 into the caller's targets": ([(SEQ2SEQ_LOSS,
        "        y[y == PAD] = -100\n" + SEQ2SEQ_LOSS.replace(", ignore_index=PAD", ""))], "8", S2S_EXACT),
    "greedy_translate without the source mask": ([(TRANSLATE_STEP, TRANSLATE_STEP.replace("src != PAD", "None"))], "8",
                                                 {"greedy_translate_hidden"}),
    "greedy_translate feeds <s> at every step": ([(TRANSLATE_STEP,
        "            logits, state, _ = model.decode_step(token, state, enc, src != PAD)\n"
        "            rows.append(logits.argmax(dim=-1))\n")], "8", {"greedy_translate_hidden"}),
    "greedy_translate stops every row at the first </s> of any": ([(TRANSLATE_STEP,
        TRANSLATE_STEP + "            if (token == EOS).any():\n                break\n")], "8", {"greedy_translate_hidden"}),
    "greedy_translate keeps </s>": ([("    return [row[:row.index(EOS)] if EOS in row else row for row in out]",
                                      "    return [row[:row.index(EOS) + 1] if EOS in row else row for row in out]")], "8",
                                    {"greedy_translate_hidden"}),
    "greedy_translate starts the decoder from zeros": ([(
        "        enc, state = model.encode(src)\n        token = torch.full_like(src[:, 0], BOS)\n",
        "        enc, _ = model.encode(src)\n        state = (enc.new_zeros(enc.shape[0], enc.shape[2]),) * 2\n"
        "        token = torch.full_like(src[:, 0], BOS)\n")], "8", {"greedy_translate_hidden"}),
    "greedy_decode feeds only the last token of the prefix": ([(
        "        logits, state = model(torch.tensor([prefix], device=device), None)\n        out = []\n        for _ in range(max_len):\n"
        "            token = int(logits[0, -1].argmax())\n",
        "        logits, state = model(torch.tensor([prefix[-1:]], device=device), None)\n        out = []\n        for _ in range(max_len):\n"
        "            token = int(logits[0, -1].argmax())\n")], "6", {"greedy_hidden"}),
    "sample feeds only the last token of the prefix": ([(SAMPLE_START, SAMPLE_START.replace(
        "torch.tensor([prefix], device=device)", "torch.tensor([prefix[-1:]], device=device)"))], "6", {"sample_hidden"}),
    "lm_loss by nll_loss on the logits": ([(LOSS_TAIL, LOSS_TAIL.replace("F.cross_entropy(logits", "F.nll_loss(logits"))],
                                          "3", {"public_rnnlm", "lm_loss_hidden"}),
    "attention keys projected without key_proj's bias": ([("self.key_proj(keys)))", "F.linear(keys, self.key_proj.weight)))")],
        "8", {"public_attention", "attention_hidden", "attention_gradients", "seq2seq_forward_hidden",
              "greedy_translate_hidden"} | S2S_EXACT),
    "train_lm chunks overlap (i += bptt - 1)": ([(UPDATE, UPDATE.replace("i += bptt", "i += bptt - 1"))], "4", TRAIN),
}

# name: (replacements, questions)
HUNT_CORRECT = {
    "a new SGD optimizer at every step (it has no state); beam log-probabilities in float32": ([
        (UPDATE, "        optimizer = torch.optim.SGD(model.parameters(), lr=lr)\n" + UPDATE),
        ("                scores = torch.log_softmax(last.double(), dim=-1)",
         "                scores = torch.log_softmax(last.float(), dim=-1)")], {"4", "6"}),
    "lm_loss with ignore_index, the model run on every token": ([
        ("    logits, _ = model(tokens[:, :-1])  # (B, T-1, V)\n", "    logits = model(tokens)[0][:, :-1]\n"),
        (LOSS_TAIL, "    ignore = -100 if pad_id is None else pad_id\n"
                    "    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=ignore)\n"),
        ("            self.proj.weight = self.embedding.weight", "            self.embedding.weight = self.proj.weight")], {"3"}),
    "clipping by reassigning .grad, the state detached after forward, model.zero_grad": ([
        (CLIP_BODY, "    total = float(torch.cat([g.reshape(-1) for g in grads]).norm())\n    if total > max_norm:\n"
                    "        for p in [p for p in parameters if p.grad is not None]:\n"
                    "            p.grad = p.grad * (max_norm / (total + 1e-6))\n    return total\n"),
        ("    grads = [p.grad for p in parameters if p.grad is not None]\n",
         "    parameters = list(parameters)\n    grads = [p.grad for p in parameters if p.grad is not None]\n"),
        (CARRY, "        logits, state = model(inputs, state)\n        state = detach_state(state)"),
        (UPDATE, UPDATE.replace("optimizer.zero_grad()", "model.zero_grad()"))], {"4"}),
    "detach_state by .data, the norm of the stacked norms": ([
        (DETACH, DETACH.replace("state.detach()", "state.data")),
        ("    total = torch.sqrt(sum((g.detach() ** 2).sum() for g in grads))\n",
         "    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))\n")], {"4"}),
    "hidden_grad_norms by retain_grad and backward": ([(
        "        grads = torch.autograd.grad(hs[-1].sum(), hs)",
        "        for h in hs:\n            h.retain_grad()\n        hs[-1].sum().backward()\n        grads = [h.grad for h in hs]")],
        {"5"}),
    "sampling from softmax ** (1 / T) in float32": ([(TEMPERATURE,  # .cpu(): the generator's device, as on a GPU
        "            probs = (torch.softmax(logits[0, -1].float(), dim=-1) ** (1.0 / temperature)).cpu()")], {"6"}),
    "beam by heapq.nlargest, rescoring whole sequences": ([(BEAM_START,
        "    import heapq\n    open_, done = [([], 0.0)], []\n    with torch.no_grad():\n        for _ in range(max_len):\n"
        "            cands = []\n            for tokens, lp in open_:\n"
        "                logits, _ = model(torch.tensor([list(prefix) + tokens], device=model_device(model)))\n"
        "                logp = torch.log_softmax(logits[0, -1].double(), -1).tolist()\n"
        "                cands += [(lp + l, tokens + [v]) for v, l in enumerate(logp)]\n"
        "            open_ = []\n            for lp, tokens in heapq.nlargest(beam_size, cands, key=lambda c: c[0]):\n"
        "                (done if tokens[-1] == eos_id else open_).append((tokens, lp))\n"
        "            if not open_:\n                break\n    done += open_\n"
        "    ranked = sorted(((tk, lp / len(tk) ** alpha) for tk, lp in done), key=lambda p: p[1], reverse=True)\n"
        "    return ranked[:beam_size]\n" + BEAM_START)], {"6"}),
    "attention renormalized after masking exp(scores), a 0-dim fill elsewhere": ([(
        "        if mask is not None:\n" + MASK_FILL + "\n" + ATTN_SOFTMAX + "\n",
        "        weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)\n"
        "        if mask is not None:\n            weights = weights * mask\n"
        "        weights = weights / weights.sum(dim=-1, keepdim=True)\n")], {"8"}),
    "greedy_translate by the whole forward at every step": ([(
        "        enc, state = model.encode(src)\n        token = torch.full_like(src[:, 0], BOS)\n        rows = []\n"
        "        for _ in range(max_len):\n" + TRANSLATE_STEP +
        "        out = torch.stack(rows, dim=1).tolist() if rows else [[] for _ in range(src.size(0))]  # max_len may be 0\n",
        "        tgt = torch.full_like(src[:, :1], BOS)\n        for _ in range(max_len):\n"
        "            logits, _ = model(src, src != PAD, tgt)\n"
        "            tgt = torch.cat([tgt, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)\n"
        "        out = tgt[:, 1:].tolist()\n")], {"8"}),
}
TRAININGS = {"shakespeare_lstm", "public_q7", "seq2seq_reversal"}


def run_in_process(text: str, questions: set) -> set:
    """The failing checks of `questions` (but the trainings) for the module `text`, graded in this process."""
    names = {fn.lmgrade_check.name for fn in RNN_LM.checks() if fn.lmgrade_check.question in questions}
    return failing_in_process("rnn_lm", text, names - TRAININGS)


# ---- the third hunt: extreme values, devices, returned types and edge arguments -----------------
# Bugs written the way students write them, each caught in its own question (graded in this process,
# on the question's checks but the trainings, as the second hunt).
GREEDY_FEED = ("    device = model_device(model)  # a model on a GPU needs its tokens there\n    with torch.no_grad():\n"
               "        logits, state = model(torch.tensor([prefix], device=device), None)\n")
GREEDY_LOOP = ("        out = []\n        for _ in range(max_len):\n            token = int(logits[0, -1].argmax())\n"
               "            out.append(token)\n            if token == eos_id:\n                break\n")
SAMPLE_FEED = ("    device = model_device(model)\n    with torch.no_grad():\n"
               "        logits, state = model(torch.tensor([prefix], device=device), None)\n        out = []\n"
               "        for _ in range(max_len):\n            probs")
BEAM_FEED = ("        logits, state = model(torch.tensor([prefix], device=device), None)\n"
             "        beam = [([], 0.0, logits[0, -1], state)]\n")
S2S_FORWARD = ("        enc, state = self.encode(src)\n        logits, weights = [], []\n        for i in range(tgt_in.size(1)):\n"
               "            step_logits, state, w = self.decode_step(tgt_in[:, i], state, enc, src_mask)\n"
               "            logits.append(step_logits)\n            weights.append(w)\n"
               "        return torch.stack(logits, dim=1), torch.stack(weights, dim=1)\n")
HGN_START = ("        if state is None:\n            h = x.new_zeros(x.size(0), cell.hidden_size)\n"
             "            state = (h, h) if isinstance(cell, LSTMCell) else h\n")
LSTM_LOOP = ("        outputs = []\n        for t in range(x.size(1)):\n            state = self.cell(x[:, t], state)\n"
             "            outputs.append(state[0])\n        return torch.stack(outputs, dim=1), state\n")
TRAIN_LOSS = "        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))\n"
ATTENTION = {"public_attention", "attention_hidden"}

HUNT_BUGS |= {
    # 1. extreme values: logits, scores and pre-activations of hundreds
    "tanh written with exp by hand": ([(RNN_CELL,
        "        a = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh\n"
        "        e = torch.exp(2 * a)\n        return (e - 1) / (e + 1)")], "1", {"public_rnn", "rnn_cell_hidden"}),
    "LSTM sigmoid as exp(z) / (1 + exp(z))": ([(C_UPDATE,
        "        def sigmoid(z):\n            return torch.exp(z) / (1 + torch.exp(z))\n\n"
        "        c = sigmoid(f) * c + sigmoid(i) * torch.tanh(g)"),
        ("        h = torch.sigmoid(o) * torch.tanh(c)\n        return h, c\n",
         "        h = sigmoid(o) * torch.tanh(c)\n        return h, c\n")], "2", {"public_lstm", "lstm_cell_hidden"}),
    "lm_loss as -log(softmax) at the target": ([(LOSS_TAIL, LOSS_TAIL.replace(
        "    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction=\"none\")\n",
        "    probs = torch.softmax(logits, dim=-1).reshape(-1, logits.size(-1))\n"
        "    losses = -torch.log(probs.gather(1, targets.reshape(-1, 1)))[:, 0]\n"))], "3",
        {"public_rnnlm", "lm_loss_hidden"}),
    "train_lm loss as -log(softmax) at the targets": ([(TRAIN_LOSS,
        "        probs = torch.softmax(logits, dim=-1)\n"
        "        loss = -torch.log(probs.gather(-1, targets[..., None])).mean()\n")], "4",
        {"public_train_lm", "train_lm_exact"}),
    "sample normalises exp(logits / T) by hand": ([(TEMPERATURE,
        "            weights = torch.exp(logits[0, -1].double() / temperature)\n"
        "            probs = (weights / weights.sum()).cpu()")], "6", {"public_sample", "sample_hidden"}),
    "beam log-probabilities as log(softmax)": ([(
        "                scores = torch.log_softmax(last.double(), dim=-1)",
        "                scores = torch.log(torch.softmax(last.double(), dim=-1))")], "6", {"public_decoding", "beam_narrow"}),
    "greedy argmax of exp(logits) normalised by hand": ([(GREEDY_LOOP, GREEDY_LOOP.replace(
        "            token = int(logits[0, -1].argmax())\n",
        "            p = torch.exp(logits[0, -1])\n            token = int((p / p.sum()).argmax())\n"))], "6",
        {"greedy_hidden", "public_decoding"}),
    "attention softmax by hand, exp(scores) / sum": ([(ATTN_SOFTMAX,
        "        e = torch.exp(scores)\n        weights = e / e.sum(dim=-1, keepdim=True)")], "8", ATTENTION),
    "train_seq2seq loss as -log(softmax) over real targets": ([(SEQ2SEQ_LOSS,
        "        logp = torch.log(torch.softmax(logits, dim=-1)).reshape(-1, logits.size(-1))\n"
        "        keep = (y.reshape(-1) != PAD).to(logp.dtype)\n"
        "        loss = -(logp.gather(1, y.reshape(-1, 1))[:, 0] * keep).sum() / keep.sum()")], "8", S2S_EXACT),
    # 2. tensors made on torch's default device
    "greedy_decode feeds tensors made on the default device": ([(GREEDY_FEED, GREEDY_FEED.replace(", device=device", "")),
        ("            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n\n\ndef sample",
         "            logits, state = model(torch.tensor([[token]]), state)\n    return out\n\n\ndef sample")], "6",
        {"greedy_hidden"}),
    "sample feeds the prefix made on the default device": ([(SAMPLE_FEED, SAMPLE_FEED.replace(", device=device", ""))],
                                                           "6", {"sample_hidden"}),
    "beam_search feeds the prefix made on the default device": ([(BEAM_FEED, BEAM_FEED.replace(", device=device", ""))],
                                                                "6", {"beam_narrow"}),
    "hidden_grad_norms zero state by torch.zeros (no device)": ([(HGN_START, HGN_START.replace(
        "x.new_zeros(x.size(0), cell.hidden_size)", "torch.zeros(x.size(0), cell.hidden_size, dtype=x.dtype)"))], "5",
        {"hidden_grad_norms_hidden"}),
    "greedy_translate <s> column by torch.full (no device)": ([("        token = torch.full_like(src[:, 0], BOS)\n",
        "        token = torch.full((src.size(0),), BOS)\n")], "8", {"greedy_translate_hidden", "public_seq2seq"}),
    "Seq2Seq logits preallocated by torch.zeros (no device)": ([(S2S_FORWARD,
        "        enc, state = self.encode(src)\n        B, T = tgt_in.shape\n"
        "        logits = torch.zeros(B, T, self.out.out_features, dtype=enc.dtype)\n        weights = []\n"
        "        for i in range(T):\n"
        "            logits[:, i], state, w = self.decode_step(tgt_in[:, i], state, enc, src_mask)\n"
        "            weights.append(w)\n        return logits, torch.stack(weights, dim=1)\n")], "8",
        {"seq2seq_forward_hidden", "train_seq2seq_exact"}),  # the training's device probe runs this Seq2Seq
    # 3. returned types and edge arguments the docstrings fix
    "clip_grad_norm returns the norm as a tensor": ([("    return float(total)", "    return total")], "4",
                                                    {"public_tbptt_pieces", "clip_hidden"}),
    "train_lm returns loss tensors": ([("        losses.append(loss.item())\n        i += bptt\n",
                                        "        losses.append(loss.detach())\n        i += bptt\n")], "4",
                                      {"public_train_lm", "train_lm_exact", "train_lm_repeatable"}),
    "train_seq2seq returns loss tensors": ([("        losses.append(loss.item())\n    return losses\n\n\ndef greedy_translate",
                                             "        losses.append(loss.detach())\n    return losses\n\n\ndef greedy_translate")],
                                           "8", S2S_EXACT),
    "greedy_decode checks max_len after emitting (max_len=0 gives a token)": ([(GREEDY_LOOP,
        "        out = []\n        while True:\n            token = int(logits[0, -1].argmax())\n"
        "            out.append(token)\n            if token == eos_id or len(out) >= max_len:\n                break\n")],
        "6", {"public_decoding", "greedy_hidden"}),
    "greedy_translate stacks no rows at max_len=0": ([(
        "        out = torch.stack(rows, dim=1).tolist() if rows else [[] for _ in range(src.size(0))]  # max_len may be 0\n",
        "        out = torch.stack(rows, dim=1).tolist()\n")], "8", {"public_seq2seq", "greedy_translate_hidden"}),
}

HUNT_CORRECT |= {
    "hidden_grad_norms with a local variable named lstm": ([(HGN_START,
        "        lstm = isinstance(cell, LSTMCell)\n        if state is None:\n"
        "            h = x.new_zeros(x.size(0), cell.hidden_size)\n            state = (h, h) if lstm else h\n")], {"5"}),
    "LSTMLayer from a zero-state buffer, over x.unbind(1)": ([
        ("        self.cell = LSTMCell(input_size, hidden_size)\n",
         "        self.cell = LSTMCell(input_size, hidden_size)\n"
         "        self.register_buffer(\"zero\", torch.zeros(1, hidden_size))  # moves and casts with the module\n"),
        ("            h = x.new_zeros(x.size(0), self.cell.hidden_size)\n            state = (h, h)\n",
         "            h = self.zero.to(x.dtype).expand(x.size(0), -1)\n            state = (h, h)\n"),
        (LSTM_LOOP, "        outputs = []\n        for x_t in x.unbind(1):\n            state = self.cell(x_t, state)\n"
                    "            outputs.append(state[0])\n        return torch.stack(outputs, dim=1), state\n")], {"2", "3"}),
    "stable softmax by hand (max subtracted) in sample and attention": ([
        (TEMPERATURE, "            z = logits[0, -1].double() / temperature\n            e = torch.exp(z - z.max())\n"
                      "            probs = (e / e.sum()).cpu()"),
        (ATTN_SOFTMAX, "        e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)\n"
                       "        weights = e / e.sum(dim=-1, keepdim=True)")], {"6", "8"}),
    "clip by torch.nn.utils.clip_grad_norm_ as a float; lm_loss by nll_loss of log_softmax in float64": ([
        (CLIP_BODY, "    return float(torch.nn.utils.clip_grad_norm_(parameters, max_norm))\n"),
        ("    grads = [p.grad for p in parameters if p.grad is not None]\n",
         "    parameters = [p for p in parameters if p.grad is not None]\n    grads = parameters\n"),
        (LOSS_TAIL.split("\n")[0] + "\n", "    losses = F.nll_loss(F.log_softmax(logits.reshape(-1, logits.size(-1)).double(), -1), "
                                         "targets.reshape(-1), reduction=\"none\").to(logits.dtype)\n")], {"3", "4"}),
    "decoders build tokens by as_tensor on the model's device; greedy_translate guards max_len=0": ([
        (GREEDY_FEED, GREEDY_FEED.replace("torch.tensor([prefix], device=device)",
                                          "torch.as_tensor(prefix, device=device)[None]")),
        ("        out = torch.stack(rows, dim=1).tolist() if rows else [[] for _ in range(src.size(0))]  # max_len may be 0\n",
         "        if not rows:\n            return [[] for _ in range(src.size(0))]\n"
         "        out = torch.stack(rows, dim=1).tolist()\n")], {"6", "8"}),
}


# Second-hunt bugs that a public check now catches too (the public checks were extended with inputs chosen
# for them: float64 calls, call_pure, tied weights, N % B == 0, the wrap-around at L - 1, an LSTM state in
# hidden_grad_norms, a sampler seeds and frequencies, whole beams, Seq2Seq and greedy_translate).
NOW_PUBLIC = {
    "public_rnn": (
        "RNNLayer outputs preallocated by torch.zeros (float32 whatever x is)",
        "RNNLayer writes each state into h0",
        "RNNLayer zeros made without the device",
    ),
    "public_lstm": (
        "LSTM cell state updated in place (the caller's c)",
        "LSTMLayer zero cell state made as float32 on the CPU",
    ),
    "public_rnnlm": (
        "RNNLM forward drops the given state",
        "lm_loss writes -100 into the caller's tokens",
        "tied sizes checked by assert",
        "lm_loss returns loss.item()",
        "tied by nn.Parameter(embedding.weight) (a second parameter)",
    ),
    "public_tbptt_pieces": (
        "batchify cuts with stream[:-(N % B)]",
        "detach_state detaches in place",
        "detach_state returns a list for a pair",
        "detach_state clones instead of detaching",
        "clip_grad_norm walks the parameters generator twice",
        "clip_grad_norm without the 1e-6",
        "clip_grad_norm fails when no parameter has a gradient",
    ),
    "public_train_lm": (
        "train_lm wraps around at i >= L (an empty chunk)",
        "train_lm wraps around but keeps the state",
    ),
    "public_hidden_grad_norms": (
        "hidden_grad_norms in float32 (a tensor of .item()s)",
        "hidden_grad_norms ignores the given state",
        "hidden_grad_norms of an LSTM's c",
    ),
    "public_decoding": (
        "greedy_decode appends to the caller's prefix",
        "beam stops once beam_size hypotheses are finished",
        "beam drops the hypotheses still open at max_len",
        "beam keeps finished hypotheses in the beam, competing for places",
    ),
    "public_sample": (
        "temperature applied after the softmax",
        "temperature multiplies the logits",
        "generator made without the seed",
        "generator not passed to multinomial",
        "sample seeds torch's global generator",
        "sample extends the caller's prefix",
        "sample feeds only the last token of the prefix",
    ),
    "public_seq2seq": (
        "attention masked after the softmax, not renormalized",
        "attention scores divided by sqrt(attn_size)",
        "decoder attends with the new h",
        "greedy_translate without the source mask",
        "greedy_translate feeds <s> at every step",
        "greedy_translate starts the decoder from zeros",
        "attention keys projected without key_proj's bias",
    ),
}
for _check, _names in NOW_PUBLIC.items():
    for _name in _names:
        _replacements, _question, _expected = HUNT_BUGS[_name]
        HUNT_BUGS[_name] = (_replacements, _question, _expected | {_check})


def test_hunt_bugs_are_caught_in_their_own_question():
    checks = {fn.lmgrade_check.name: fn.lmgrade_check.question for fn in RNN_LM.checks()}
    for name, (_, question, expected) in HUNT_BUGS.items():
        assert expected and {checks[c] for c in expected} == {question}, name


@pytest.mark.parametrize("bug", sorted(HUNT_BUGS))
def test_hunt_bug_is_caught_by_exactly_its_checks_in_process(bug):
    replacements, question, expected = HUNT_BUGS[bug]
    assert run_in_process(edited_solution("rnn_lm", replacements), {question}) == expected


@pytest.mark.parametrize("variant", sorted(HUNT_CORRECT))
def test_hunt_correct_variant_passes_in_process(variant):
    replacements, questions = HUNT_CORRECT[variant]
    assert run_in_process(edited_solution("rnn_lm", replacements), questions) == set()


def test_staff_solution_passes_in_process():
    assert run_in_process(edited_solution("rnn_lm", []), set(RNN_LM.questions)) == set()
