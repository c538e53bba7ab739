# %% [markdown]
# # Homework 1: n-gram language models
#
# A **language model** gives a probability to every sentence. With it we can say which of two
# sentences is more plausible, measure how surprised a model is by new text, and write new text by
# drawing one word at a time.
#
# In this homework you build the oldest useful family of language models, **n-gram models**, from
# scratch, and train them on Shakespeare. Step by step:
#
# | part | what you write | idea from the lecture |
# | --- | --- | --- |
# | Q1 | `tokenize`, `build_vocab`, `replace_oov` | tokens, a closed vocabulary, `<unk>` |
# | Q2 | `pad`, `count_ngrams` | sentence boundaries, counting n-grams |
# | Q3 | `NGramLM`, `InterpolatedLM`, `tune_lambdas` | Markov assumption, MLE, add-k smoothing, interpolation |
# | Q4 | `sentence_logprob`, `perplexity` | chain rule, perplexity |
# | Q5 | `generate` | greedy decoding and sampling |
# | Q6 | `build_model` | your best model, scored on unseen plays |
# | Q7 (extra credit) | `KneserNeyLM` | Kneser–Ney smoothing |
#
# The last part runs your code on real data: perplexity on held-out verse, a plot, and some
# (questionable) new Shakespeare.
#
# **The data.** We use verse lines from Shakespeare's plays; one line of verse is one "sentence".
# The plays are split three ways: `train` (to count from), `validation` (to choose
# hyper-parameters and to measure progress), and `test`. You never see `test`: those plays are
# held out by the grader, which uses them to score your Q6 model.
#
# **How grading works.** Only the cells marked as *graded* are graded, and the grader finds your
# code by the function and class names, so do not rename them. A graded cell must work on its own:
# keep its imports inside it (only `math`, `random`, `re` and `collections` are needed), do not use
# variables defined in other (ungraded) cells, and do not load data, train or print there; put
# experiments in ungraded cells instead. Graded cells may call each other's functions freely.
# Replace each `raise NotImplementedError(...)` with your code. No graded function may change the
# lists, sets or models it is given (no `append`, `sort` or `+=` on an argument): build new ones.
# The grader checks this, because such a bug corrupts everything computed after it.
#
# **Graded code is plain Python the grader can read.** Graded cells may import only `numpy`, `math`,
# `random`, `collections`, `itertools`, `functools`, `operator`, `enum`, `typing`, `dataclasses`,
# `warnings`, `copy`, `bisect`, `heapq`, `time`, `tqdm`, `abc`, `statistics`, `contextlib`, `re`,
# `string`, `unicodedata` and `fractions`. Ordinary Python is welcome (classes, dataclasses, enums,
# `functools.partial`, `operator.mul`, `getattr`/`hasattr` with a literal name, `setattr(self, name,
# ...)` in a method looping over literal names, `type(self).__name__`). Not allowed: other
# reflection (`vars`, `globals`, `__dict__` and double-underscore names beyond `__init__`,
# `__repr__`, `__name__` and the like), code made or loaded at run time (`eval`, `exec`, `pickle`,
# `np.load`, ...), private names of a library (a leading `_`), and changing a library (`math.log =
# ...`). Use a module only as `module.name`: `import math`, not `m = math` or `def f(x, m=math)`.
# The grader reads your graded cells before it runs anything: a check whose code breaks these rules
# is not graded, and a statement that breaks them while the cells load is not run and costs only the
# checks of the names it touches; getting round them counts as not attempting the question.
#
# **Public checks.** Save the notebook first (the checker reads the saved file), then run the cell
# below. You can run it any time: it tells you which public checks pass and, for those that fail,
# what was called and what went wrong. The grader also runs hidden checks, so passing every public
# check is a good sign but not a guarantee.

# %%
from autograder import check_notebook
check_notebook(assignment="ngram")  # finds this notebook; add question=2 to check one question

# %% [markdown]
# ## Q1. Tokens and a vocabulary
#
# A model sees text as a list of **tokens**. Our tokenizer is deliberately simple:
#
# 1. lower-case the line, so that `King` and `king` are the same word;
# 2. a word is a run of letters that may contain inner apostrophes (`king's`, `o'er`, `i'll`);
# 3. every other character that is not a space is a token on its own (`,`  `!`  `-`  and also an
#    apostrophe that starts a word, as in `'tis`).
#
# One regular expression does all of this:
# `re.findall(r"[a-z]+(?:'[a-z]+)*|[^\sa-z]", line.lower())`.
# The first alternative matches a word; the second matches any single character that is neither a
# space nor a letter.

# %% tags=["graded"]
import re


def tokenize(line: str) -> list[str]:
    r"""Split one line of text into lower-case tokens.

    Lower-case the line, then return
    ``re.findall(r"[a-z]+(?:'[a-z]+)*|[^\sa-z]", line.lower())``:
    a token is either a word (letters, possibly with inner apostrophes)
    or a single character that is neither a space nor a letter.

    Example:
        tokenize("Why, 'tis the KING's!")
        == ["why", ",", "'", "tis", "the", "king's", "!"]
    """
    # BEGIN SOLUTION: tokenize: lower-case the line, then one re.findall with the pattern in the docstring
    return re.findall(r"[a-z]+(?:'[a-z]+)*|[^\sa-z]", line.lower())
    # END SOLUTION


