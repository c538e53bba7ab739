"""Only work the grader saw earns points: trained models must descend from the grader's secret start,
and a cache a check claims to test must change the answer.

Each attack below is a training function a hostile student could submit; each gains nothing. The
checks are the real ones, run in this process (tests/helpers.py), with the long runs shortened to a
few dozen steps (the statistic's spread over full runs is bench/*_thresholds.py's, in the docs).
"""
import pytest
import torch

from autograder.authoring import assignments
from autograder.checking.checks import Context
from autograder.checking.provenance import assert_descends, start_correlations, start_profile
from autograder.errors import CheckFailed
from tests.helpers import edited_solution, failing_in_process, run_check_recording, staff_module

RNN_LM, TRANSFORMER = assignments.get("rnn_lm"), assignments.get("transformer")
SHORT = 30  # steps of a shortened long run


def check_fn(assignment, name):
    return next(fn for fn in assignment.checks() if fn.lmgrade_check.name == name)


def hidden(assignment):
    """The hidden checks' module namespace (settings live there; a test may shorten them)."""
    return check_fn(assignment, "shakespeare_lstm" if assignment is RNN_LM else "shakespeare_perplexity").__globals__


def context(assignment, name) -> Context:
    """The Context run_check_recording builds: the same secret start and batches as the check gets."""
    return Context(student=None, ref=assignment.reference(), spec=check_fn(assignment, name).lmgrade_check)


def fails_for_provenance(error) -> bool:
    text = str(error)
    return isinstance(error, CheckFailed) and ("do not descend" in text or f"after {2} steps" in text
                                               or "after the first 2 steps" in text)


# ---- the statistic ------------------------------------------------------------------------------
def test_every_matrix_must_keep_its_share_of_the_start():
    g = torch.Generator().manual_seed(0)
    start = {"w": torch.randn(64, 64, generator=g), "e": torch.randn(30, 10, generator=g),
             "b": torch.randn(64, generator=g), "tiny": torch.randn(8, 8, generator=g)}

    def trained(s):  # the embedding-like "e" barely moves, "w" a lot
        return {"w": s["w"] + 1.2 * torch.randn(64, 64, generator=g), "e": s["e"] + 0.1 * torch.randn(30, 10, generator=g),
                "b": torch.zeros(64), "tiny": torch.zeros(8, 8)}

    rule = dict(least=0.4, mean=0.7)
    profile = start_profile(start, trained(start))
    assert set(profile) == {"w", "e"}  # vectors and small matrices are not compared
    assert profile["e"] > 0.95 and 0.5 < profile["w"] < 0.8
    again = {k: torch.randn(v.shape, generator=g) for k, v in start.items()}  # another start, trained the same way
    assert min(assert_descends(again, trained(again), profile, "x", **rule).values()) > 0.8
    other = {k: torch.randn(v.shape, generator=g) for k, v in start.items()}
    assert abs(start_correlations(start, trained(other))["w"]) < 0.08
    with pytest.raises(CheckFailed, match="do not descend"):
        assert_descends(start, trained(other), profile, "x", **rule)
    blend = trained(other)  # another start with as much of this one in "w" as a genuine run keeps: "e" still fails
    blend["w"] = blend["w"] + start["w"]
    with pytest.raises(CheckFailed, match="`e` keeps"):
        assert_descends(start, blend, profile, "x", **rule)
    half = trained(other)  # half of the trace in every matrix: each above `least`, the mean below `mean`
    half = {k: (v + 0.75 * start[k] if k in profile else v) for k, v in half.items()}
    shares = {k: start_correlations(start, half)[k] / profile[k] for k in profile}
    assert all(0.4 < x < 0.7 for x in shares.values()), shares
    with pytest.raises(CheckFailed, match="do not descend"):
        assert_descends(start, half, profile, "x", **rule)
    with pytest.raises(CheckFailed, match="do not descend"):  # a missing matrix counts as 0
        assert_descends(start, {"w": start["w"]}, profile, "x", **rule)


