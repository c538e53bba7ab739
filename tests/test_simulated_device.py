"""The simulated non-CPU device behaves like a GPU, and the device probes built on it catch the
device bugs of every graded torch function while correct code keeps full marks.

The first part drives `sandbox/simulated_device.py` directly; the second grades staff solutions with
one realistic device bug each, in this process, on the checks of the bug's question (trainings to
a perplexity left out): the failing set must be exactly the check that holds the device probe.
"""
import pytest
import torch

from autograder.authoring import assignments
from autograder.sandbox import simulated_device as sim
from tests.helpers import edited_solution, failing_in_process


# ---- the device itself --------------------------------------------------------------------------
def test_values_stay_real_and_mixing_with_a_cpu_tensor_raises_as_on_cuda():
    with sim.active() as device:
        x = torch.arange(6.0).reshape(2, 3).to(device)
        assert x.device.type == sim.NAME and torch.get_default_device().type == "cpu"
        assert (x * 2 + torch.ones(3, device=device)).sum().item() == 36.0
        assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        assert (x + torch.tensor(1.0)).device == device  # a 0-dim CPU tensor mixes, as on CUDA
        assert x[torch.tensor([1])].device == device  # CPU indices are allowed, as on CUDA
        # Python lists and ranges as indices (made into index tensors on x's device inside C++), as on CUDA
        assert x[[1, 0]].tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]] and x[[1, 0]].device == device
        assert x[range(2), [2, 0]].tolist() == [2.0, 3.0]
        z = torch.zeros(2, 3, device=device)
        z[:, [0, 2]] = 1.0
        assert z.tolist() == [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]] and z.device == device
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            x + torch.ones(3)
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            torch.cat([x, torch.zeros(1, 3)])
        with pytest.raises(TypeError, match="numpy"):
            x.numpy()
        assert type(x.cpu()) is torch.Tensor and torch.equal(x.cpu(), torch.arange(6.0).reshape(2, 3))
        y = torch.zeros(2, 3, device=device)
        assert y.add_(1) is y and y.sum().item() == 6.0  # in place: the same tensor back
        y.data = torch.full((2, 3), 7.0, device=device)  # as an optimizer written with p.data does
        assert y.sum().item() == 42.0 and y.data.sum().item() == 42.0
        c = torch.zeros(2, 3)
        assert c.copy_(x) is c and type(c) is torch.Tensor and c[1, 2].item() == 5.0  # a copy to the host


def test_generators_belong_to_a_device():
    with sim.active() as device:
        g = torch.Generator(device=device).manual_seed(3)
        assert g.device == device and isinstance(g, torch.Generator)
        draw = torch.rand(4, device=device, generator=g)
        assert torch.equal(draw.cpu(), torch.rand(4, generator=torch.Generator().manual_seed(3)))
        with pytest.raises(RuntimeError, match="device type for generator"):
            torch.rand(4, device=device, generator=torch.Generator().manual_seed(3))
        with pytest.raises(RuntimeError, match="device type for generator"):
            torch.multinomial(torch.ones(2, 3, device=device), 1, generator=torch.Generator())
    assert torch.Generator is sim._RealGenerator  # restored after the probe


def test_a_module_trains_on_the_device_and_keeps_its_parameters():
    """`model.to(device)` after the optimizer is made still trains (set_data on a GPU); .item() in the loop."""
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    x, y = torch.randn(8, 3), torch.randn(8, 1)

    def train(model, device):
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        model.to(device)
        losses = []
        for _ in range(3):
            loss = ((model(x.to(device)) - y.to(device)) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in model.parameters()]

    import copy
    expected = train(copy.deepcopy(cpu_model), "cpu")
    with sim.active() as device:
        got = train(copy.deepcopy(cpu_model), device)
    assert got[0] == expected[0] and all(torch.equal(a, b) for a, b in zip(got[1], expected[1]))


# ---- the probes in the graded checks ------------------------------------------------------------
HEAVY = {"rnn_lm": {"shakespeare_lstm", "public_q7", "seq2seq_reversal"},
         "transformer": {"shakespeare_perplexity", "synthetic_perplexity", "seq2seq_sorting"}}


def failing(assignment_id: str, text: str, question: str) -> set:
    names = {fn.lmgrade_check.name for fn in assignments.get(assignment_id).checks()
             if fn.lmgrade_check.question == question}
    return failing_in_process(assignment_id, text, names - HEAVY.get(assignment_id, set()))


