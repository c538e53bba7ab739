"""The property matrix: each graded function declares its sample inputs once, and generic property
checks run on every function a property applies to (as PyTorch's OpInfo tests do for operators).

Why: a property checked by hand for one function is missed for its neighbours (edge sizes for greedy
decoding but not for beam search, extreme values in the forward pass but not in the gradients). Here
a check states *what* a function takes (`Sample`s, grouped by property) and the properties run the
same way for all of them:

- `extremes`: forward at saturating inputs (pre-activations of hundreds, logits of +-1000, long
  sequences, large norms) against the reference, and, for samples that name `wrt`, call a module or
  pass one in (a loss of a model), the gradients there: a NaN or inf where the reference's gradient is
  finite fails, and float64 gradients must equal the reference's (a tanh written as
  1 - 2/(exp(2z) + 1) is right forward and NaN backward);
- `edges`: sizes 0 and 1 the docstring allows (max_len=0, n=0, length-1 sequences, batch of one);
- `shapes`: every rank and batch size the docstring allows (2-D and 3-D logits, say);
- `inputs`: every call above goes through `call_pure`, so a changed argument fails (this property);
- `generator`: torch's global random generator is where the grader put it after a call;
- `device`: each `OnDevice` call runs on a simulated non-CPU device, in each of its float dtypes, with the
  values of the same run on the CPU (`assert_device_agnostic`: fail-only, as everything the worker reports
  about devices); a pass leaves its note ("ran on a non-CPU device ...") on the check;
- `causal`: each `Causal` call, its sequence argument changed after position p (token ids redrawn, float
  inputs moved by noise), leaves the outputs at positions 0..p as they were (`assert_causal`), for every
  position p: a decoder, a language model or a block that sees the future fails;
- `positions`: the positions of a stream a training function visits (`Reads`): every step reads what
  the reference's step reads (a loop that walks the stream), or random crops spread over the whole
  stream (a loop that samples it). Measured on the weights the run returns: on a stream whose token
  ids are their positions, row i of the input embedding moves only when position i is fed to the
  model, so the rows that moved are the positions read (issue 31: consecutive slices from the start
  of a stream saw only its first 28%).

Outputs are compared with the reference's on the same inputs (cast to float64: the truth), with the
tolerance of the sample's own dtype. Every failure starts with "property `name`" and names the
function and the input by shapes and sizes, never by values.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

from autograder.checking.compare import assert_close, assert_equal
from autograder.checking.purity import assert_global_generators_untouched, call_pure
from autograder.checking.remote import StudentError
from autograder.checking.torch_checks import (CAUSAL_ADVICE, MODULE_TOLERANCES, assert_causal, assert_device_agnostic,
                                              output)
from autograder.errors import CheckFailed

# the order they run in: plain inputs first
PROPERTIES = ("shapes", "edges", "extremes", "inputs", "generator", "device", "causal", "positions")
GRAD_TOL = (1e-7, 1e-9)
HINTS = {"extremes": " At inputs this large, exp by hand overflows (inf / inf is NaN, log(0) is -inf) and a "
                     "probability rounds to 0: use torch.softmax, log_softmax, tanh and sigmoid, and compare logits.",
         "edges": " The docstring allows this size: an empty result (no token, zero columns) or a single step.",
         "shapes": " The docstring allows these shapes: work on the last dimension (dim=-1, ...), not a fixed one."}  # float64 gradients against the reference's, as gradcheck's reference comparison


@dataclass(frozen=True)
class Both:
    """An argument that differs between the sides: the student's object (a Remote) and the reference's."""
    student: object
    reference: object


@dataclass(frozen=True)
class Sample:
    """One input of a graded function, described for a student by `label` (shapes, sizes, scale, dtype)."""
    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    wrt: tuple = ()  # positions of float tensor arguments whose gradients are compared (extremes)
    output_index: int | None = None  # which output the gradient flows back from (tuple outputs)
    call: object = None  # the student's callable for this sample, when not the function's (a float32 module)
    reference: object = None  # the trusted callable for this sample, when not the function's
    tol: tuple | None = None  # (rtol, atol) of the comparison; default: by the inputs' float dtype
    dtype: torch.dtype | None = None  # of the float outputs (and of a model passed in, for its gradients);
    # default: the float inputs' (None: unchecked)
    hint: str = ""  # what to look at when this sample fails (default: the property's HINTS)


@dataclass(frozen=True)
class OnDevice:
    """One call of a graded function for the `device` property, with `assert_device_agnostic`'s options:
    `device_arg` (a keyword set to the device), `follows_dtype=False` where float outputs do not come from float
    inputs, `dtypes` the floats it runs in, `seed` for torch's global generator, `move_data=False` for a
    training loop, which must move the data (kept on the CPU) to its model's device itself."""
    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    call: object = None  # the student's callable for this call, when not the function's (a module, a support op)
    device_arg: str | None = None
    follows_dtype: bool = True
    dtypes: tuple = ("float32", "float64")
    seed: int = 0
    move_data: bool = True