# ---- rnn_lm Q7 and Q8 ---------------------------------------------------------------------------
@pytest.fixture
def short_rnn(monkeypatch):
    """rnn_lm's Q7 and Q8 runs shortened to SHORT steps (the data cache filled with the real settings first)."""
    names = hidden(RNN_LM)
    names["char_data"]()  # lru-cached with the real length: later checks in this process see the real data
    monkeypatch.setitem(names, "Q7_SETTINGS", dict(names["Q7_SETTINGS"], steps=SHORT))
    monkeypatch.setitem(names, "Q8_SETTINGS", dict(names["Q8_SETTINGS"], steps=SHORT))
    monkeypatch.setitem(names, "Q8_MIN_ACCURACY", 0.0)  # 30 steps cannot reverse strings yet
    return names


def rnn_results(names, figure: float = 1e6) -> dict:
    """Cached reference results for the shortened runs: start profiles of the reference's own short runs."""
    ref = RNN_LM.reference()
    return {"q7-shakespeare": figure, "q7-start": names["q7_threshold_run"](ref)["start"],
            "q8-start": names["reference_q8_start"](ref)}


def rnn_pasted(names, which: str, kind: str) -> dict:
    """Weights not from the grader's start: the reference's few steps from another start, or a fresh model."""
    ref = RNN_LM.reference()
    torch.manual_seed(12345)
    if which == "q7":
        vocab, train_ids, _ = names["char_data"]()
        model = names["q7_model"](ref, len(vocab))
        if kind == "trained elsewhere":
            ref.train_lm(model, train_ids, **dict(names["Q7_SETTINGS"], steps=3))
    else:
        model = ref.Seq2Seq(names["S2S_VOCAB"], **names["Q8_MODEL"])
        if kind == "trained elsewhere":
            import numpy as np
            src, tgt = names["digit_pairs"](np.random.default_rng(5), 96)
            ref.train_seq2seq(model, src, tgt, **dict(names["Q8_SETTINGS"], steps=3))
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def rnn_attack(names, which: str, kind: str, honest_first: bool):
    """A submission whose training function loads pasted weights (after honest short runs, if `honest_first`)."""
    submission = staff_module("rnn_lm")
    pasted = rnn_pasted(names, which, kind)
    name = "train_lm" if which == "q7" else "train_seq2seq"
    honest = getattr(submission, name)

    def train(model, *data, **settings):
        if honest_first and settings["steps"] <= 2:
            return honest(model, *data, **settings)
        model.load_state_dict({k: v.to(next(model.parameters()).dtype) for k, v in pasted.items()})
        return [1.0] * settings["steps"]

    setattr(submission, name, train)
    return submission


@pytest.mark.parametrize("which,check", [("q7", "shakespeare_lstm"), ("q8", "seq2seq_reversal")])
@pytest.mark.parametrize("kind", ["trained elsewhere", "a fresh model"])
@pytest.mark.parametrize("honest_first", [False, True], ids=["always pasted", "honest short runs"])
def test_rnn_lm_pasted_weights_earn_nothing(short_rnn, which, check, kind, honest_first):
    submission = rnn_attack(short_rnn, which, kind, honest_first)
    published = []
    error, _ = run_check_recording("rnn_lm", submission, check, rnn_results(short_rnn), published)  # any threshold passes
    assert fails_for_provenance(error), error
    assert published == []  # refused before the figure is measured: no leaderboard entry
    if honest_first:  # the exact steps pass: the statistic decides
        assert "do not descend" in str(error)


def rnn_reference_figure(names) -> float:
    """The reference's test perplexity from the check's own secret start with the shortened settings."""
    ref = RNN_LM.reference()
    vocab, train_ids, test_ids = names["char_data"]()
    init = context(RNN_LM, "shakespeare_lstm").secret_state("initial weights",
                                                            lambda: names["q7_model"](ref, len(vocab)))
    model = names["q7_model"](ref, len(vocab))
    model.load_state_dict(init)
    ref.train_lm(model, train_ids, **names["Q7_SETTINGS"])
    return names["test_perplexity"](model.state_dict(), test_ids)


RNN_CORRECT = [  # LSTM gates by slicing and addmm; attention scores by einsum (bench/rnn_lm_thresholds.py)
    ("        gates = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh  # (B, 4H)\n"
     "        i, f, g, o = gates.chunk(4, dim=-1)",
     "        H = self.hidden_size\n"
     "        gates = torch.addmm(self.bias_ih, x, self.weight_ih.t()) + torch.addmm(self.bias_hh, h, self.weight_hh.t())\n"
     "        i, f, g, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]"),
    ("        scores = self.score(torch.tanh(self.query_proj(query)[:, None, :] + self.key_proj(keys))).squeeze(-1)  # (B, S)",
     "        hidden = torch.tanh(self.query_proj(query).unsqueeze(1) + self.key_proj(keys))\n"
     "        scores = torch.einsum(\"bsa,a->bs\", hidden, self.score.weight[0])"),
]