# %% [markdown]
# A model can only give probabilities to words it knows. We fix a **closed vocabulary** $V$ in
# advance: every word seen at least `min_count` times in training. Rare words are replaced by a
# special token `<unk>` ("unknown"), both in training and later in any text we score. Because
# training then contains some `<unk>`s, the model learns how likely "some rare word" is, and a new
# word in the validation plays no longer has probability zero.
#
# Two more special tokens mark sentence boundaries (you will use them in Q2):
#
# - `</s>` ends every sentence. The model must *predict* it (that is how it knows when a line is
#   over), so `</s>` belongs to $V$.
# - `<s>` is padding placed before the first word, so that the first words have a context. It is
#   never predicted, so it is **not** in $V$.

# %% tags=["graded"]
from collections import Counter


def build_vocab(sentences: list[list[str]], min_count: int = 2) -> set[str]:
    """Return the vocabulary of tokenized `sentences`.

    The vocabulary is every token that occurs at least `min_count` times
    (counting all occurrences in all sentences), plus "</s>" and "<unk>".
    It never contains "<s>".

    Example:
        build_vocab([["a", "b"], ["a", "c"]], min_count=2) == {"a", "</s>", "<unk>"}
        build_vocab([["a", "b"]], min_count=1) == {"a", "b", "</s>", "<unk>"}
    """
    # BEGIN SOLUTION: build_vocab: count every token with a Counter, keep the frequent ones, then add and remove the special tokens
    counts = Counter(token for sentence in sentences for token in sentence)
    vocab = {token for token, count in counts.items() if count >= min_count}
    vocab |= {"</s>", "<unk>"}
    vocab.discard("<s>")
    return vocab
    # END SOLUTION


# %% tags=["graded"]
def replace_oov(tokens: list[str], vocab: set[str]) -> list[str]:
    """Return a copy of `tokens` where every token not in `vocab` becomes "<unk>".

    Example:
        replace_oov(["to", "be", "or"], {"to", "be"}) == ["to", "be", "<unk>"]
    """
    # BEGIN SOLUTION: replace_oov: one list comprehension; keep a token if it is in vocab
    return [token if token in vocab else "<unk>" for token in tokens]
    # END SOLUTION


# %% [markdown]
# Try your functions on a tiny example (this cell is not graded; change it as you like):

# %%
print(tokenize("Why, 'tis the KING's!"))
examples = ["The cat sat on the mat.", "The dog sat on the log.", "The cat saw the dog!"]
tokenized = [tokenize(line) for line in examples]
small_vocab = build_vocab(tokenized, min_count=2)
print(sorted(small_vocab))
print([replace_oov(sentence, small_vocab) for sentence in tokenized])

# %% [markdown]
# ## Q2. Padding and counting n-grams
#
# An **n-gram** is a sequence of $n$ consecutive tokens: unigrams ($n=1$), bigrams ($n=2$),
# trigrams ($n=3$). An n-gram model predicts each word from the $n-1$ words before it, its
# **context**. The very first word of a sentence has no words before it, so we **pad**: put $n-1$
# copies of `<s>` in front and one `</s>` at the end. For a trigram model,
#
# `to be or not` $\;\to\;$ `<s> <s> to be or not </s>`
#
# Now every real word (and the final `</s>`) has exactly $n-1$ tokens of context, and the
# n-grams of this padded sentence are `(<s>, <s>, to)`, `(<s>, to, be)`, ..., `(or, not, </s>)`.
# A sentence of $m$ tokens always gives $m+1$ n-grams, one per predicted token.
#
# Each sentence is padded **on its own**, so an n-gram never spans two sentences: we model every
# line as a separate sentence, and its probability must not depend on the line before it.

# %% tags=["graded"]
def pad(tokens: list[str], n: int) -> list[str]:
    """Pad a sentence for an n-gram model: n-1 "<s>", the tokens, then one "</s>".

    Returns a new list; `tokens` itself is not changed.

    Example:
        pad(["to", "be"], 3) == ["<s>", "<s>", "to", "be", "</s>"]
        pad(["to", "be"], 1) == ["to", "be", "</s>"]
    """
    # BEGIN SOLUTION: pad: build a new list; do not change the input
    return ["<s>"] * (n - 1) + list(tokens) + ["</s>"]
    # END SOLUTION


# %% [markdown]
# Counting is the whole of "training" for an n-gram model. We will count Shakespeare (close to a
# million tokens) many times, so make it fast: keep the counts in a `dict` or a
# `collections.Counter` keyed by tuples, and let `zip` build the windows. For example,
# `zip(p, p[1:], p[2:])` yields the trigrams of a list `p` as tuples. (A million tokens should take
# about a second.)

# %% tags=["graded"]
from collections import Counter


def count_ngrams(sentences: list[list[str]], n: int) -> dict[tuple[str, ...], int]:
    """Count the n-grams of tokenized sentences.

    Each sentence is padded with `pad(sentence, n)` and every window of n
    consecutive tokens inside it is counted as a tuple of n strings.
    N-grams never cross from one sentence into the next.

    Example:
        count_ngrams([["a", "b"], ["a"]], 2)
        == {("<s>", "a"): 2, ("a", "b"): 1, ("b", "</s>"): 1, ("a", "</s>"): 1}
    """
    # BEGIN SOLUTION: count_ngrams: pad each sentence, then count the tuples from zip over n shifted copies of it
    counts = Counter()
    for sentence in sentences:
        padded = pad(sentence, n)
        counts.update(zip(*(padded[i:] for i in range(n))))
    return dict(counts)
    # END SOLUTION


# %%
# A toy corpus, tokenized by hand so that the next sections work even before Q1 is done.
toy = [["the", "cat", "sat", "on", "the", "mat", "."],
       ["the", "dog", "sat", "on", "the", "log", "."],
       ["the", "cat", "saw", "the", "dog", "!"]]