@dataclass(frozen=True)
class Causal:
    """One call of a graded function for the `causal` property: `args[arg]` is a sequence (B, T, ...), token ids
    among `vocab` or floats; `output_index` picks the output of a tuple, `positions` the p tried (default all)."""
    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    arg: int = 0
    vocab: int | None = None
    output_index: int | None = None
    positions: tuple | None = None
    call: object = None  # the student's callable for this call, when not the function's (a module)
    tol: tuple = (1e-9, 1e-9)  # float64 outputs: a change at the positions kept is a real one
    advice: str = CAUSAL_ADVICE


@dataclass
class Graded:
    """A graded function: the student's callable, the reference's, and its samples by property."""
    name: str
    call: object
    reference: object
    samples: dict = field(default_factory=dict)  # property name -> [Sample] ([Reads] for positions, [OnDevice] for
    # device, [Causal] for causal)
    generator: Sample | None = None  # the call that must leave torch's global generator alone (default: the first)

    def generator_sample(self) -> Sample | None:
        return self.generator or next((s for prop in PROPERTIES for s in self.samples.get(prop, ())
                                       if isinstance(s, Sample)), None)


@dataclass(frozen=True)
class Reads:
    """A training run on a stream whose token ids are their positions (id i at position i), for `positions`.

    `table(steps)` runs the student's training function afresh for `steps` steps and returns the input
    embedding (n, d) it leaves (None when it cannot be read: other checks say why); `start` is that table
    before training. With `reference` (the same for the reference's run), a deterministic loop: the steps
    between two `checkpoints` (step counts; default every step up to `steps`) must read the positions the
    reference's steps read there. Otherwise random crops of one position each (block_size 1), `draws` of
    them (steps x batch_size) uniform over positions 0 .. `starts` - 1: the positions read must spread over
    the whole stream as uniform draws do (SPREAD_SHARE)."""
    label: str
    start: torch.Tensor  # (n, d)
    table: object
    steps: int
    reference: object = None
    starts: int = 0
    draws: int = 0
    hint: str = ""  # how the function should walk or sample the stream, in the assignment's words
    checkpoints: tuple = ()  # increasing step counts, the last `steps` (default: 1, 2, .., steps)


def state_table(state, name: str, like: torch.Tensor, rows=slice(None)):
    """`state[name][rows]` from the state dict a training returned, for a `Reads` table: None when it is not a
    tensor of `like`'s shape (other checks say why)."""
    table = state.get(name) if isinstance(state, dict) else None
    return table[rows] if isinstance(table, torch.Tensor) and table.shape == like.shape else None


# A loop that samples: the stream in SPREAD_PARTS equal parts, each must hold at least SPREAD_SHARE of the
# distinct positions uniform draws visit there on average (m_j (1 - (1 - 1/m) ** draws) for the m_j of the
# m possible starts in it), and the run as a whole too. At 400 draws over 400 starts (about 63 expected a
# part), over 10,000 seeds, uniform draws keep 0.68-1.05 of it in their emptiest part (mean 0.92, sd 0.045:
# 0.5 is 9 sd below) and 0.91 or more in all, torch.randint and a torch.randperm per step alike; starts
# from the first half keep 0 in the last two parts, one fixed crop of 10 keeps at most 0.04 (numbers in
# docs/assignments/transformer.md).
SPREAD_PARTS, SPREAD_SHARE = 4, 0.5


def side(value, which: str):
    """`value` with every `Both` replaced by its `which` ("student" or "reference") side."""
    if isinstance(value, Both):
        return getattr(value, which)
    if isinstance(value, tuple):
        return tuple(side(v, which) for v in value)
    if isinstance(value, list):
        return [side(v, which) for v in value]
    if isinstance(value, dict):
        return {k: side(v, which) for k, v in value.items()}
    return value


def as_float64(value):
    """Float tensors in float64 (the reference's truth); everything else as it is."""
    if isinstance(value, torch.Tensor):
        return value.detach().double() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(as_float64(v) for v in value)
    return value


