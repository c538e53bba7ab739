"""The ngram grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it. The expected set of
failing checks is the bug's check plus the checks of code that calls the buggy function (Q3
classes call count_ngrams; tune_lambdas calls perplexity), and nothing else. Question 6 trains on
all of Shakespeare (about 20 s), so it is graded here only where the variant is about Q6.
"""
import pytest

from autograder import assignments, runner
from tests.helpers import edited_solution

ALL_BUT_Q6 = {"1", "2", "3", "4", "5", "7"}
COUNTING = {"public_counts", "counts_exact", "counts_random", "counts_speed"}
# normalization is not here: MLE from any counts is normalized; it catches denominators, not counts
COUNTS_USERS = {"public_ngram_prob", "mle_hidden", "addk_hidden", "kneser_ney_hidden"}

BUGS = {
    "tokenize forgets to lower-case": (
        [('    return re.findall(r"[a-z]+(?:\'[a-z]+)*|[^\\sa-z]", line.lower())',
          '    return re.findall(r"[a-z]+(?:\'[a-z]+)*|[^\\sa-z]", line)')],
        {"public_tokenize", "tokenize_hidden"}),
    "build_vocab keeps words seen more than min_count times": (
        [("count >= min_count", "count > min_count")],
        {"public_vocab", "vocab_hidden"}),
    "pad forgets </s>": (
        [('return ["<s>"] * (n - 1) + list(tokens) + ["</s>"]', 'return ["<s>"] * (n - 1) + list(tokens)')],
        COUNTING | COUNTS_USERS),
    "count_ngrams window stops one short": (
        [("        counts.update(zip(*(padded[i:] for i in range(n))))",
          "        for i in range(len(padded) - n):\n            counts[tuple(padded[i:i + n])] += 1")],
        COUNTING | COUNTS_USERS),
    "count_ngrams counts across sentence boundaries": (
        [("    for sentence in sentences:\n        padded = pad(sentence, n)\n"
          "        counts.update(zip(*(padded[i:] for i in range(n))))",
          "    padded = [token for sentence in sentences for token in pad(sentence, n)]\n"
          "    counts.update(zip(*(padded[i:] for i in range(n))))")],
        # the extra n-grams only touch contexts like ("</s>",) that MLE queries never meet with counts
        COUNTING | {"addk_hidden", "kneser_ney_hidden"}),
    "add-k denominator without V*k": (
        [("(context_count + self.k * len(self.vocab))", "(context_count + self.k)")],
        {"public_ngram_prob", "addk_hidden", "normalization"}),
    "MLE divides by zero for an unseen context": (
        [("return count / context_count if context_count else 0.0", "return count / context_count")],
        {"mle_hidden"}),
    "interpolation ignores the weights": (
        [("return sum(weight * model.prob(word, context)\n                   for weight, model in zip(self.lambdas, self.models))",
          "return sum(model.prob(word, context) for model in self.models) / len(self.models)")],
        {"interpolation_hidden", "tune_lambdas_hidden"}),
    "sentence_logprob forgets </s>": (
        [('for i, word in enumerate(list(tokens) + ["</s>"]):', "for i, word in enumerate(list(tokens)):")],
        {"public_chain_rule", "chain_rule", "perplexity_hidden", "perplexity_stable"}),
    "perplexity mixes natural log with base 2": (
        [("return math.exp(-total_logprob / num_tokens)", "return 2 ** (-total_logprob / num_tokens)")],
        {"public_chain_rule", "perplexity_hidden", "perplexity_stable"}),
    "greedy breaks ties towards the last word": (
        [("word = words[max(range(len(words)), key=probs.__getitem__)]",
          "word = max(zip(probs, words))[1]")],
        {"greedy_hidden"}),
    "sampling ignores the probabilities": (
        [("            word = rng.choices(words, weights=probs)[0]", "            word = rng.choice(words)")],
        {"sampling_hidden"}),
    "sampling ignores the seed": (
        [("    rng = random.Random(seed)", "    rng = random.Random()")],
        {"sampling_hidden"}),
    "Kneser-Ney uses raw unigram counts instead of continuation counts": (
        [("p_cont = self.num_preceders.get(word, 0) / self.num_types",
          "p_cont = sum(c for (a, b), c in self.bigram_counts.items() if b == word) / sum(self.bigram_counts.values())")],
        {"kneser_ney_hidden"}),
}