print(pad(["to", "be", "or", "not"], 3))
print(count_ngrams([["a", "b"], ["a"]], 2))
print(sorted(count_ngrams(toy, 2).items(), key=lambda item: -item[1])[:5])

# %% [markdown]
# ## Q3. From counts to probabilities
#
# **Markov assumption.** The probability of a word depends on (at most) the $n-1$ words before it:
#
# $$P(w_i \mid w_1, \dots, w_{i-1}) \approx P(w_i \mid w_{i-n+1}, \dots, w_{i-1}).$$
#
# **Maximum likelihood (MLE).** Write $h$ for the context $w_{i-n+1}, \dots, w_{i-1}$ and $c(\cdot)$
# for a count in the training data. The estimate that makes the training data most likely is the
# relative frequency
#
# $$P_{\text{MLE}}(w \mid h) = \frac{c(h, w)}{c(h)}, \qquad c(h) = \sum_{w'} c(h, w'),$$
#
# where $c(h)$ is the number of times the context $h$ was followed by *any* word (including
# `</s>`). For a unigram model the context is empty and $c()$ is simply the number of counted
# tokens.
#
# **The zero problem.** Most word pairs that are perfectly fine English never occur in our training
# plays. MLE gives them probability 0, and a single zero makes a whole sentence impossible.
# **Add-k smoothing** pretends every word of the vocabulary was seen $k$ extra times after every
# context:
#
# $$P_{\text{add-}k}(w \mid h) = \frac{c(h, w) + k}{c(h) + k\,|V|}.$$
#
# With $k = 1$ this is Laplace smoothing; much smaller $k$ (like 0.01) usually works better. The
# probabilities over $V$ still sum to one. (This needs every counted word to be in $V$: train on
# sentences that went through `replace_oov`.)
#
# **Contexts of any length.** `prob` receives the context as a tuple (or list) of all the preceding
# tokens, which may be longer or shorter than $n-1$: use only the last $n-1$, and if there are
# fewer, pad on the left with `<s>`, just as `pad` does.

# %% tags=["graded"]
import math
from collections import Counter


class NGramLM:
    """An n-gram language model estimated from counts, with optional add-k smoothing.

    Attributes:
        n: the order (1 = unigram, 2 = bigram, ...).
        vocab: the set of words the model can predict (includes "</s>" and "<unk>").
        k: the add-k pseudo-count; 0.0 means plain maximum likelihood.
    """

    def __init__(self, n: int, vocab: set[str], k: float = 0.0):
        self.n = n
        self.vocab = vocab
        self.k = k
        self.counts = {}          # n-gram tuple -> count
        self.context_counts = {}  # (n-1)-tuple context -> total count of n-grams starting with it

    def fit(self, sentences: list[list[str]]) -> "NGramLM":
        """Count the n-grams of `sentences` and return self.

        `sentences` are tokenized, already passed through `replace_oov`, and not
        padded (use `count_ngrams`). Store the n-gram counts c(ctx, w) and the
        context totals c(ctx) = sum over w of c(ctx, w). For n == 1 the only
        context is the empty tuple () and c(()) is the number of counted tokens.

        Example:
            lm = NGramLM(2, {"a", "b", "</s>", "<unk>"}).fit([["a", "b"]])
            # counts: ("<s>","a"):1, ("a","b"):1, ("b","</s>"):1; c(("a",)) == 1
        """
        # BEGIN SOLUTION: NGramLM.fit: use count_ngrams, then add each n-gram's count to the total of its context (all but the last token)
        self.counts = count_ngrams(sentences, self.n)
        context_counts = Counter()
        for ngram, count in self.counts.items():
            context_counts[ngram[:-1]] += count
        self.context_counts = dict(context_counts)
        return self
        # END SOLUTION

    def prob(self, word: str, context) -> float:
        """Return P(word | context).

        `context` is a tuple or list of the preceding tokens. Only its last n-1
        tokens are used; if it has fewer, it is padded on the left with "<s>".
        With c(ctx) the context total and c(ctx, word) the n-gram count:
          - k == 0: c(ctx, word) / c(ctx), or 0.0 when c(ctx) == 0;
          - k > 0:  (c(ctx, word) + k) / (c(ctx) + k * len(vocab)).

        Example (trained on [["a", "b"], ["a", "a"]], n=2, k=0):
            prob("a", ["<s>"]) == 1.0;  prob("b", ("a",)) == 1/3
            prob("b", ("b", "a")) == 1/3  (only the last token counts)
        """
        # BEGIN SOLUTION: NGramLM.prob: left-pad the context with <s>, keep its last n-1 tokens as a tuple, then apply the formula
        if self.n == 1:
            context = ()
        else:
            context = (("<s>",) * (self.n - 1) + tuple(context))[-(self.n - 1):]
        context_count = self.context_counts.get(context, 0)
        count = self.counts.get(context + (word,), 0)
        if self.k == 0:
            return count / context_count if context_count else 0.0
        return (count + self.k) / (context_count + self.k * len(self.vocab))
        # END SOLUTION

    def logprob(self, word: str, context) -> float:
        """Return the natural log of prob(word, context), or -math.inf if it is 0."""
        # BEGIN SOLUTION: NGramLM.logprob: math.log of prob, but math.log(0) raises an error
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf
        # END SOLUTION


