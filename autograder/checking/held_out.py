"""The grader's secret: every held-out draw, and the seed each one is drawn from.

Why a file of its own: held-out data and every trained model's start must come from a secret the
worker cannot compute, and this is the one place that secret is made (`held_out_seed`, reached
through `Context.secret_seed`, `secret_rng` and `secret_state`) and the one list of what is drawn
from it (HELD_OUT_DRAWS, which tests/test_secrets.py holds the hidden checks to).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["HELD_OUT_DRAWS", "held_out_seed"]

# Every random draw that feeds held-out data or a trained model's start, in every hidden check, by
# (assignment, check, purpose, what it draws). tests/test_secrets.py finds every `secret_seed`,
# `secret_rng` and `secret_state` call in assignments/*/hidden_checks.py and compares with this list.
# Draws of test inputs that cross to the worker anyway (`t.rng`) are not held out and not listed;
# attention's hidden checks make no held-out draw, and backprop's held-out text is the fixed test
# plays, which never cross.
HELD_OUT_DRAWS = (
    ("backprop", "shakespeare_ffnn", "training seed", "the seed train_ffnn gets, hence its batches (sent)"),
    ("backprop", "shakespeare_ffnn", "initial weights", "the start the grader draws and passes to train_ffnn (sent)"),
    ("ngram", "shakespeare_heldout", "shakespeare",
     "which test and validation positions are scored, the order they are asked in, the probe words"),
    ("ngram", "synthetic_floor", "synthetic", "the hidden Markov language and its train / validation / held-out text"),
    ("ngram", "synthetic_floor", "synthetic plan", "which positions are scored, the order, the probe words"),
    ("rnn_lm", "shakespeare_lstm", "initial weights", "the LSTM LM's start (loaded into the student's model)"),
    ("rnn_lm", "seq2seq_reversal", "initial weights", "the Seq2Seq's start (loaded into the student's model)"),
    ("rnn_lm", "seq2seq_reversal", "training pairs", "the 12,800 digit strings trained on (sent)"),
    ("rnn_lm", "seq2seq_reversal", "held-out pairs", "the 500 digit strings scored (never sent)"),
    ("transformer", "shakespeare_perplexity", "initial weights", "init_state (sent)"),
    ("transformer", "shakespeare_perplexity", "batch seed", "settings['seed'], hence the batches (sent)"),
    ("transformer", "synthetic_perplexity", "initial weights", "init_state (sent)"),
    ("transformer", "synthetic_perplexity", "batch seed", "settings['seed'], hence the batches (sent)"),
    ("transformer", "synthetic_perplexity", "held-out sentences", "the 1,500 fresh sentences scored (never sent)"),
    ("transformer", "seq2seq_sorting", "initial weights", "init_state (sent)"),
    ("transformer", "seq2seq_sorting", "batch seed", "settings['seed'], hence the rows of each batch (sent)"),
    ("transformer", "seq2seq_sorting", "held-out strings", "the 1,000 digit strings scored (never sent)"),
)


def held_out_seed(files, secret_key: bytes, submission_seed: int, check: str, purpose: str, bits: int = 64) -> int:
    """The seed of one held-out draw: SHA-256 of the bytes of `files` (the file that declares the check and
    the reference module, which the worker cannot read), the course's key, the submission's seed, the
    check's name and the draw's purpose; see `Context.secret_seed` for why."""
    digest = hashlib.sha256(b"lmgrade held-out draw v1")
    for part in (*(_file_digest(f) for f in files), bytes(secret_key),
                 str(submission_seed).encode(), check.encode(), purpose.encode()):
        digest.update(len(part).to_bytes(8, "little") + part)  # length-prefixed: no two inputs collide
    return int.from_bytes(digest.digest()[:8], "little") >> (64 - bits)


_DIGESTS: dict[tuple, bytes] = {}  # (path, size, mtime) -> sha256 of the file


def _file_digest(path: str) -> bytes:
    stat = Path(path).stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(Path(path).read_bytes()).digest()
    return _DIGESTS[key]
