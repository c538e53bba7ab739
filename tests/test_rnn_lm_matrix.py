"""rnn_lm's declarations in the property matrix: the device probes of every graded function now run as the
matrix's `device` property, `train_seq2seq` declares the pairs it visits (`positions`), and every function that
takes tensors declares a call that must leave torch's global generator alone (`generator`).

Each bug is the staff solution with one edit, graded in this process on its question's checks (the trainings
left out, as in tests/test_property_matrix.py): it must fail exactly the check named, with a message that
starts with the property's name, the function and the input.
"""
import pytest

from tests.helpers import edited_solution
from tests.test_property_matrix import failures_in_process

BATCH_START = "        start = k * batch_size % src.size(0)\n"
BATCH_ROWS = "        s, y = src[start:start + batch_size], tgt[start:start + batch_size]\n"

# name: (replacements, question, check, the start of its message)
BUGS = {
    # the batches are taken in order, but only full ones: the remainder of the pairs is never read (the exact
    # steps' 8 pairs in batches of 4 have no remainder, so this scored full marks on Q8 before)
    "train_seq2seq drops the short last batch": ([(
        BATCH_START, "        start = k * batch_size % (src.size(0) // batch_size * batch_size)  # full batches\n")],
        "8", "train_seq2seq_exact", "property `positions` of train_seq2seq, input Seq2Seq(45, 3, 4, 3), 42 pairs"),
    # a layer that inlines its cell's formula, tanh by exp: right forward at any scale, NaN backward at saturation
    "RNNLayer inlines its cell with tanh as 1 - 2/(exp(2z) + 1)": ([(
        "            h = self.cell(x[:, t], h)  # (B, H)\n",
        "            c = self.cell\n"
        "            z = x[:, t] @ c.weight_ih.T + c.bias_ih + h @ c.weight_hh.T + c.bias_hh\n"
        "            h = 1 - 2 / (torch.exp(2 * z) + 1)  # (B, H)\n")],
        "1", "rnn_gradients", "property `extremes` of RNNLayer(3, 5), input x (2, 4, 3) of about +1000"),
    # the device bugs of tests/test_simulated_device.py, now failing the matrix's `device` property
    "lm_loss builds its pad mask with torch.ones(N)": ([(
        "    keep = (targets.reshape(-1) != pad_id).to(losses.dtype)",
        "    keep = torch.ones(targets.numel(), dtype=losses.dtype)\n    keep[(targets.reshape(-1) == pad_id).cpu()] = 0")],
        "3", "lm_loss_hidden", "property `device` of lm_loss, input ToyRecurrentLM(8, 5), tokens (4, 6) padded"),
    "greedy_decode feeds torch.LongTensor tokens": ([(
        "            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n\n\ndef sample",
        "            logits, state = model(torch.LongTensor([[token]]), state)\n    return out\n\n\ndef sample")],
        "6", "greedy_hidden", "property `device` of greedy_decode, input TableModel (logits of thousands), prefix [1, 2]"),
    "train_seq2seq never moves src and tgt": ([("    src, tgt = src.to(device), tgt.to(device)\n", "")],
                                              "8", "train_seq2seq_exact", "property `device` of train_seq2seq, input"),
}