def test_rnn_lm_correct_variant_trained_from_the_start_passes(short_rnn):
    from autograder.authoring import build
    submission = build.module_from_text("lmgrade_test_rnn_variant", edited_solution("rnn_lm", RNN_CORRECT))
    figure = rnn_reference_figure(short_rnn)
    for check in ("shakespeare_lstm", "seq2seq_reversal"):
        error, _ = run_check_recording("rnn_lm", submission, check, rnn_results(short_rnn, figure))
        assert error is None, (check, error)


# ---- transformer Q6 and Q8 ----------------------------------------------------------------------
SHORT_LM = dict(steps=SHORT, warmup_steps=5)


@pytest.fixture
def short_transformer(monkeypatch):
    names = hidden(TRANSFORMER)
    for key in ("SHAKESPEARE_SETTINGS", "SYNTHETIC_SETTINGS", "SORT_SETTINGS"):
        monkeypatch.setitem(names, key, dict(names[key], **SHORT_LM))
    return names


def transformer_results(names, figures: dict) -> dict:
    """Cached reference results for the shortened runs: the given figures, the reference's own start profiles."""
    ref = TRANSFORMER.reference()
    return {**figures, **{f"{task}-start": names["threshold_run"](ref, task)["start"]
                          for task in ("shakespeare", "synthetic", "sort")}}


def transformer_pasted(names, check: str, kind: str) -> dict:
    ref = TRANSFORMER.reference()
    torch.manual_seed(54321)
    if check == "seq2seq_sorting":
        if kind == "a fresh model":
            return ref.Seq2Seq(**names["SORT_CONFIG"]).state_dict()
        src, tgt = names["sort_pairs"](500, 3)
        return ref.train_seq2seq(src, tgt, names["SORT_CONFIG"], dict(names["SORT_SETTINGS"], steps=3, seed=9))
    if check == "shakespeare_perplexity":
        data, config, settings = names["shakespeare_ids"]()[0], names["shakespeare_config"](), names["SHAKESPEARE_SETTINGS"]
    else:
        language, data = names["synthetic_language"]()
        config, settings = names["synthetic_config"](language), names["SYNTHETIC_SETTINGS"]
    if kind == "a fresh model":
        return ref.TransformerLM(**config).state_dict()
    return ref.train_lm(data, config, dict(settings, steps=3, seed=9))[0]


def transformer_attack(names, check: str, kind: str, honest_first: bool):
    submission = staff_module("transformer")
    pasted = transformer_pasted(names, check, kind)
    if check == "seq2seq_sorting":
        honest = submission.train_seq2seq

        def train_seq2seq(src, tgt, config, settings, init_state=None):
            if honest_first and settings["steps"] <= 2:
                return honest(src, tgt, config, settings, init_state)
            return {k: v.clone() for k, v in pasted.items()}

        submission.train_seq2seq = train_seq2seq
    else:
        honest = submission.train_lm

        def train_lm(train_ids, config, settings, init_state=None):
            if honest_first and settings["steps"] <= 2:
                return honest(train_ids, config, settings, init_state)
            return {k: v.clone() for k, v in pasted.items()}, [1.0] * settings["steps"]

        submission.train_lm = train_lm
    return submission


FAKE_FIGURES = {"shakespeare": 1e6, "synthetic": 1e6, "sort": 0.0}  # thresholds nothing fails


@pytest.mark.parametrize("check", ["shakespeare_perplexity", "synthetic_perplexity", "seq2seq_sorting"])
@pytest.mark.parametrize("kind", ["trained elsewhere", "a fresh model"])
@pytest.mark.parametrize("honest_first", [False, True], ids=["always pasted", "honest short runs"])
def test_transformer_pasted_weights_earn_nothing(short_transformer, check, kind, honest_first):
    submission = transformer_attack(short_transformer, check, kind, honest_first)
    published = []
    error, _ = run_check_recording("transformer", submission, check, transformer_results(short_transformer, FAKE_FIGURES),
                                   published)
    assert fails_for_provenance(error), error
    assert published == []  # refused before the figure is measured: no leaderboard entry
    if honest_first:
        assert "do not descend" in str(error)