def float_dtype(value) -> torch.dtype | None:
    """The float dtype of the first float tensor in `value` (None when there is none)."""
    if isinstance(value, torch.Tensor):
        return value.dtype if value.is_floating_point() else None
    for v in value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ():
        found = float_dtype(v)
        if found is not None:
            return found
    return None


def run(t, graded: Graded, properties=PROPERTIES) -> None:
    """Every property of `properties` that `graded` declares samples for, in the order of PROPERTIES.

    `t` is the check's context. The generator property applies to every function (each takes tensors or a
    model): a deterministic one must not touch the global generators either (`torch.manual_seed(0)` inside)."""
    for prop in properties:
        if prop == "positions":
            for reads in graded.samples.get(prop, ()):
                check_positions(graded, reads)
            continue
        if prop == "generator":
            if graded.generator_sample() is not None:
                check_generator(t.student, graded)
            continue
        if prop == "device":
            for probe in graded.samples.get(prop, ()):
                check_device(t, graded, probe)
            continue
        if prop == "causal":
            for probe in graded.samples.get(prop, ()):
                check_causal(graded, probe)
            continue
        for sample in graded.samples.get(prop, ()):
            check_sample(graded, prop, sample)


def failure(prop: str, graded: Graded, sample: Sample, text: str) -> CheckFailed:
    return CheckFailed(f"property `{prop}` of {graded.name}, input {sample.label}: {text}")


def call_student(graded: Graded, prop: str, sample: Sample):
    """The student's output on `sample` through `call_pure`: errors and changed arguments name the property."""
    call = sample.call or graded.call
    try:
        return call_pure(call, *side(sample.args, "student"), what=f"{graded.name}({sample.label})",
                         **side(sample.kwargs, "student"))
    except StudentError as exc:
        raise failure(prop, graded, sample, f"your code raised an error ({_first_line(str(exc))}); the docstring "
                                            "allows this input.") from None
    except CheckFailed as exc:  # call_pure: an argument changed
        raise CheckFailed(f"property `inputs` (arguments left unchanged): {exc}") from None


def expected_of(graded: Graded, sample: Sample):
    reference = sample.reference or graded.reference
    with torch.no_grad():
        return reference(*as_float64(side(sample.args, "reference")), **as_float64(side(sample.kwargs, "reference")))


def tolerance(sample: Sample) -> tuple:
    if sample.tol is not None:
        return sample.tol
    return MODULE_TOLERANCES.get(float_dtype((sample.args, sample.kwargs)) or torch.float64)