# %%
toy_vocab = {word for sentence in toy for word in sentence} | {"</s>", "<unk>"}
bigram = NGramLM(2, toy_vocab).fit(toy)
print("P(cat | the)       =", bigram.prob("cat", ("the",)))
print("P(the | <s>)       =", bigram.prob("the", ()))
print("P(sat | the mouse) =", bigram.prob("sat", ("the", "mouse")), " (unseen: zero under MLE)")
bigram.k = 0.1
print("add-0.1: P(sat | mouse) =", bigram.prob("sat", ("mouse",)))
print("sum over vocab =", sum(bigram.prob(w, ("the",)) for w in toy_vocab))

# %% [markdown]
# **Interpolation.** A trigram model knows a lot about contexts it has seen and nothing about the
# others; a unigram model knows a little about everything. **Linear interpolation** mixes models
# of different orders:
#
# $$P_{\text{interp}}(w \mid h) = \sum_i \lambda_i \, P_i(w \mid h), \qquad \lambda_i \ge 0,\ \sum_i \lambda_i = 1.$$
#
# Since each $P_i$ sums to one over $V$, so does the mixture. Each model picks the part of the
# context it needs, so you can pass the same full context to all of them.

# %% tags=["graded"]
import math


class InterpolatedLM:
    """A weighted mixture of language models.

    Attributes:
        models: the component models (anything with n, vocab, prob, logprob).
        lambdas: one weight per model (non-negative, summing to 1).
        n: the largest order among the models.
        vocab: the vocabulary of the first model.
    """

    def __init__(self, models: list, lambdas: list[float]):
        self.models = models
        self.lambdas = lambdas
        self.n = max(model.n for model in models)
        self.vocab = models[0].vocab

    def prob(self, word: str, context) -> float:
        """Return sum over i of lambdas[i] * models[i].prob(word, context).

        Example: with lambdas [0.25, 0.75] and component probabilities 0.2 and
        0.6, prob == 0.25 * 0.2 + 0.75 * 0.6 == 0.5.
        """
        # BEGIN SOLUTION: InterpolatedLM.prob: a weighted sum, one term per model, each given the same context
        return sum(weight * model.prob(word, context)
                   for weight, model in zip(self.lambdas, self.models))
        # END SOLUTION

    def logprob(self, word: str, context) -> float:
        """Return the natural log of prob(word, context), or -math.inf if it is 0."""
        # BEGIN SOLUTION: InterpolatedLM.logprob: same as NGramLM.logprob
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf
        # END SOLUTION


# %% [markdown]
# **Choosing the weights.** The $\lambda$s (and $k$) are **hyper-parameters**: we do not learn them
# from the training counts (on training data the highest-order model always looks best), but pick
# the values that work best on held-out **validation** data. `tune_lambdas` tries a list of
# candidate weight vectors and keeps the one whose interpolated model has the lowest validation
# perplexity.
#
# It calls `perplexity`, which you write in Q4. That is fine: Python looks the name up when
# `tune_lambdas` runs, not when it is defined. We try it at the end of Q4.

# %% tags=["graded"]
def tune_lambdas(models: list, sentences: list[list[str]],
                 candidates: list[list[float]]) -> list[float]:
    """Return the candidate weights whose InterpolatedLM has the lowest perplexity.

    For each weight vector in `candidates`, build InterpolatedLM(models, weights)
    and compute its `perplexity` on `sentences`; return the vector with the
    lowest perplexity (the first one in `candidates` if several tie, also when
    every candidate has perplexity inf). Does not change `candidates`.

    Example:
        tune_lambdas([uni, bi], valid, [[0.5, 0.5], [0.1, 0.9]])  # -> one of the two lists
    """
    # BEGIN SOLUTION: tune_lambdas: score every candidate with perplexity and keep the best; min with a key keeps the first of equals
    return min(candidates,
               key=lambda lambdas: perplexity(InterpolatedLM(models, lambdas), sentences))
    # END SOLUTION


# %%
unigram = NGramLM(1, toy_vocab).fit(toy)
mixture = InterpolatedLM([unigram, NGramLM(2, toy_vocab).fit(toy)], [0.3, 0.7])
print("P(sat | mouse) =", mixture.prob("sat", ("mouse",)), " (the bigram alone says 0)")
print("sum over vocab =", sum(mixture.prob(w, ("the",)) for w in toy_vocab))

# %% [markdown]
# ## Q4. The chain rule and perplexity
#
# **Chain rule.** Any joint probability factors exactly into conditionals; with the Markov
# assumption each factor becomes an n-gram probability. For a sentence $w_1 \dots w_m$ we also
# predict the end marker $w_{m+1} = \langle/s\rangle$:
#
# $$\log P(w_1, \dots, w_m) = \sum_{i=1}^{m+1} \log P(w_i \mid w_1, \dots, w_{i-1}).$$
#
# We add **logs** instead of multiplying probabilities: a product of a few hundred numbers below
# one quickly underflows to `0.0` in floating point, while a sum of logs is perfectly safe. We use
# natural logs throughout.
#
# Write `sentence_logprob` using nothing but `lm.n` and `lm.logprob(word, context)`; then it works
# for every model in this homework (and any other model with the same interface). The context of
# word $i$ is the padding plus all earlier tokens: `("<s>",) * (lm.n - 1) + tokens[:i]`.
#
# **Perplexity** is the standard way to score a language model on held-out text. For test
# sentences with $N$ predicted tokens in total (every word plus one `</s>` per sentence),
#
# $$\text{PPL} = \exp\!\Big(-\frac{1}{N} \sum_{\text{sentences}} \log P(\text{sentence})\Big),$$
#
# the exponential of the average negative log-likelihood per token. Lower is better. A perplexity
# of 100 means the model is, on average, as unsure as if it were choosing uniformly among 100
# words. If any token has probability 0, the perplexity is infinite.