def test_transformer_init_state_ignored_earns_nothing(short_transformer):
    """A train_lm that builds its own model from the seed (the starter's loop without the init_state line)."""
    text = edited_solution("transformer", [("    if init_state is not None:\n        model.load_state_dict(init_state)\n",
                                            "")])
    from autograder.authoring import build
    submission = build.module_from_text("lmgrade_test_transformer_no_init", text)
    error, _ = run_check_recording("transformer", submission, "shakespeare_perplexity",
                                   transformer_results(short_transformer, FAKE_FIGURES))
    assert isinstance(error, CheckFailed) and "after 2 steps from the init_state" in str(error), error


def test_train_seq2seq_without_init_state_is_told_so(short_transformer):
    submission = staff_module("transformer")
    honest = submission.train_seq2seq
    submission.train_seq2seq = lambda src, tgt, config, settings: honest(src, tgt, config, settings)
    error, _ = run_check_recording("transformer", submission, "seq2seq_sorting",
                                   transformer_results(short_transformer, FAKE_FIGURES))
    assert isinstance(error, CheckFailed) and "takes no `init_state`" in str(error), error


TRANSFORMER_CORRECT = [  # torch-style AdamW and a log-softmax loss (bench/transformer_thresholds.py)
    ("    m_hat = m / (1 - beta1 ** step)\n    v_hat = v / (1 - beta2 ** step)\n"
     "    param = param - lr * weight_decay * param - lr * m_hat / (v_hat.sqrt() + eps)\n",
     "    denom = v.sqrt() / math.sqrt(1 - beta2 ** step) + eps\n"
     "    param = param * (1 - lr * weight_decay) - (lr / (1 - beta1 ** step)) * m / denom\n"),
    ("        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n        optimizer.zero_grad()\n"
     "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
     "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses",
     "        logp = torch.log_softmax(logits, dim=-1)\n"
     "        loss = -logp.gather(-1, y[..., None]).mean()\n        optimizer.zero_grad()\n"
     "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
     "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses"),
]


def transformer_reference_figures(names) -> dict:
    """The reference's figures from the checks' own secret starts and seeds with the shortened settings."""
    import math
    ref = TRANSFORMER.reference()
    out = {}
    t = context(TRANSFORMER, "shakespeare_perplexity")
    config = names["shakespeare_config"]()
    train, test = names["shakespeare_ids"]()
    init = t.secret_state("initial weights", lambda: ref.TransformerLM(**config))
    state, _ = ref.train_lm(train, config, names["secret_settings"](t, names["SHAKESPEARE_SETTINGS"]), init)
    out["shakespeare"] = math.exp(names["stream_nll"](ref, state, config, test, 64, names["EVAL_STRIDE"]))
    t = context(TRANSFORMER, "seq2seq_sorting")
    src, tgt = names["sort_pairs"](names["SORT_TRAIN"], 0)
    init = t.secret_state("initial weights", lambda: ref.Seq2Seq(**names["SORT_CONFIG"]))
    state = ref.train_seq2seq(src, tgt, names["SORT_CONFIG"], names["secret_settings"](t, names["SORT_SETTINGS"]), init)
    out["sort"] = names["sort_accuracy"](ref, state, t.secret_seed("held-out strings"))
    return out


def test_transformer_correct_variant_trained_from_the_start_passes(short_transformer):
    from autograder.authoring import build
    submission = build.module_from_text("lmgrade_test_transformer_variant",
                                        edited_solution("transformer", TRANSFORMER_CORRECT))
    figures = transformer_results(short_transformer, transformer_reference_figures(short_transformer))
    for check in ("shakespeare_perplexity", "seq2seq_sorting"):
        error, _ = run_check_recording("transformer", submission, check, figures)
        assert error is None, (check, error)