# torch's global generator, touched by functions that draw nothing (a seed "for reproducibility", noise of scale
# 0): each fails its own check and, where train_lm or train_seq2seq calls it, theirs too (they touch it then);
# the public checks of Q4 and Q5 run the property on a call each already makes, so students see it too
# (public_train_lm, which also fails, is left out here with the trainings).
# name: (replacements, question, {failing check: the start of its message})
GENERATOR = "property `generator` (torch's global generator left alone): "
GENERATOR_BUGS = {
    "batchify seeds torch for reproducible batches": ([(
        "    L = stream.size(0) // batch_size\n", "    torch.manual_seed(0)\n    L = stream.size(0) // batch_size\n")],
        "4", {"batchify_hidden": GENERATOR + "batchify(stream (9,), 3)", "train_lm_repeatable": GENERATOR + "train_lm",
              "public_tbptt_pieces": GENERATOR + "batchify(arange(100, 123), 3)"}),
    "get_chunk with a variable bptt whose jitter is left at 0": ([(
        "    n = min(bptt, data.size(1) - 1 - i)\n",
        "    n = min(bptt + int(torch.randint(0, 1, ())), data.size(1) - 1 - i)  # AWD-style jitter, width 0 for now\n")],
        "4", {"get_chunk_hidden": GENERATOR + "get_chunk(data (3, 11), 2, 4)", "train_lm_repeatable": GENERATOR,
              "public_tbptt_pieces": GENERATOR + "get_chunk(data (3, 7), 4, 4)"}),
    "detach_state adds state noise of scale 0": ([(
        "        return state.detach()\n", "        return state.detach() + 0.0 * torch.randn_like(state)\n")],
        "4", {"detach_state_hidden": GENERATOR + "detach_state(h (2, 5))", "train_lm_repeatable": GENERATOR,
              "public_tbptt_pieces": GENERATOR + "detach_state(h (2, 3))"}),
    "clip_grad_norm adds gradient noise of scale 0": ([(
        "    grads = [p.grad for p in parameters if p.grad is not None]\n",
        "    grads = [p.grad for p in parameters if p.grad is not None]\n"
        "    for g in grads:\n        g.add_(torch.randn_like(g) * 0.0)  # gradient noise, off for now\n")],
        "4", {"clip_hidden": GENERATOR + "clip_grad_norm(3 parameters with large gradients, 1.5)",
              "train_lm_repeatable": GENERATOR, "public_tbptt_pieces": GENERATOR + "clip_grad_norm(a gradient [3, 4]"}),
    "hidden_grad_norms seeds torch so that the plot is reproducible": ([(
        "    with torch.enable_grad():\n        if state is None:\n",
        "    torch.manual_seed(0)\n    with torch.enable_grad():\n        if state is None:\n")],
        "5", {"hidden_grad_norms_hidden": GENERATOR + "hidden_grad_norms(RNNCell(4, 5), x (3, 4, 4))",
              "public_hidden_grad_norms": GENERATOR + "hidden_grad_norms(RNNCell(3, 4), x (2, 6, 3))"}),
    # decoders: a seed at the top of beam_search (its first edge call, max_len=0, returned before it: the
    # generator property now runs on an ordinary call); sample drawing from numpy's or Python's global generator,
    # reseeded per call (reproducible and rightly distributed: only the global generators show it)
    "beam_search seeds torch for reproducible beams": ([(
        "    device = model_device(model)\n    with torch.no_grad():\n        logits, state = model(torch.tensor([prefix], "
        "device=device), None)\n        beam = ",
        "    torch.manual_seed(0)  # reproducible\n    device = model_device(model)\n    with torch.no_grad():\n"
        "        logits, state = model(torch.tensor([prefix], device=device), None)\n        beam = ")],
        "6", {"beam_narrow": GENERATOR + "beam_search(TableModel (V = 5), prefix [1, 2], beam_size=2",
              "public_decoding": GENERATOR + "beam_search(TableModel(table), prefix=[2]"}),
    "sample reseeds numpy's global generator and draws with np.random.choice": ([
        ("    generator = torch.Generator().manual_seed(seed)\n", "    np.random.seed(seed)\n"),
        ("            token = int(torch.multinomial(probs, 1, generator=generator))",
         "            token = int(np.random.choice(probs.numel(), p=(probs / probs.sum()).double().numpy()))"),
        ("def sample(model, prefix, max_len, eos_id, temperature=1.0, seed=0):",
         "import numpy as np\n\n\ndef sample(model, prefix, max_len, eos_id, temperature=1.0, seed=0):")],
        "6", {"sample_hidden": GENERATOR + "sample(TableModel (V = 5), prefix [1, 2], max_len=6",
              "public_sample": "sample(TableModel, [0, 1]"}),
    "sample reseeds Python's random and draws with random.choices": ([
        ("    generator = torch.Generator().manual_seed(seed)\n", "    random.seed(seed)\n"),
        ("            token = int(torch.multinomial(probs, 1, generator=generator))",
         "            token = random.choices(range(probs.numel()), weights=probs.tolist())[0]"),
        ("def sample(model, prefix, max_len, eos_id, temperature=1.0, seed=0):",
         "import random\n\n\ndef sample(model, prefix, max_len, eos_id, temperature=1.0, seed=0):")],
        "6", {"sample_hidden": GENERATOR + "sample(TableModel (V = 5), prefix [1, 2], max_len=6",
              "public_sample": "sample(TableModel, [0, 1]"}),
    "train_lm seeds torch for reproducibility": ([(
        "    data = batchify(stream, batch_size).to(device)  # (B, L)\n",
        "    torch.manual_seed(0)\n    data = batchify(stream, batch_size).to(device)  # (B, L)\n")],
        "4", {"train_lm_repeatable": GENERATOR + "train_lm(ToyRecurrentLM on the device"}),
    "train_seq2seq seeds torch for reproducibility": ([(
        "    src, tgt = src.to(device), tgt.to(device)\n",
        "    torch.manual_seed(0)\n    src, tgt = src.to(device), tgt.to(device)\n")],
        "8", {"train_seq2seq_exact": GENERATOR + "train_seq2seq(Seq2Seq on the device"}),
}