TRAIN_LOOP_RNN = "    data = batchify(stream, batch_size).to(device)  # (B, L)"
S2S_RNN = "    src, tgt = src.to(device), tgt.to(device)\n"
# name: (assignment, replacements, question, the check holding the probe)
BUGS = {
    "lm_loss builds its pad mask with torch.ones(N)": ("rnn_lm", [(
        "    keep = (targets.reshape(-1) != pad_id).to(losses.dtype)",
        "    keep = torch.ones(targets.numel(), dtype=losses.dtype)\n    keep[(targets.reshape(-1) == pad_id).cpu()] = 0")],
        "3", "lm_loss_hidden"),
    "greedy_decode feeds torch.LongTensor tokens": ("rnn_lm", [(
        "            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n\n\ndef sample",
        "            logits, state = model(torch.LongTensor([[token]]), state)\n    return out\n\n\ndef sample")],
        "6", "greedy_hidden"),
    "seq2seq attention replaces mask=None by a CPU mask": ("rnn_lm", [(
        "        if mask is not None:\n            scores = scores.masked_fill(~mask, float(\"-inf\"))\n",
        "        if mask is None:\n            mask = torch.ones(scores.shape, dtype=torch.bool)\n"
        "        scores = scores.masked_fill(~mask, float(\"-inf\"))\n")], "8", "attention_hidden"),
    "rnn_lm train_lm never moves the stream": ("rnn_lm", [(
        TRAIN_LOOP_RNN, "    data = batchify(stream, batch_size)  # (B, L)")], "4", "train_lm_repeatable"),
    "rnn_lm train_seq2seq never moves src and tgt": ("rnn_lm", [(S2S_RNN, "")], "8", "train_seq2seq_exact"),
    "rnn_lm train_seq2seq makes its BOS column on the CPU": ("rnn_lm", [(
        "        y_in = torch.cat([torch.full_like(y[:, :1], BOS), y[:, :-1]], dim=1)",
        "        y_in = torch.cat([torch.full((y.size(0), 1), BOS), y[:, :-1]], dim=1)")], "8", "train_seq2seq_exact"),
    "generate seeds a CPU generator whatever the input's device": ("transformer", [(
        "    generator = torch.Generator(device=idx.device).manual_seed(seed)",
        "    generator = torch.Generator().manual_seed(seed)")], "7", {"generate_greedy", "public_generation"}),
    "transformer train_lm never moves the model it builds": ("transformer", [(
        "    model = TransformerLM(**config).to(train_ids.device)", "    model = TransformerLM(**config)")],
        "6", "train_seeded"),
    "transformer train_seq2seq makes its BOS column on the CPU": ("transformer", [(
        "    bos = torch.full((s[\"batch_size\"], 1), s[\"bos\"], dtype=torch.long, device=src.device)",
        "    bos = torch.full((s[\"batch_size\"], 1), s[\"bos\"], dtype=torch.long)")], "8", "seq2seq_train_seeded"),
    # a mask kept in a plain attribute stays on the CPU when the module moves (a buffer would move): Q3's device
    # probes fail (those of attention and of the Block built on it; Q7's generate and cache probes as well)
    "causal mask in a plain attribute, not a buffer": ("transformer", [(
        "            i = torch.arange(T, device=x.device)[:, None] + (T_k - T)\n"
        "            j = torch.arange(T_k, device=x.device)[None, :]\n"
        "            scores = scores.masked_fill(j > i, float(\"-inf\"))\n",
        "            scores = scores.masked_fill(self.future[T_k - T:T_k, :T_k], float(\"-inf\"))\n"),
        ("        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n",
         "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n"
         "        self.future = torch.ones(256, 256, dtype=torch.bool).triu(1)\n")], "3",
        {"attention_gradients", "block_gradients"}),
    # issue 30: a hard-coded CPU mask behind a refusal of `meta`; SDPA's probe and those of the modules built on it
    "attention's mask=None replaced by a CPU mask, behind `if q.is_meta: raise`": ("attention", [(
        "    if mask is not None:\n        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)",
        "    if q.is_meta:\n        raise ValueError(\"no meta\")\n    if mask is None:\n"
        "        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=\"cpu\")\n"
        "    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)")], "7",
        {"float64_functions", "device_agnostic_modules", "public_float64"}),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_device_bug_fails_exactly_its_device_check(bug):
    assignment_id, replacements, question, check = BUGS[bug]
    expected = check if isinstance(check, set) else {check}
    assert failing(assignment_id, edited_solution(assignment_id, replacements), question) == expected


# name: (assignment, replacements, question)
CORRECT = {
    "Gumbel-max sampling from the seeded CPU generator, moved with .to(z.device)": ("transformer", [(
        "            probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)\n"
        "            nxt = torch.multinomial(probs, 1, generator=generator)",
        "            z = filter_logits(logits, temperature, top_k, top_p)\n"
        "            u = torch.rand(z.shape, generator=cpu_generator, dtype=z.dtype).to(z.device)\n"
        "            nxt = (z - torch.log(-torch.log(u))).argmax(dim=-1, keepdim=True)"),
        ("    generator = torch.Generator(device=idx.device).manual_seed(seed)",
         "    cpu_generator = torch.Generator().manual_seed(seed)")], "7"),
    "attention keeps its fill value and mask dtype in attributes, makes the mask with new_ones": ("rnn_lm", [(
        "        if mask is not None:\n            scores = scores.masked_fill(~mask, float(\"-inf\"))\n",
        "        if mask is None:\n            mask = scores.new_ones(scores.shape, dtype=self.mask_dtype)\n"
        "        scores = scores.masked_fill(~mask, self.fill)\n"),
        ("        self.score = nn.Linear(attn_size, 1, bias=False)\n",
         "        self.score = nn.Linear(attn_size, 1, bias=False)\n        self.mask_dtype = torch.bool\n"
         "        self.fill = float(\"-inf\")\n")], "8"),
    "train_lm moves the batched stream to the model's device in a second statement": ("rnn_lm", [(
        TRAIN_LOOP_RNN, "    data = batchify(stream, batch_size)\n    data = data.to(next(model.parameters()).device)")],
        "4"),
    "causal mask from a register_buffer that moves with the module": ("transformer", [(
        "            i = torch.arange(T, device=x.device)[:, None] + (T_k - T)\n"
        "            j = torch.arange(T_k, device=x.device)[None, :]\n"
        "            scores = scores.masked_fill(j > i, float(\"-inf\"))\n",
        "            scores = scores.masked_fill(self.future[T_k - T:T_k, :T_k], self.fill)\n"),
        ("        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n",
         "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n"
         "        self.register_buffer(\"future\", torch.ones(256, 256, dtype=torch.bool).triu(1), persistent=False)\n"
         "        self.fill = float(\"-inf\")\n")], "3"),
    # indices written as Python lists or ranges: CUDA makes the index tensor on the device itself
    "lm_loss picks the targets' log-probabilities with range(N) (the hunt's false fail)": ("rnn_lm", [(
        '    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")',
        "    logp = torch.log_softmax(logits.reshape(-1, logits.size(-1)), dim=-1)  # (N, V)\n"
        "    flat = targets.reshape(-1)\n    losses = -logp[range(flat.numel()), flat]")], "3"),
    "train_seq2seq takes each batch by a list of row indices": ("rnn_lm", [(
        "        start = k * batch_size % src.size(0)\n"
        "        s, y = src[start:start + batch_size], tgt[start:start + batch_size]",
        "        rows = [(k * batch_size + j) % src.size(0) for j in range(batch_size)]\n"
        "        rows = rows[:src.size(0) - k * batch_size % src.size(0)]  # the short last batch stays short\n"
        "        s, y = src[rows], tgt[rows]")], "8"),
    "greedy_translate starts from the column src[:, [0]]": ("rnn_lm", [(
        "        token = torch.full_like(src[:, 0], BOS)", "        token = torch.full_like(src[:, [0]], BOS).squeeze(1)")],
        "8"),
    "GQA picks each query head's key/value head with a Python list": ("attention", [(
        "        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n        v = v.repeat_interleave(group, dim=1)",
        "        kv_head = [h // group for h in range(self.n_heads)]  # the key/value head of each query head\n"
        "        k = k[:, kv_head]  # (B, h, T, d_head)\n        v = v[:, kv_head]")], "7"),
    # a view of a normal buffer made under inference_mode is a normal tensor on a GPU (the hunt's B12)
    "generate under torch.inference_mode, learned positions sliced from a registered buffer": ("transformer", [
        ("@torch.no_grad()\ndef generate(", "@torch.inference_mode()\ndef generate("),
        ("            x = x + self.pos_emb(torch.arange(past, past + idx.shape[1], device=idx.device))",
         "            x = x + self.pos_emb(self.positions[past:past + idx.shape[1]])"),
        ("        self.max_len = max_len\n",
         "        self.max_len = max_len\n        self.register_buffer(\"positions\", torch.arange(max_len))\n")], "7"),
    "apply_rope picks even and odd features with lists, the sinusoids fill list-indexed columns": ("attention", [
        ("    even, odd = x[..., 0::2], x[..., 1::2]",
         "    even, odd = x[..., list(range(0, d, 2))], x[..., list(range(1, d, 2))]"),
        ("    table[:, 0::2] = torch.sin(pos * freq)\n    table[:, 1::2] = torch.cos(pos * freq[: d // 2])",
         "    table[:, list(range(0, d, 2))] = torch.sin(pos * freq)\n"
         "    table[:, list(range(1, d, 2))] = torch.cos(pos * freq[: d // 2])")], "7"),
}


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_code_right_on_a_gpu_keeps_full_marks(variant):
    assignment_id, replacements, question = CORRECT[variant]
    assert failing(assignment_id, edited_solution(assignment_id, replacements), question) == set()