# %% tags=["graded"]
import math


def sentence_logprob(lm, tokens: list[str]) -> float:
    """Return the natural-log probability of a sentence under `lm` (chain rule).

    Sum lm.logprob(word, context) over the words of tokens + ["</s>"], where
    the context of the i-th word is tuple(["<s>"] * (lm.n - 1) + tokens[:i]).
    Uses only lm.n and lm.logprob, so it works with any model. Returns
    -math.inf if some word has probability 0. Does not change `tokens`.

    Example (a bigram lm):
        sentence_logprob(lm, ["a"]) == lm.logprob("a", ("<s>",)) + lm.logprob("</s>", ("<s>", "a"))
    """
    # BEGIN SOLUTION: sentence_logprob: loop over tokens + the end marker, growing the context one token at a time
    history = ["<s>"] * (lm.n - 1) + list(tokens)
    total = 0.0
    for i, word in enumerate(list(tokens) + ["</s>"]):
        total += lm.logprob(word, tuple(history[:lm.n - 1 + i]))
    return total
    # END SOLUTION


# %% tags=["graded"]
import math


def perplexity(lm, sentences: list[list[str]]) -> float:
    """Return the perplexity of `lm` on tokenized sentences.

    exp(-(sum of sentence_logprob(lm, s)) / (sum of len(s) + 1)), computed
    from log-probabilities (never multiply probabilities). Returns math.inf
    if any token has probability 0.

    Example: a model that gives every token probability 0.1 has perplexity 10.
    """
    # BEGIN SOLUTION: perplexity: add up sentence log-probabilities and token counts (one extra per sentence for the end marker)
    total_logprob = sum(sentence_logprob(lm, sentence) for sentence in sentences)
    num_tokens = sum(len(sentence) + 1 for sentence in sentences)
    if total_logprob == -math.inf:
        return math.inf
    return math.exp(-total_logprob / num_tokens)
    # END SOLUTION


# %%
smoothed = NGramLM(2, toy_vocab, k=0.1).fit(toy)
sentence = ["the", "dog", "sat", "on", "the", "mat", "."]
print("log P =", sentence_logprob(smoothed, sentence))
print("perplexity (add-0.1 bigram):", perplexity(smoothed, [sentence]))
print("perplexity (MLE bigram):    ", perplexity(NGramLM(2, toy_vocab).fit(toy), [sentence]))
print("best weights:", tune_lambdas([unigram, smoothed], [sentence], [[0.5, 0.5], [0.2, 0.8], [0.8, 0.2]]))

# %% [markdown]
# ## Q5. Generating text
#
# A language model is also a machine for writing. Start from the padding context, repeatedly pick
# a next word from $P(\cdot \mid \text{context})$, append it to the context, and stop when the model
# says `</s>` (or the text gets too long):
#
# - **greedy decoding** always takes the most probable word. It is deterministic, and its text is
#   bland: short, or stuck repeating the same few words;
# - **sampling** draws the word at random according to its probability, which gives varied and
#   much more natural (if not always sensible) text.
#
# So that everyone's samples are reproducible and can be checked, follow the docstring exactly:
# consider the words in `sorted(lm.vocab)` order, make one `random.Random(seed)` at the start, and
# draw each word with one call `rng.choices(words, weights=probs)[0]`.

# %% tags=["graded"]
import random


def generate(lm, max_len: int = 20, greedy: bool = False, seed: int | None = None) -> list[str]:
    """Generate one sentence from `lm` and return its tokens (without "</s>").

    Make rng = random.Random(seed) once. Start from the context
    ("<s>",) * (lm.n - 1). At each step, with words = sorted(lm.vocab) and
    probs = [lm.prob(w, context) for w in words]:
      - greedy: take the word with the highest probability (on ties, the
        first in sorted order);
      - otherwise: word = rng.choices(words, weights=probs)[0].
    Stop when the word is "</s>" (not included in the result); otherwise
    append it to the output and to the context. Stop after max_len tokens.
    Uses only lm.n, lm.vocab and lm.prob.

    Example:
        generate(lm, max_len=5, greedy=True)  # e.g. ["i", "am", "not", "a", "man"]
    """
    # BEGIN SOLUTION: generate: loop at most max_len times; score every word of sorted(lm.vocab), pick one, stop at the end marker
    rng = random.Random(seed)
    words = sorted(lm.vocab)
    context = ("<s>",) * (lm.n - 1)
    output = []
    while len(output) < max_len:
        probs = [lm.prob(word, context) for word in words]
        if greedy:
            word = words[max(range(len(words)), key=probs.__getitem__)]
        else:
            word = rng.choices(words, weights=probs)[0]
        if word == "</s>":
            break
        output.append(word)
        context = context + (word,)
    return output
    # END SOLUTION


# %%
print("greedy: ", generate(smoothed, greedy=True))
for seed in range(3):
    print("sampled:", generate(smoothed, seed=seed))