# the hunt's bugs of this round (each full marks on its question before): name: (replacements, question,
# {failing check: the start of its message}); the public checks of Q6 and Q8 now run the same inputs
PAIR_STATE = "property `shapes` of {}, input ToyRecurrentLM(5, 3, pair_state=True)"
PUBLIC_TRANSLATE_DEVICE = "property `device` of greedy_translate, input Seq2Seq(13, 5, 6, 4) on the device, src (4, 6)"
TRANSLATE_DEVICE = ("property `device` of greedy_translate, input Seq2Seq(13, 5, 6, 4) with a random model's weights "
                    "on the device, src (8, 6) on the CPU")
HUNT_BUGS = {
    # the autograd flag switched on the caller's tensor: values right, but every later use of x builds a graph
    "hidden_grad_norms calls x.requires_grad_() on its argument": ([(
        "    with torch.enable_grad():\n        if state is None:\n",
        "    x.requires_grad_()\n    with torch.enable_grad():\n        if state is None:\n")], "5",
        {"hidden_grad_norms_hidden": "hidden_grad_norms(RNNCell(4, 5) with W_hh scaled by 1.0, x (3, 9, 4), no state) "
                                     "changed its argument 2 (requires_grad False became True)"}),
    # the hunt's: squeeze() of (B, S, 1) scores is right unless S = 1 and B > 1 (the scores then lose their batch
    # axis and the mask broadcasts them over the batch); greedy_translate fed CPU data, as its callers keep it
    "AdditiveAttention squeezes its scores with squeeze()": ([(
        "        scores = self.score(torch.tanh(self.query_proj(query)[:, None, :] + self.key_proj(keys))).squeeze(-1)",
        "        scores = self.score(torch.tanh(self.query_proj(query)[:, None, :] + self.key_proj(keys))).squeeze()")],
        "8", {"attention_hidden": "AdditiveAttention(3, 4, 5)(query (3, 3), keys (3, 1, 4), lengths [1, 1, 1]",
              "public_attention": "AdditiveAttention(3, 4, 5)(query (3, 3), keys (3, 1, 4)"}),
    "greedy_translate never moves src to the model's device": ([(
        "        src = src.to(next(model.parameters()).device)\n", "")],
        "8", {"greedy_translate_hidden": TRANSLATE_DEVICE, "public_seq2seq": PUBLIC_TRANSLATE_DEVICE}),
    "greedy_translate makes its source mask before moving src": ([
        ("        src = src.to(next(model.parameters()).device)\n",
         "        src_mask = src != PAD\n        src = src.to(next(model.parameters()).device)\n"),
        ("            logits, state, _ = model.decode_step(token, state, enc, src != PAD)",
         "            logits, state, _ = model.decode_step(token, state, enc, src_mask)")],
        "8", {"greedy_translate_hidden": TRANSLATE_DEVICE, "public_seq2seq": PUBLIC_TRANSLATE_DEVICE}),
    # decoders written for the table model's tensor state, which break on an LSTM's (h, c): the matrix's `shapes`
    # and public_decoding/public_sample now include a model whose state is a pair
    "beam_search clones each hypothesis' state with st.clone()": ([(
        "                    logits, new_state = model(torch.tensor([[tokens[-1]]], device=device), st)",
        "                    logits, new_state = model(torch.tensor([[tokens[-1]]], device=device), st.clone())")],
        "6", {"beam_narrow": PAIR_STATE.format("beam_search"),
              "public_decoding": "beam_search(<ToyRecurrentLM>, [1, 2], 2, 3, 4) raised"}),
    "greedy_decode detaches the state it feeds back": ([(
        "            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n\n\ndef sample",
        "            logits, state = model(torch.tensor([[token]], device=device), state.detach())\n    return out\n\n\n"
        "def sample")],
        "6", {"greedy_hidden": PAIR_STATE.format("greedy_decode"),
              "public_decoding": "greedy_decode(<ToyRecurrentLM>, [1, 2], 4, 4) raised"}),
    "sample moves the state to the model's device": ([(
        "            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n\n\ndef beam",
        "            logits, state = model(torch.tensor([[token]], device=device), state.to(device))\n    return out\n\n\n"
        "def beam")],
        "6", {"sample_hidden": PAIR_STATE.format("sample"),
              "public_sample": "sample(<ToyRecurrentLM>, [1, 2], 4, 4, seed=3) raised"}),
}