# ---- backprop Q6 --------------------------------------------------------------------------------
BACKPROP = assignments.get("backprop")
BACKPROP_CORRECT = [  # batches as epochs of shuffled positions; the start copied another way (bench/backprop_thresholds.py)
    ("    rng = np.random.default_rng(seed + 1)\n",
     "    rng = np.random.default_rng(seed + 1)\n    order, at = rng.permutation(len(targets)), 0\n"),
    ("        batch = rng.integers(0, len(targets), size=batch_size)\n",
     "        if at + batch_size > len(order):\n            order, at = rng.permutation(len(targets)), 0\n"
     "        batch, at = order[at:at + batch_size], at + batch_size\n"),
    ("    params = {name: np.array(value, dtype=np.float64) for name, value in start.items()}",
     "    params = {}\n    for name in start:\n        params[name] = start[name].copy()"),
]


@pytest.fixture
def short_backprop(monkeypatch):
    """backprop's Q6 run shortened to SHORT steps (the Shakespeare ids cached first), with perplexity bounds
    that any model meets: 30 SGD steps are noisy (the margins are measured over full runs by the bench),
    and what is tested here is the start's checks, which come last."""
    names = check_fn(BACKPROP, "shakespeare_ffnn").__globals__
    names["shakespeare_ids"]()
    monkeypatch.setitem(names, "TRAIN_SETTINGS", dict(names["TRAIN_SETTINGS"], steps=SHORT))
    monkeypatch.setitem(names, "PPL_MARGIN", 1e9)
    monkeypatch.setitem(names, "FLOOR_RATIO", 0.0)
    return names


def backprop_results(names) -> dict:
    """Cached reference results for the shortened run: the start profile of the reference's own short run."""
    run = names["train_and_score"](BACKPROP.reference())
    return {"ffnn-shakespeare": run["perplexity"], "ffnn-start": run["start"]}


def gauge(params: dict, u_shift, e_shift, context: int) -> dict:
    """`params` plus terms that change nothing the model computes: the same vector added to every row of
    U (every logit moves by the same amount) and to every row of E, with b moved to cancel it."""
    import numpy as np
    out = {k: np.array(v, dtype=np.float64) for k, v in params.items()}
    out["U"] = out["U"] + u_shift[None, :]
    out["E"] = out["E"] + e_shift[None, :]
    out["b"] = out["b"] - out["W"] @ np.tile(e_shift, context)
    return out


def backprop_attack(names, kind: str):
    """A train_ffnn that returns parameters trained at home (honest on the small exact-step streams):
    - "trained elsewhere": as they are; "a fresh start": an untrained start of its own;
    - "a pasted start": init_params returns the home weights, train_ffnn starts from init_params(seed);
    - "gauge terms from init_params" (issue 30): init_params returns the home weights with large
      seed-dependent gauge terms, which made starts look fresh and runs look descended from them when
      the start was the student's own; train_ffnn returns init_params(seed);
    - "gauge terms around the given start": the home weights with the largest gauge terms that follow
      the grader's start (U's and E's column means of it, 1000 times over).
    """
    import numpy as np
    submission, ref = staff_module("backprop"), BACKPROP.reference()
    s, V = names["TRAIN_SETTINGS"], names["VOCAB_SIZE"]
    train = names["shakespeare_ids"]()[0]
    home = dict(s, seed=12345)
    own_start = ref.init_params(V, s["dim"], s["hidden"], s["context"], home["seed"])
    pasted = own_start if kind == "a fresh start" else ref.train_ffnn(train, V, **home)[0]
    honest_train, honest_init = submission.train_ffnn, submission.init_params

    def init_params(vocab_size, dim, hidden, context=2, seed=0):
        if vocab_size != V:
            return honest_init(vocab_size, dim, hidden, context, seed)
        if kind == "a pasted start":
            return {k: v.copy() for k, v in pasted.items()}
        rng = np.random.default_rng(seed)
        return gauge(pasted, 50 * rng.standard_normal(hidden), 50 * rng.standard_normal(dim), context)

    def train_ffnn(ids, vocab_size, **settings):
        if len(ids) < 10_000:
            return honest_train(ids, vocab_size, **settings)
        steps, start = settings["steps"], settings.get("start")
        if kind in ("a pasted start", "gauge terms from init_params"):
            return init_params(vocab_size, settings["dim"], settings["hidden"], settings["context"],
                               settings["seed"]), [1.0] * steps
        if kind == "gauge terms around the given start":
            return gauge(pasted, 1000 * start["U"].mean(axis=0), 1000 * start["E"].mean(axis=0),
                         settings["context"]), [1.0] * steps
        return {k: v.copy() for k, v in pasted.items()}, [1.0] * steps

    submission.train_ffnn, submission.init_params = train_ffnn, init_params
    return submission