# %% [markdown]
# ## Q6. Your best model
#
# Now put the pieces together. Write `build_model(train, validation)`: it trains a model on
# `train`, uses `validation` to choose its hyper-parameters, and returns the model. The grader
# calls it on the training plays and scores the returned model by its perplexity on the **held-out
# test plays**, which you never see. The lower, the better: full points for doing about as well as
# the staff's model (built with the recipe below), with some margin.
#
# How the grader scores it: it never shows your model a held-out word. For a sample of positions
# in the test plays it sends only the context, asks `prob(w, context)` for **every** word `w` of
# the vocabulary, checks that these probabilities sum to 1, and reads the probability of the word
# that really came next itself. So `prob` must be a proper distribution in every context, and
# `logprob` must agree with it (the grader checks that too). A perplexity far below the staff
# model's is taken as a sign that the model has seen the test text, and gets no points.
#
# The details:
#
# - `train` and `validation` are tokenized sentences that already went through `replace_oov`, with
#   a vocabulary the grader built from `train` with `min_count=2`.
# - Give your model the vocabulary `build_vocab(train, 1)`: every word of `train`, which also
#   covers `</s>` and `<unk>`.
# - The model must have the interface used above: attributes `n` and `vocab`, methods
#   `prob(word, context)` and `logprob(word, context)`.
# - It must finish in well under **60 seconds** on about 700k training tokens on one CPU core, and
#   it must give every word a non-zero probability (or the test perplexity is infinite).
# - `prob` is called for every word of the vocabulary in a few hundred contexts, a few million calls
#   in all: keep it a few dictionary look-ups, with no loop over the counts inside it.
#
# A solid recipe: unigram, bigram and trigram `NGramLM`s, each with a small $k$ chosen on
# validation, interpolated with weights from `tune_lambdas`. Perplexity computations dominate the
# running time, so keep the grids small and compute each thing once. If you did Q7, a Kneser–Ney
# model is another good ingredient.

# %% tags=["graded"]
def build_model(train: list[list[str]], validation: list[list[str]]):
    """Train a language model on `train`, tune it on `validation`, return it.

    Both arguments are tokenized sentences already passed through `replace_oov`.
    The returned model uses vocab = build_vocab(train, 1), has attributes n and
    vocab and methods prob(word, context) and logprob(word, context), and gives
    every word of vocab a non-zero probability in every context. Runs in well
    under 60 seconds on ~700k training tokens.

    Example:
        lm = build_model(train, validation)
        perplexity(lm, validation)  # lower than any single add-k model
    """
    # BEGIN SOLUTION: build_model: fit n-gram models of a few orders, pick k for each on validation, then interpolate them with tune_lambdas
    vocab = build_vocab(train, 1)
    models = []
    for n in (1, 2, 3):
        lm = NGramLM(n, vocab).fit(train)
        scores = {}
        for k in (0.001, 0.01, 0.1, 1.0):
            lm.k = k
            scores[k] = perplexity(lm, validation)
        lm.k = min(scores, key=scores.get)
        models.append(lm)
    # all positive weights in steps of 0.1 (36 candidates), scored on every 10th
    # validation sentence: plenty to choose three weights, and 10x faster
    candidates = [[a / 10, b / 10, (10 - a - b) / 10]
                  for a in range(1, 9) for b in range(1, 10 - a)]
    lambdas = tune_lambdas(models, validation[::10], candidates)
    return InterpolatedLM(models, lambdas)
    # END SOLUTION


# %% [markdown]
# We run `build_model` on the real data in the experiments at the end. Here is a quick check that
# it runs on the toy data:

# %%
toy_model = build_model(toy, toy)
print("n =", toy_model.n, " perplexity on toy:", perplexity(toy_model, toy))

# %% [markdown]
# ## Q7 (extra credit). Kneser–Ney smoothing
#
# When a bigram model has little to go on, add-k and interpolation fall back on the unigram
# distribution $P(w) \propto c(w)$: frequent words get a lot of the leftover probability. But raw
# frequency is a poor guide to how likely a word is **in a new context**. The classic example:
# in American news text, `Francisco` is a common word, but almost every occurrence is in
# `San Francisco`. After `San` the bigram counts already predict it well; after any *other*
# word, `Francisco` is very unlikely, yet its high unigram count makes the back-off hand it a
# lot of probability.
#
# Shakespeare has the same effect. `morrow` occurs about 250 times in the training plays, but
# after only four different words (nearly always `good morrow` or `to-morrow`), while `nature`,
# just as frequent, follows about a hundred different words. In a context we have never seen,
# `nature` is a far better guess than `morrow`. (The experiments at the end count this.)
#
# Kneser–Ney fixes this with the **continuation probability**: how many *different* words precede
# $w$, relative to the number of distinct bigram types,
#
# $$P_{\text{cont}}(w) = \frac{N_{1+}(\bullet\, w)}{N_{1+}(\bullet\,\bullet)},
# \qquad N_{1+}(\bullet\, w) = \big|\{v : c(v, w) > 0\}\big|.$$
#
# The bigram part uses **absolute discounting**: subtract a fixed $d$ (usually 0.75) from every
# seen bigram count and give the saved mass to the continuation distribution. With
# $c(v) = \sum_w c(v, w)$ and $N_{1+}(v\,\bullet)$ the number of distinct words that follow $v$,
#
# $$P_{\text{KN}}(w \mid v) = \frac{\max(c(v, w) - d,\ 0)}{c(v)} + \frac{d\, N_{1+}(v\,\bullet)}{c(v)}\, P_{\text{cont}}(w).$$
#
# The second weight is exactly the mass the discounts removed, so the probabilities still sum to
# one. If the context word was never seen ($c(v) = 0$), use $P_{\text{cont}}(w)$ alone.
#
# Implement the interpolated Kneser–Ney **bigram** model. Count bigrams over sentences padded for
# $n = 2$ (one `<s>`, one `</s>`), as `count_ngrams(sentences, 2)` does.

# %% tags=["graded"]
import math
from collections import Counter