def compare(got, expected, what: str, tol: tuple) -> None:
    """Plain data exactly, floats and float tensors within `tol`, the same structure on both sides."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise CheckFailed(f"{what}: expected a tensor, got {type(got).__name__}")
        if tuple(got.shape) != tuple(expected.shape):
            raise CheckFailed(f"{what}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}")
        if not expected.is_floating_point():  # ids and masks: the reference's dtype (int64 ids, as documented)
            if got.dtype != expected.dtype:
                raise CheckFailed(f"{what}: expected dtype {str(expected.dtype).removeprefix('torch.')}, "
                                  f"got {str(got.dtype).removeprefix('torch.')}")
            assert_equal(got.tolist(), expected.tolist(), what)
            return
        assert_close(got, expected, what, rtol=tol[0], atol=tol[1])
    elif isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            raise CheckFailed(f"{what}: expected a {type(expected).__name__} of {len(expected)} items, got "
                              + (f"{len(got)}" if isinstance(got, (tuple, list)) else type(got).__name__))
        for i, (g, e) in enumerate(zip(got, expected)):
            compare(g, e, f"{what}[{i}]", tol)
    elif isinstance(expected, float):
        if isinstance(got, bool) or not isinstance(got, (int, float, torch.Tensor)):
            raise CheckFailed(f"{what}: expected a number, got {type(got).__name__}")
        assert_close(float(got), expected, what, rtol=max(tol[0], 1e-6), atol=tol[1])
    else:
        assert_equal(got, expected, what)


def check_sample(graded: Graded, prop: str, sample: Sample) -> None:
    """The student's output on `sample` equals the reference's; at extremes, its gradients too."""
    got = call_student(graded, prop, sample)
    expected = expected_of(graded, sample)
    try:
        compare(got, expected, "the output", tolerance(sample))
    except CheckFailed as exc:
        raise failure(prop, graded, sample, str(exc) + (sample.hint or HINTS.get(prop, ""))) from None
    want = sample.dtype or float_dtype((sample.args, sample.kwargs))
    for out in got if isinstance(got, (tuple, list)) else [got]:
        if want is not None and isinstance(out, torch.Tensor) and out.is_floating_point() and out.dtype != want:
            raise failure(prop, graded, sample, f"a {str(out.dtype).removeprefix('torch.')} output where "
                                                f"{str(want).removeprefix('torch.')} was expected: keep the inputs' "
                                                "dtype (no .float(), no dtype=torch.float32 inside).")
    if prop == "extremes" and (sample.wrt or isinstance(sample.reference or graded.reference, torch.nn.Module)
                               or any(isinstance(a, torch.nn.Module) for a in side(sample.args, "reference"))):
        check_gradients(graded, sample)


def _cotangent(what: str, like: torch.Tensor) -> torch.Tensor:
    rng = np.random.default_rng(zlib.crc32(what.encode()))
    return torch.from_numpy(rng.standard_normal(tuple(like.shape)))


def check_gradients(graded: Graded, sample: Sample) -> None:
    """At extreme inputs: no NaN or inf where the reference's gradient is finite; in float64, equal to it."""
    call, reference = sample.call or graded.call, sample.reference or graded.reference
    args = list(side(sample.args, "student"))
    ref_args = list(as_float64(side(sample.args, "reference")))
    for i in sample.wrt:
        ref_args[i] = ref_args[i].clone().requires_grad_(True)
    with torch.enable_grad():
        out = reference(*ref_args)
        out = out[sample.output_index] if sample.output_index is not None else out
        if not (isinstance(out, torch.Tensor) and out.requires_grad):  # decoding a model: no gradient to compare
            return
        cotangent = _cotangent(f"{graded.name}|{sample.label}", out)
        params = list(reference.named_parameters()) if isinstance(reference, torch.nn.Module) else []
        # and those of a model passed in (`lm_loss(model, tokens, pad_id)`), named as the worker names them
        params += [(f"arg{i}.{n}", p) for i, a in enumerate(ref_args) if isinstance(a, torch.nn.Module)
                   for n, p in a.named_parameters()]
        inputs = [ref_args[i] for i in sample.wrt] + [p for _, p in params]
        expected = torch.autograd.grad((out * cotangent).sum(), inputs, allow_unused=True)
    expected = [torch.zeros_like(x) if e is None else e for x, e in zip(inputs, expected)]
    try:
        got = call.vjp(args, list(sample.wrt), cotangent, output_index=sample.output_index or 0)
    except StudentError as exc:
        raise failure("extremes", graded, sample, f"the backward pass raised an error ({_first_line(str(exc))})") \
            from None
    if not isinstance(got, dict) or not isinstance(got.get("input_grads"), list):
        raise failure("extremes", graded, sample, "the backward pass returned no gradients")
    grads = got.get("param_grads") if isinstance(got.get("param_grads"), dict) else {}
    pairs = [(f"input {i}", g, e) for i, g, e in zip(sample.wrt, got["input_grads"], expected)]
    pairs += [(f"`{name}`", grads.get(name), e) for (name, _), e in zip(params, expected[len(sample.wrt):])]
    # the student's side decides (its float inputs, else the sample's declared dtype: a float32 model passed in
    # is not held to float64's tolerance); else the parameters of the reference's model, always float64
    modules = [a for a in ref_args if isinstance(a, torch.nn.Module)]
    float64 = (float_dtype(args) or sample.dtype
               or next((p.dtype for m in modules for p in m.parameters()), None)) == torch.float64
    for name, g, e in pairs:
        if not isinstance(g, torch.Tensor) or tuple(g.shape) != tuple(e.shape):
            raise failure("extremes", graded, sample, f"no gradient of the right shape w.r.t. {name}")
        g = g.detach().double()
        bad = ~torch.isfinite(g) & torch.isfinite(e)
        if bool(bad.any()):
            raise failure("extremes", graded, sample,
                          f"the gradient w.r.t. {name} has {int(bad.sum())} NaN or inf entries where the reference's is "
                          "finite, though the forward is right: a function written with exp by hand (tanh as "
                          "1 - 2/(exp(2z) + 1), sigmoid as 1/(1 + exp(-z)), softmax as exp/sum) overflows in the "
                          "backward pass at saturation, and a square root taken at 0 (sqrt(var) of a constant row, "
                          "then squared) has an infinite derivative. Use torch.tanh, torch.sigmoid, torch.softmax, "
                          "log_softmax; keep eps inside the square root.")
        if float64:
            try:
                assert_close(g, e, f"the gradient w.r.t. {name}", rtol=GRAD_TOL[0], atol=GRAD_TOL[1])
            except CheckFailed as exc:
                raise failure("extremes", graded, sample, str(exc)) from None