# name: (replacements, question)
CORRECT = {
    "RNNLayer inlines its cell's formula with torch.tanh": ([(
        "            h = self.cell(x[:, t], h)  # (B, H)\n",
        "            c = self.cell\n"
        "            h = torch.tanh(x[:, t] @ c.weight_ih.T + c.bias_ih + h @ c.weight_hh.T + c.bias_hh)  # (B, H)\n")],
        "1"),
    "train_seq2seq keeps a running start and takes each batch with narrow": ([
        ("    losses = []\n    for k in range(steps):\n" + BATCH_START + BATCH_ROWS,
         "    losses, start = [], 0\n    for _ in range(steps):\n"
         "        rows = min(batch_size, src.size(0) - start)\n"
         "        s, y = src.narrow(0, start, rows), tgt.narrow(0, start, rows)\n"
         "        start = (start + batch_size) % src.size(0)\n")], "8"),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_fails_exactly_its_property(bug):
    replacements, question, check, message = BUGS[bug]
    failed = failures_in_process("rnn_lm", edited_solution("rnn_lm", replacements), question)
    assert set(failed) == {check}, failed
    assert failed[check].startswith(message), failed[check]


@pytest.mark.parametrize("bug", sorted(GENERATOR_BUGS | HUNT_BUGS))
def test_bug_fails_its_functions_check_and_its_callers(bug):
    replacements, question, expected = (GENERATOR_BUGS | HUNT_BUGS)[bug]
    failed = failures_in_process("rnn_lm", edited_solution("rnn_lm", replacements), question)
    assert set(failed) == set(expected), failed
    for check, message in expected.items():
        assert failed[check].startswith(message), failed[check]


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_passes(variant):
    replacements, question = CORRECT[variant]
    assert failures_in_process("rnn_lm", edited_solution("rnn_lm", replacements), question) == {}


def test_positions_message_names_what_the_run_read():
    replacements, question, check, _ = BUGS["train_seq2seq drops the short last batch"]
    message = failures_in_process("rnn_lm", edited_solution("rnn_lm", replacements), question)[check]
    assert "step 11 read positions 0-39" in message and "should read 0-41" in message, message
    assert "the short last batch too" in message