class KneserNeyLM:
    """Interpolated Kneser-Ney bigram model with absolute discount `discount`.

    Attributes:
        n: always 2.
        vocab: the set of words the model can predict.
        discount: the absolute discount d (0 < d < 1).
    """

    def __init__(self, vocab: set[str], discount: float = 0.75):
        self.n = 2
        self.vocab = vocab
        self.discount = discount

    def fit(self, sentences: list[list[str]]) -> "KneserNeyLM":
        """Count bigrams of `sentences` (padded for n=2) and the KN statistics; return self.

        Needed: the bigram counts c(v, w); c(v) = sum over w of c(v, w);
        N1+(v .) = number of distinct words w with c(v, w) > 0;
        N1+(. w) = number of distinct words v with c(v, w) > 0;
        N1+(. .) = number of distinct bigram types.
        """
        # BEGIN SOLUTION: KneserNeyLM.fit: count bigrams with count_ngrams, then loop over the bigram types once to build the other statistics
        self.bigram_counts = count_ngrams(sentences, 2)
        self.context_counts = Counter()  # c(v)
        self.num_followers = Counter()   # N1+(v .)
        self.num_preceders = Counter()   # N1+(. w)
        for (v, w), count in self.bigram_counts.items():
            self.context_counts[v] += count
            self.num_followers[v] += 1
            self.num_preceders[w] += 1
        self.num_types = len(self.bigram_counts)  # N1+(. .)
        return self
        # END SOLUTION

    def prob(self, word: str, context) -> float:
        """Return P_KN(word | v), v = the last token of `context` ("<s>" if empty).

        P_cont(w) = N1+(. w) / N1+(. .). If c(v) > 0:
            max(c(v, w) - d, 0) / c(v) + d * N1+(v .) / c(v) * P_cont(w)
        otherwise P_cont(w).

        Example: prob("night", ("good",)) uses only "good"; prob("the", ()) uses "<s>".
        """
        # BEGIN SOLUTION: KneserNeyLM.prob: compute P_cont(word) first; if the context word v was never seen, that is the answer
        v = context[-1] if len(context) > 0 else "<s>"
        p_cont = self.num_preceders.get(word, 0) / self.num_types
        c_v = self.context_counts.get(v, 0)
        if c_v == 0:
            return p_cont
        d = self.discount
        discounted = max(self.bigram_counts.get((v, word), 0) - d, 0) / c_v
        return discounted + d * self.num_followers[v] / c_v * p_cont
        # END SOLUTION

    def logprob(self, word: str, context) -> float:
        """Return the natural log of prob(word, context), or -math.inf if it is 0."""
        # BEGIN SOLUTION: KneserNeyLM.logprob: same as NGramLM.logprob
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf
        # END SOLUTION


# %%
try:
    kn = KneserNeyLM(toy_vocab).fit(toy)
    print("P_KN(sat | cat) =", kn.prob("sat", ("cat",)))
    print("P_KN(sat | mouse) =", kn.prob("sat", ("mouse",)), " (unseen context: continuation only)")
    print("sum over vocab =", sum(kn.prob(w, ("the",)) for w in toy_vocab))
except NotImplementedError:
    print("Q7 not done (that is fine: it is extra credit)")

# %% [markdown]
# ## Experiments: Shakespeare
#
# Time to use real data. The data module gives us verse lines for the `train` and `validation`
# plays (the `test` plays stay with the grader). We tokenize with your `tokenize`, build the
# vocabulary from `train` with `min_count=2`, and replace rare words with `<unk>` in both splits.

# %%
import time

from autograder.data import shakespeare

train_lines = shakespeare.lines("train")
valid_lines = shakespeare.lines("validation")
print(len(train_lines), "train lines, e.g.", train_lines[:3])

vocab = build_vocab([tokenize(line) for line in train_lines], min_count=2)
train = [replace_oov(tokenize(line), vocab) for line in train_lines]
valid = [replace_oov(tokenize(line), vocab) for line in valid_lines]
print(f"|V| = {len(vocab)}; {sum(map(len, train))} train tokens, {sum(map(len, valid))} validation tokens")
unk_rate = sum(s.count("<unk>") for s in valid) / sum(map(len, valid))
print(f"{unk_rate:.1%} of validation tokens are <unk>")

# %% [markdown]
# **Smoothing and order.** A bigram MLE model gives probability 0 to bigrams it never saw, so its
# validation perplexity is infinite. Add-k repairs that; we choose $k$ on validation from a small
# grid for each order.

# %%
print("bigram MLE perplexity:", perplexity(NGramLM(2, vocab).fit(train), valid))

results = {}  # name -> validation perplexity
tuned = {}    # order n -> NGramLM with its best k
curves = {}   # name -> {k: validation perplexity}, for the plot below
k_grid = (0.001, 0.01, 0.1, 1.0)
for n, name in [(1, "unigram"), (2, "bigram"), (3, "trigram")]:
    fitted = NGramLM(n, vocab).fit(train)  # counts once; k only changes prob()
    by_k = {}
    for k in k_grid:
        fitted.k = k
        by_k[k] = perplexity(fitted, valid)
        print(f"{name:8s} k={k:<6} perplexity {by_k[k]:8.1f}")
    fitted.k = min(by_k, key=by_k.get)
    tuned[n] = fitted
    curves[name] = by_k
    results[f"{name} (add-k)"] = by_k[fitted.k]

# %% tags=["figure"]
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3.5))
for name, by_k in curves.items():
    ax.plot(list(by_k), list(by_k.values()), marker="o", label=name)