def test_backprop_gauge_terms_change_nothing_the_model_computes():
    """The attack's terms are function-irrelevant: the grader's own forward pass gives the same logits."""
    import numpy as np
    ref = BACKPROP.reference()
    params = ref.init_params(40, 4, 6, 2, 0)
    rng = np.random.default_rng(1)
    moved = gauge(params, 50 * rng.standard_normal(6), 50 * rng.standard_normal(4), 2)
    contexts = rng.integers(0, 40, size=(30, 2))
    np.testing.assert_allclose(ref.log_softmax(ref.ffnn_forward(moved, contexts)),
                               ref.log_softmax(ref.ffnn_forward(params, contexts)), atol=1e-8)
    assert np.abs(moved["U"] - params["U"]).max() > 10


def test_backprop_trace_counts_only_where_the_model_computes_with_it():
    """Unused hidden units and embedding dimensions filled with the grader's start change nothing the
    model computes; unweighted they carry most of the trace, weighted by relevance (ffnn_relevance) none.
    A model that moved from the start keeps about the same trace either way."""
    import numpy as np
    names = check_fn(BACKPROP, "shakespeare_ffnn").__globals__
    ref, rng = BACKPROP.reference(), np.random.default_rng(0)
    V, d, H, k = 300, 8, 16, 2
    start = ref.init_params(V, d, H, k, 1)
    home = ref.init_params(V, d, H, k, 2)  # weights of its own; slots: units 0-5 have h = 0, 6-8 no U column,
    dead, no_u, unread, zero = np.arange(6), np.arange(6, 9), np.arange(3), np.arange(3, 4)  # dims 0-2 unread, 3 zero
    cols = lambda dims: np.concatenate([dims + j * d for j in range(k)])  # noqa: E731
    home["W"][dead], home["U"][:, no_u], home["W"][:, cols(unread)], home["E"][:, zero] = 0, 0, 0, 0
    planted = {n: v.copy() for n, v in home.items()}
    planted["U"][:, dead] = 30 * start["U"][:, dead]
    planted["W"][no_u] = 30 * start["W"][no_u]
    planted["W"][np.ix_(np.arange(6, H), cols(zero))] = 30 * start["W"][np.ix_(np.arange(6, H), cols(zero))]
    planted["E"][:, unread] = 30 * start["E"][:, unread]
    contexts = rng.integers(0, V, size=(500, k))
    np.testing.assert_allclose(ref.ffnn_forward(planted, contexts), ref.ffnn_forward(home, contexts), atol=1e-9)
    plain = start_correlations(start, planted, min_entries=0)
    weighted = start_correlations(start, planted, min_entries=0, weights=names["ffnn_relevance"](planted, contexts))
    assert min(plain[n] for n in ("E", "W", "U")) > 0.5, plain
    assert max(abs(weighted[n]) for n in ("E", "W", "U")) < 0.1, weighted
    moved = {n: v + 0.05 * rng.standard_normal(v.shape) for n, v in start.items()}
    honest = start_correlations(start, moved, min_entries=0, weights=names["ffnn_relevance"](moved, contexts))
    assert min(honest[n] / start_correlations(start, moved, min_entries=0)[n] for n in ("E", "W", "U")) > 0.9


ATTACKS = ["trained elsewhere", "a fresh start", "a pasted start", "gauge terms from init_params",
           "gauge terms around the given start"]


@pytest.mark.parametrize("kind", ATTACKS)
def test_backprop_pasted_weights_earn_nothing(short_backprop, kind):
    submission = backprop_attack(short_backprop, kind)
    error, _ = run_check_recording("backprop", submission, "shakespeare_ffnn", backprop_results(short_backprop))
    assert isinstance(error, CheckFailed), error
    assert "do not descend" in str(error), error