CORRECT = {
    "count_ngrams with explicit loops and dict.get": [
        ("        counts.update(zip(*(padded[i:] for i in range(n))))",
         "        for i in range(len(padded) - n + 1):\n"
         "            gram = tuple(padded[i:i + n])\n"
         "            counts[gram] = counts.get(gram, 0) + 1")],
    "probabilities as numpy float32": [
        ("import math\nfrom collections import Counter\n\n\nclass NGramLM:",
         "import math\nimport numpy as np\nfrom collections import Counter\n\n\nclass NGramLM:"),
        ("return (count + self.k) / (context_count + self.k * len(self.vocab))",
         "return np.float32((count + self.k) / (context_count + self.k * len(self.vocab)))")],
    "perplexity from a per-token average with math.fsum": [
        ("    total_logprob = sum(sentence_logprob(lm, sentence) for sentence in sentences)",
         "    total_logprob = math.fsum(sentence_logprob(lm, sentence) for sentence in sentences)")],
    "sampling by inverting the cumulative distribution": [
        ("            word = rng.choices(words, weights=probs)[0]",
         "            u, acc, word = rng.random() * sum(probs), 0.0, words[-1]\n"
         "            for w, p in zip(words, probs):\n"
         "                acc += p\n"
         "                if u < acc:\n"
         "                    word = w\n"
         "                    break")],
    "greedy by an explicit first-maximum loop": [
        ("word = words[max(range(len(words)), key=probs.__getitem__)]",
         "best = 0\n"
         "            for i in range(1, len(words)):\n"
         "                if probs[i] > probs[best]:\n"
         "                    best = i\n"
         "            word = words[best]")],
}


def edited(replacements) -> str:
    return edited_solution("ngram", replacements)


def failing_checks(tmp_path, text, questions=ALL_BUT_Q6) -> set[str]:
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, assignments.get("ngram"), questions=questions)
    assert report.results, "no checks ran"
    return {r.name for r in report.results if not r.passed}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_is_caught_by_exactly_its_checks(tmp_path, bug):
    replacements, expected = BUGS[bug]
    assert failing_checks(tmp_path, edited(replacements)) == expected


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_gets_full_marks(tmp_path, variant):
    assert failing_checks(tmp_path, edited(CORRECT[variant])) == set()


def test_quadratic_counting_fails_only_the_time_limit(tmp_path):
    slow = ("    grams = [tuple(p[i:i + n]) for p in map(lambda s: pad(s, n), sentences) for i in range(len(p) - n + 1)]\n"
            "    return {g: grams.count(g) for g in set(grams)}\n")
    text = edited([("    counts = Counter()\n    for sentence in sentences:\n        padded = pad(sentence, n)\n"
                    "        counts.update(zip(*(padded[i:] for i in range(n))))\n    return dict(counts)\n", slow)])
    assert failing_checks(tmp_path, text, questions={"2"}) == {"counts_speed"}


def test_unnormalized_best_model_is_flagged(tmp_path):
    """Interpolation weights that sum to 3 'beat' the Bayes-optimal perplexity: flagged, not rewarded."""
    text = edited([("    return InterpolatedLM(models, lambdas)", "    return InterpolatedLM(models, [1.0, 1.0, 1.0])")])
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, assignments.get("ngram"), questions={"6"})
    outputs = {r.name: r.output for r in report.results if not r.passed}
    assert set(outputs) == {"public_build_model", "shakespeare_heldout", "synthetic_floor"}
    assert "entropy floor" in outputs["synthetic_floor"]
    assert "not 1" in outputs["shakespeare_heldout"]


def test_weak_best_model_fails_the_thresholds(tmp_path):
    """A bigram add-1 model alone is a real model, just not good enough on Shakespeare (on the
    synthetic language, whose topics are sticky, a bigram is within the 10% margin)."""
    text = edited([("    return InterpolatedLM(models, lambdas)",
                    "    return NGramLM(2, vocab, 1.0).fit(train)")])
    assert failing_checks(tmp_path, text, questions={"6"}) == {"shakespeare_heldout"}


def test_same_submission_gets_the_same_feedback_every_run(tmp_path):
    """Seeding is per check in both processes: even a sampler on the global RNG is graded identically."""
    text = edited([("            word = rng.choices(words, weights=probs)[0]",
                    "            word = random.choices(words, weights=probs)[0]")])
    path = tmp_path / "submission.py"
    path.write_text(text)
    runs = [runner.grade(path, assignments.get("ngram"), questions={"5"}) for _ in range(2)]
    assert [(r.name, r.passed, r.output) for r in runs[0].results] == [(r.name, r.passed, r.output) for r in runs[1].results]
    assert {r.name for r in runs[0].results if not r.passed} == {"sampling_hidden"}  # not reproducible by seed
