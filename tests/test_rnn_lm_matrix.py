"""rnn_lm's declarations in the property matrix: the device probes of every graded function now run as the
matrix's `device` property, and `train_seq2seq` declares the pairs it visits (`positions`).

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

# name: (replacements, question)
CORRECT = {
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


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_passes(variant):
    replacements, question = CORRECT[variant]
    assert failures_in_process("rnn_lm", edited_solution("rnn_lm", replacements), question) == {}


def test_positions_message_names_what_the_run_read():
    replacements, question, check, _ = BUGS["train_seq2seq drops the short last batch"]
    message = failures_in_process("rnn_lm", edited_solution("rnn_lm", replacements), question)[check]
    assert "step 11 read positions 0-39" in message and "should read 0-41" in message, message
    assert "the short last batch too" in message