def test_backprop_start_is_the_graders_and_crosses_as_arrays(short_backprop):
    """train_ffnn gets `start`: the reference's init_params from the grader's secret, not the student's."""
    seen = {}
    submission = staff_module("backprop")
    honest = submission.train_ffnn

    def train_ffnn(ids, vocab_size, **settings):
        seen.update(settings)
        return honest(ids, vocab_size, **settings)

    asked = []
    honest_init = submission.init_params
    submission.train_ffnn = train_ffnn
    submission.init_params = lambda *args: asked.append(args) or honest_init(*args)
    error, _ = run_check_recording("backprop", submission, "shakespeare_ffnn", backprop_results(short_backprop))
    assert error is None, error
    assert asked == []  # the student's init_params is never asked for the start
    s, V = short_backprop["TRAIN_SETTINGS"], short_backprop["VOCAB_SIZE"]
    t = context(BACKPROP, "shakespeare_ffnn")
    expected = BACKPROP.reference().init_params(V, s["dim"], s["hidden"], s["context"],
                                                t.secret_seed("initial weights", bits=31))
    assert set(seen["start"]) == set(expected)
    assert all((seen["start"][k] == expected[k]).all() for k in expected)


def test_backprop_correct_variant_trained_from_the_start_passes(short_backprop):
    """The variant copies the start and draws its batches (shuffled epochs) its own way."""
    from autograder.authoring import build
    submission = build.module_from_text("lmgrade_test_backprop_variant", edited_solution("backprop", BACKPROP_CORRECT))
    error, _ = run_check_recording("backprop", submission, "shakespeare_ffnn", backprop_results(short_backprop))
    assert error is None, error


# ---- caches that must change the answer ---------------------------------------------------------
KV = {"cache_step", "cache_growth", "generate_greedy", "generate_sampling"}


def test_staff_solution_passes_every_cache_check_in_process():
    assert failing_in_process("transformer", edited_solution("transformer", []), KV) == set()


@pytest.mark.parametrize("edit", [
    ("            logits, cache = model(new, cache)", "            logits = model(idx)"),
    ("            logits, cache = model(new, cache)", "            logits, cache = model(idx, [])"),
], ids=["use_cache ignored", "an empty cache at every step"])
def test_generate_that_ignores_its_cache_fails(edit):
    """Before: generate's checks compared tokens only, and a recomputing generate gives the same tokens."""
    assert failing_in_process("transformer", edited_solution("transformer", [edit]), KV) == {"generate_greedy"}


def test_generate_that_uses_a_cache_without_use_cache_fails():
    edits = [("    cache = [] if use_cache else None\n", "    cache = []\n"),
             ("            logits = model(idx)\n", "            logits, cache = model(new, cache)\n")]
    assert failing_in_process("transformer", edited_solution("transformer", edits), KV) == {"generate_greedy"}


STASH = '''
_forward_with_cache = TransformerLM.forward


def _stashing_forward(self, idx, cache=None):
    """Reads only the cache's length: recomputes everything from the tokens it was fed since its last [] call."""
    if cache is None:
        return _forward_with_cache(self, idx)
    seen = getattr(self, "_seen", None)
    if not cache or seen is None or seen.shape[1] != cache[0][0].shape[2]:
        logits, new_cache = _forward_with_cache(self, idx, cache)  # a cache it did not make: used honestly
        self._seen = idx if not cache else None
        return logits, new_cache
    self._seen = torch.cat([seen, idx], 1)
    _, new_cache = _forward_with_cache(self, idx, cache)
    return _forward_with_cache(self, self._seen)[:, -idx.shape[1]:], new_cache


TransformerLM.forward = _stashing_forward
'''


def test_forward_that_recomputes_from_tokens_it_kept_fails_the_cache_step():
    """A cache from another prefix than the model was fed: only reading the cache's keys and values passes."""
    text = edited_solution("transformer", []) + STASH
    assert "cache_step" in failing_in_process("transformer", text, KV)


@pytest.mark.parametrize("edit", [
    ("            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, T_past + T, d_head)\n",
     "            k, v = (torch.cat([torch.zeros_like(cache[0]), k], dim=2),\n"
     "                    torch.cat([torch.zeros_like(cache[1]), v], dim=2))\n"),
], ids=["cached keys and values replaced by zeros"])
def test_attention_that_ignores_the_cached_values_fails(edit):
    assert "cache_step" in failing_in_process("transformer", edited_solution("transformer", [edit]), KV)
