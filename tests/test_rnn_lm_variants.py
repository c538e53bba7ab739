"""The rnn_lm grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it. The expected set of
failing checks is the bug's own checks; later questions are graded on grader-made pieces (Q4 on the
given ToyRecurrentLM, Q6 on the given TableModel), so a bug costs its own question. Grading is
limited to the questions a variant can affect, and Q7/Q8's trainings are left out where a variant
cannot reach them, to keep the suite fast.
"""
import pytest

from autograder import assignments, runner
from tests.helpers import edited_solution

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
TEMPERATURE = "            probs = torch.softmax(logits[0, -1].double() / temperature, dim=-1)"
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
          "            self.proj.weight = nn.Parameter(self.embedding.weight.detach().clone())")], {"3"}, {"rnnlm_tied"}),
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
        {"6"}, {"greedy_hidden"}),
    "temperature ignored": ([(TEMPERATURE, TEMPERATURE.replace(" / temperature", ""))], {"6"}, {"sample_hidden"}),
    "a new generator at every step": (
        [(TEMPERATURE, TEMPERATURE + "\n            generator = torch.Generator().manual_seed(seed)")], {"6"},
        {"sample_hidden"}),
    "beam scores not length-normalized": ([(SCORED, SCORED.replace(" / len(tokens) ** alpha", ""))], {"6"},
                                          {"public_decoding", "beam_width_one", "beam_exhaustive"}),
    "finished hypotheses ranked by raw log-probability": (
        [("    scored.sort(key=lambda pair: -pair[1])",
          "    scored.sort(key=lambda pair: -pair[1] * len(pair[0]) ** alpha)")], {"6"}, {"beam_exhaustive"}),
    "attention softmax over the batch": ([(ATTN_SOFTMAX, ATTN_SOFTMAX.replace("dim=-1", "dim=0"))], {"8"},
                                         {"public_attention", "attention_hidden", "attention_gradients",
                                          "seq2seq_forward_hidden", "train_seq2seq_exact", "seq2seq_reversal"}),
    "greedy_translate reverses the source by hand (no model)": (
        [("        src = src.to(next(model.parameters()).device)\n",
          "        return [[d for d in reversed(row) if d != PAD] for row in src.tolist()]\n")], {"8"},
        {"greedy_translate_hidden"}),  # Q8's accuracy comes from the trained weights, decoded by the grader
}

# name: (replacements, questions graded)
CORRECT = {
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
        "    with torch.no_grad():\n        logits, state = model(torch.tensor([prefix]), None)\n        out = []\n"
        "        for _ in range(max_len):\n            token = int(logits[0, -1].argmax())\n",
        "    return beam_search(model, prefix, 1, max_len, eos_id)[0][0]\n"
        "    with torch.no_grad():\n        logits, state = model(torch.tensor([prefix]), None)\n        out = []\n"
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