def check_generator(student, graded: Graded) -> None:
    """Fail-only: the worker's global generator is read back after the call (see assert_global_generators_untouched)."""
    sample = graded.generator_sample()
    call = sample.call or graded.call
    try:
        assert_global_generators_untouched(
            student, lambda: call(*side(sample.args, "student"), **side(sample.kwargs, "student")),
            f"{graded.name}({sample.label})", seed=20261127)
    except CheckFailed as exc:
        raise CheckFailed(f"property `generator` (torch's global generator left alone): {exc}") from None


def check_device(t, graded: Graded, probe: OnDevice) -> None:
    """Fail-only: the call runs on a simulated non-CPU device as on the CPU; a pass is a note, never points."""
    what = f"{graded.name}, input {probe.label}"
    try:
        note = assert_device_agnostic(probe.call or graded.call, list(probe.args), what, kwargs=probe.kwargs,
                                      device_arg=probe.device_arg, follows_dtype=probe.follows_dtype,
                                      dtypes=probe.dtypes, seed=probe.seed, move_data=probe.move_data)
    except CheckFailed as exc:  # its messages start with `what`
        raise CheckFailed(f"property `device` of {what}: {str(exc).removeprefix(what).lstrip(': ')}") from None
    if note and t is not None:
        t.note(f"property `device` of {note}")


def check_causal(graded: Graded, probe: Causal) -> None:
    """Outputs at positions 0..p never change when the sequence changes after p (see `Causal`)."""
    call, args = probe.call or graded.call, list(probe.args)

    def at(x):
        out = call(*args[:probe.arg], x, *args[probe.arg + 1:], **probe.kwargs)
        return output(out, probe.output_index, f"{graded.name}({probe.label})")

    what = f"property `causal` of {graded.name}, input {probe.label}"
    rng = np.random.default_rng(zlib.crc32(what.encode()))
    try:
        assert_causal(at, args[probe.arg], what, positions=probe.positions, rng=rng, tol=probe.tol, vocab=probe.vocab,
                      advice=probe.advice)
    except StudentError as exc:
        raise CheckFailed(f"{what}: your code raised an error ({_first_line(str(exc))})") from None


MOVED = 1e-9  # a row read moves by lr x its gradient (1e-4 or more here); one not read by exactly 0, or, where
# a replayed run on a GPU adds in another order, by float64 rounding (1e-15)


def rows_moved(before: torch.Tensor, after: torch.Tensor) -> np.ndarray:
    """(n,) bool: the rows of a table that moved by more than MOVED anywhere (a NaN counts as a move)."""
    change = (after.detach().cpu().double() - before.detach().cpu().double()).abs()
    return (~(change <= MOVED)).any(dim=1).numpy()


def spans(mask: np.ndarray) -> str:
    """The True positions of `mask` as ranges: "0-3, 14-17" ("none" when there is none)."""
    where = np.flatnonzero(mask)
    if where.size == 0:
        return "none"
    breaks = np.flatnonzero(np.diff(where) > 1)
    firsts, lasts = where[np.r_[0, breaks + 1]], where[np.r_[breaks, where.size - 1]]
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in zip(firsts.tolist(), lasts.tolist())]
    return ", ".join(text[:8]) + (f", ... ({len(text)} ranges)" if len(text) > 8 else "")


def coverage(mask: np.ndarray, steps: int) -> str:
    """What a run read, in a phrase: "only the first 28% of the stream in 200 steps" for a prefix."""
    n, seen = mask.size, int(mask.sum())
    last = int(np.flatnonzero(mask)[-1]) + 1 if seen else 0
    if seen and seen == last and last < n:
        return f"only the first {last / n:.0%} of the stream (positions 0-{last - 1} of {n}) in {steps} steps"
    return f"{seen} of {n} positions ({seen / n:.0%}: {spans(mask)}) in {steps} steps"


