"""The README's quick start is what CI runs, and every example command in the docs is accepted as written."""
import re
import shlex

import pytest

from autograder import cli
from autograder.authoring import assignments

ROOT = assignments.ROOT
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def test_ci_runs_the_readme_quick_start_verbatim():
    blocks = code_blocks((ROOT / "README.md").read_text(), "sh")
    assert len(blocks) >= 2, "the quick start has two commands"
    main_job, tests = blocks[0].strip(), blocks[1].strip()
    assert main_job == "./install.sh && .venv/bin/lmgrade selfcheck"
    assert tests == "./install.sh --dev && .venv/bin/python -m pytest -q"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert main_job in ci and tests in ci
    assert "git status --porcelain" in "\n".join(ci)  # the two commands leave the checkout clean


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)#]+)\)", (ROOT / "README.md").read_text())
    assert links and [link for link in links if not link.startswith("http") and not (ROOT / link).exists()] == []


def example_commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for block in code_blocks(page.read_text(), "sh"):
            for line in block.splitlines():
                line = line.split("  #")[0].strip()
                if re.match(r"^(\.venv/bin/)?lmgrade\s", line):
                    found.append((page.relative_to(ROOT).as_posix(), line))
    return found


@pytest.mark.parametrize("page, command", example_commands())
def test_example_commands_parse(page, command, monkeypatch):
    """Each `lmgrade ...` line in a shell block is a real command line (synopses go in text blocks)."""
    seen = []
    for handler in ("_build", "_check", "_grade", "_selfcheck", "_gradescope", "_merge", "_mutants", "_export"):
        monkeypatch.setattr(cli, handler, lambda args, name=handler: seen.append(name) or 0)
    try:
        assert cli.main(shlex.split(command)[1:]) == 0
    except SystemExit as exc:
        pytest.fail(f"{page}: `{command}` is rejected by lmgrade (exit {exc.code})")
    assert seen


def test_pages_have_examples():
    assert len(example_commands()) >= 5
