"""`lmgrade mutants`: the operators change what they claim, mutants stay inside one graded function,
and the judge tells caught, survived, equivalent and accepted mutants apart on real gradings."""
from __future__ import annotations

import ast
import csv

import pytest

from autograder.authoring import assignments
from autograder.grading import mutants
from autograder.grading.mutation_operators import TENSOR_OPERATORS, all_operators


@pytest.mark.parametrize("name", sorted(TENSOR_OPERATORS))
def test_each_tensor_operator_makes_its_examples(name):
    cls = TENSOR_OPERATORS[name]
    for example in cls.examples():
        assert mutants._mutate(example.pre_mutation_code, cls, example.occurrence) == example.post_mutation_code


@pytest.mark.parametrize("code, operator, expected", [
    ("w = torch.softmax(s, -1)\n", "ShiftAxis", "w = torch.softmax(s, -2)\n"),
    ("t = x[:, :-1]\n", "ShiftSlice", "t = x[:, :-2]\n"),
    ("s = q @ k.transpose(-2, -1) / d\n", "DropTranspose", "s = q @ k / d\n"),
    ("m = x.amax(dim=-1)\n", "FlipKeepdim", "m = x.amax(dim=-1, keepdim=True)\n"),
    ("y = x.masked_fill(~m, -1e9)\n", "ChangeConstant", "y = x.masked_fill(~m, -1000.0)\n"),
])
def test_tensor_operators_on_code_as_the_references_write_it(code, operator, expected):
    assert mutants._mutate(code, TENSOR_OPERATORS[operator], 0) == expected


def test_cosmic_rays_bit_operators_are_left_out_and_arithmetic_kept():
    names = set(all_operators())
    assert "ReplaceBinaryOperator_Add_Sub" in names and "NumberReplacer" in names
    assert not any("BitOr" in n or "LShift" in n for n in names)


def test_mutants_are_sampled_per_function_deterministically_and_change_only_that_function():
    attention = assignments.get("attention")
    first = mutants.enumerate_mutants(attention, per_function=3, seed=1)
    again = mutants.enumerate_mutants(attention, per_function=3, seed=1)
    other = mutants.enumerate_mutants(attention, per_function=3, seed=2)
    assert [m.id for m in first] == [m.id for m in again]
    assert [m.id for m in first] != [m.id for m in other]
    graded = mutants.graded_names(attention)
    per_function: dict[str, int] = {}
    for m in first:
        per_function[m.function] = per_function.get(m.function, 0) + 1
        compile(m.source, m.id, "exec")
        tree = ast.parse(m.source)
        changed = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert m.function in changed and m.function in graded
        assert m.questions == graded[m.function]
        assert m.diff.count("\n-") >= 1 and m.diff.count("\n+") >= 1
    assert set(per_function.values()) <= {1, 2, 3} and max(per_function.values()) == 3
    assert any(m.operator in TENSOR_OPERATORS for m in first)


def test_accepted_survivors_are_read_from_meta_toml(tmp_path):
    (tmp_path / "meta.toml").write_text('title = "x"\n[mutants.accepted]\n"f-0123456789" = "same values"\n')

    class Fake:
        dir = tmp_path

    assert mutants.accepted(Fake()) == {"f-0123456789": "same values"}


@pytest.mark.slow
def test_a_run_tells_caught_survived_equivalent_and_accepted_apart(tmp_path, monkeypatch):
    """attention Q3 (masks): first as graded, then with checks made blind, where every mutant whose
    values differ must survive and one that changes nothing the checks read (a `.detach()` on a
    boolean mask) must be judged equivalent; an accepted survivor leaves the score."""
    attention = assignments.get("attention")
    summary = mutants.run(attention, tmp_path / "real", question="3", per_function=2, say=lambda _: None)
    statuses = {o.mutant.id: o.status for o in summary.outcomes}
    assert statuses and set(statuses.values()) <= {"caught", "equivalent", "survived"}
    assert "caught" in statuses.values()
    rows = list(csv.DictReader((tmp_path / "real" / "mutants.csv").open()))
    assert {r["id"] for r in rows} == set(statuses)
    assert (tmp_path / "real" / "mutants.html").read_text().count("<h3") == list(statuses.values()).count("survived")

    caught = [o.mutant.id for o in summary.outcomes if o.status == "caught"]
    monkeypatch.setattr(mutants, "_failures", lambda record, question: "")  # checks that catch nothing
    monkeypatch.setattr(mutants, "accepted", lambda assignment: {caught[0]: "staff say so"})
    blind = mutants.run(attention, tmp_path / "real", question="3", per_function=2, say=lambda _: None)
    after = {o.mutant.id: o.status for o in blind.outcomes}
    assert after[caught[0]] == "accepted"
    for mutant_id in caught[1:]:
        assert after[mutant_id] == "survived"  # its values differ: a check could have caught it
    for mutant_id, status in statuses.items():
        if status == "equivalent":
            assert after[mutant_id] == "equivalent"
    row = blind.per_question()["3"]
    assert mutants.Summary.score(row) == 0.0 and row["accepted"] == 1