def check_positions(graded: Graded, reads: Reads) -> None:
    """The positions a training run reads, from the rows of its input embedding that moved.

    Fail-only where the weights cannot show them: a run that raises, returns no table, or at some step
    moves no row or every row (an update that skips or decays every weight) is left to the checks that
    compare its steps with the reference's."""
    def fail(text: str) -> CheckFailed:
        return CheckFailed(f"property `positions` of {graded.name}, input {reads.label}: positions visited: "
                           f"{text}{reads.hint}")

    def table(steps: int):
        try:
            return reads.table(steps)
        except StudentError:
            return None

    if reads.reference is None:
        after = table(reads.steps)
        seen = None if after is None else rows_moved(reads.start, after)
        if seen is not None and seen.any() and not seen.all():
            check_spread(seen, reads, fail)
        return
    before, ref_before, done = reads.start, reads.start, 0
    for step in reads.checkpoints or range(1, reads.steps + 1):
        after, ref_after = table(step), reads.reference(step)
        if after is None:
            return
        got, expected = rows_moved(before, after), rows_moved(ref_before, ref_after)
        if not got.any() or got.all():
            return
        if not np.array_equal(got, expected):
            which = f"step {step}" if step == done + 1 else f"steps {done + 1}-{step}"
            raise fail(f"{which} read positions {spans(got)} (the rows of the input embedding that moved), where "
                       f"{'it' if step == done + 1 else 'they'} should read {spans(expected)}; in all, the run "
                       f"read {coverage(rows_moved(reads.start, after), step)}.")
        before, ref_before, done = after, ref_after, step


def check_spread(seen: np.ndarray, reads: Reads, fail) -> None:
    """Random crops: every part of the stream, and the stream as a whole, holds at least SPREAD_SHARE
    of the distinct positions that `draws` uniform starts visit there on average."""
    n, m = seen.size, reads.starts
    hit = 1 - (1 - 1 / m) ** reads.draws  # the chance that a given possible start is drawn at least once
    bounds = np.linspace(0, n, SPREAD_PARTS + 1).round().astype(int)
    counts = [int(seen[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:])]
    expected = [max(0, min(b, m) - a) * hit for a, b in zip(bounds[:-1], bounds[1:])]
    if any(c < SPREAD_SHARE * e for c, e in zip(counts, expected)) or seen.sum() < SPREAD_SHARE * sum(expected):
        parts = ", ".join(f"{c} (about {e:.0f} expected)" for c, e in zip(counts, expected))
        raise fail(f"{coverage(seen, reads.steps)}; {reads.draws} crops drawn uniformly from all {m} possible "
                   f"starts visit about {sum(expected):.0f} distinct positions, spread evenly; distinct positions "
                   f"read in each of {SPREAD_PARTS} equal parts of the stream: {parts}.")


def _first_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if "Error" in line or "error" in line:
            return line.strip()[:200]
    return text.strip().splitlines()[-1][:200] if text.strip() else "no message"


def run_pure(t, name: str, call, reference, label: str, args: tuple, kwargs: dict | None = None,
             device: bool = False) -> None:
    """The `inputs` and `generator` properties of one ordinary call of `call` (a function or module that takes
    tensors and does not sample): its arguments unchanged, its output the reference's, torch's global
    generator left alone; with `device`, the same call on a simulated non-CPU device too. For the many
    functions whose other properties are checked by hand."""
    args, kwargs = tuple(args), dict(kwargs or {})
    samples = {"inputs": [Sample(label, args, kwargs)]}
    if device:
        samples["device"] = [OnDevice(label, args, kwargs)]
    run(t, Graded(name, call, reference, samples), ("inputs", "generator", "device"))


def run_device(t, name: str, call, label: str, args: tuple, kwargs: dict | None = None, generator: bool = False,
               **options) -> None:
    """The `device` property of one call of `call` (`options`: OnDevice's), for a function whose values are
    checked by hand (a training loop, a sampler); with `generator`, the `generator` property of the same call
    on the CPU first (for a function that must not touch the global generators: not one that seeds them by
    contract)."""
    args, kwargs = tuple(args), dict(kwargs or {})
    run(t, Graded(name, call, None, {"device": [OnDevice(label, args, kwargs, **options)]},
                  Sample(label, args, kwargs) if generator else None), ("generator", "device"))


def run_generator(t, name: str, call, label: str, args: tuple = (), kwargs: dict | None = None) -> None:
    """The `generator` property alone, of one call of `call` that a check makes anyway (fail-only, so it needs no
    reference: public checks run it on fixtures alone): torch's, numpy's and Python's global generators left
    where the grader put them. For functions whose values the check compares by hand."""
    sample = Sample(label, tuple(args), dict(kwargs or {}))
    run(t, Graded(name, call, None, generator=sample), ("generator",))