ax.set(xscale="log", yscale="log", xlabel="k (add-k)", ylabel="validation perplexity")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown] tags=["written"]
# ### Written question 1: add-k as k grows
#
# Read your plot. For the bigram and for the trigram, how does validation perplexity change as $k$
# grows from 0.001 to 1? Explain the shape from what add-k does to the probability of the n-grams
# seen in training and of those never seen, and say why the trigram's curve is higher and its best
# $k$ is not the bigram's.

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* The bigram curve falls and then rises (best near $k = 0.01$, about 234 against 253
# at 0.001 and 664 at 1). A tiny $k$ leaves unseen bigrams almost at probability 0, and the
# validation plays are full of them, so their cost dominates; a larger $k$ moves mass to them.
# Past the best $k$ the mass taken from the seen bigrams, which carry most of the validation
# tokens, costs more than the unseen ones gain, because add-k spreads it evenly over all $|V|$
# words instead of the plausible ones. The trigram curve only rises (about 1,000 at 0.001, 4,000 at
# 1) and lies far above: most trigram contexts were seen once or never, so almost every position
# gets the near-uniform add-k share, and each context has so few counts that any $k$ swamps them;
# its best $k$ is the smallest on the grid. The unigram hardly moves: every word in $V$ was seen.

# %% [markdown]
# Notice that the best add-k trigram is *worse* than the add-k bigram: most trigrams in the
# validation plays were never seen in training, and for each of them add-k spreads the
# probability almost evenly over the whole vocabulary. Interpolation does much better, because it
# falls back on the lower orders exactly where the trigram knows nothing. (Here we try only a
# coarse grid of weights; `build_model` uses a finer one.)

# %%
models = [tuned[1], tuned[2], tuned[3]]
candidates = [[a / 5, b / 5, (5 - a - b) / 5] for a in range(1, 4) for b in range(1, 5 - a)]
lambdas = tune_lambdas(models, valid, candidates)
interpolated = InterpolatedLM(models, lambdas)
results["trigram (interpolated)"] = perplexity(interpolated, valid)
print("interpolation weights (unigram, bigram, trigram):", lambdas)

start = time.perf_counter()
best_model = build_model(train, valid)
print(f"build_model took {time.perf_counter() - start:.1f} s")
results["build_model"] = perplexity(best_model, valid)

try:
    results["Kneser-Ney bigram"] = perplexity(KneserNeyLM(vocab).fit(train), valid)
except NotImplementedError:
    print("Kneser-Ney skipped (Q7 not done)")

for name, ppl in results.items():
    print(f"{name:24s} {ppl:8.1f}")

# %%
import matplotlib.pyplot as plt

names = list(results)
fig, ax = plt.subplots(figsize=(8, 3.5))
bars = ax.bar(names, [results[name] for name in names], color="tab:blue")
ax.bar_label(bars, fmt="%.0f")
ax.set_ylabel("validation perplexity")
ax.set_title("Lower is better")
ax.margins(y=0.15)
plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
fig.tight_layout()
plt.show()

# %% [markdown]
# **Why Kneser–Ney helps.** Count how often a word occurs, and after how many *different* words
# (its continuation count $N_{1+}(\bullet\, w)$). Frequent words with few left neighbours are
# exactly the ones that plain back-off overrates in new contexts.

# %%
bigram_counts = count_ngrams(train, 2)
for word in ("morrow", "nature", "highness", "night"):
    left_neighbours = [v for (v, w) in bigram_counts if w == word]
    occurrences = sum(bigram_counts[(v, word)] for v in left_neighbours)
    print(f"{word:10s} occurs {occurrences:4d} times, after {len(left_neighbours):3d} different words")

# %% [markdown]
# **Generation.** Greedy decoding picks the single most likely continuation every time, so its
# lines are short and dull (and it produces the same line every time). Sampling gives varied
# lines. Compare samples from the smoothed, interpolated model with samples from a plain MLE
# trigram: smoothing is what makes the perplexity finite, but it also hands a little probability
# to every word after every context, and when sampling, those rare words do turn up. The MLE
# model only ever says things it has seen. (Generation scores the whole vocabulary at every
# step, so it takes a moment.)

# %% tags=["figure"]
mle_trigram = NGramLM(3, vocab).fit(train)
print("greedy, interpolated:", " ".join(generate(interpolated, greedy=True)))
print("greedy, MLE trigram: ", " ".join(generate(mle_trigram, greedy=True)))
for seed in range(3):
    print("sampled, interpolated:", " ".join(generate(interpolated, seed=seed)))
for seed in range(3):
    print("sampled, MLE trigram: ", " ".join(generate(mle_trigram, seed=seed)))

# %% [markdown] tags=["written"]
# ### Written question 2: perplexity and what the model says
#
# The interpolated model has a far lower validation perplexity than the MLE trigram, yet some of
# its sampled lines above read worse: rare words in odd places. Using your own printed lines,
# explain both facts. What does smoothing do for perplexity, what does it do to sampling, and why
# are the greedy lines of both models short and repetitive?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* Perplexity punishes a probability of 0 without limit: one unseen validation
# trigram makes the MLE model's perplexity infinite, and smoothing gives every word after every
# context some probability, so nothing costs infinitely much. When sampling, that small mass adds
# up over the whole vocabulary: at each step there is a real chance of drawing one of thousands of
# rare words, each unlikely alone, and the line derails. The MLE trigram can only say what it has
# seen, so its samples are locally fluent (often copied phrases). Greedy decoding takes the single
# likeliest word each time: frequent function words and the end of line win, so lines are short
# and the same every time.

# %% [markdown]
# ## Done?
#
# Save the notebook, run the public checks one last time, then make the PDF of your written
# answers with `lmgrade export ngram.ipynb` and upload it to the written assignment. Submit
# `ngram.ipynb`.

# %%
from autograder import check_notebook
check_notebook(assignment="ngram")
