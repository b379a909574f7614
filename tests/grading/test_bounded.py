"""The grader's own work on a learner's input runs within its own budget (grader/bounded.py), and the bounds on what
a learner hands in hold against inputs built to pass a naive check (grader/bounds.py)."""

from __future__ import annotations

import json

import pytest

from grader.bounded import OverBudget, run_bounded
from grader.bounds import NotebookBounds, Refused, json_depth, read_notebook


def _grow(mib: int) -> int:
    hog = [bytearray(1 << 20) for _ in range(mib)]
    return len(hog)


def _spin() -> None:
    while True:
        pass


def test_a_computation_within_its_budget_returns_its_result():
    assert run_bounded(_grow, 16, memory_mb=256, seconds=20) == 16


def test_memory_past_the_budget_is_named_and_the_caller_goes_on():
    with pytest.raises(OverBudget) as caught:
        run_bounded(_grow, 2048, memory_mb=128, seconds=20)
    assert caught.value.what == "memory"
    assert run_bounded(_grow, 1, memory_mb=128, seconds=20) == 1  # the caller is unharmed


def test_time_past_the_budget_is_named():
    with pytest.raises(OverBudget) as caught:
        run_bounded(_spin, memory_mb=64, seconds=1)
    assert caught.value.what == "time"


def test_the_static_reader_on_deep_code_fails_in_its_child_not_the_caller():
    import ast

    with pytest.raises(OverBudget) as caught:
        run_bounded(ast.parse, "x = " + "(" * 100_000 + ")" * 100_000, memory_mb=512, seconds=20)
    assert caught.value.what in ("failed", "memory")


@pytest.mark.parametrize("text, depth", [
    ('{"a": [1, {"b": "]]]]"}]}', 3),  # brackets in strings do not count
    ('["\\\\", "\\"[[", [[1]]]', 3),  # escaped backslashes and quotes
    ("[" * 5000 + "]" * 5000, 5000),
    ('"[[[["', 0),
])
def test_json_depth_is_read_without_parsing(text, depth):
    assert json_depth(text.encode()) == depth


@pytest.mark.parametrize("mutate, rule", [
    (lambda nb: nb["cells"].extend([nb["cells"][0]] * 20), "cells, over the course's limit of 10"),
    (lambda nb: nb["cells"][0].update(source="x" * 2000), "over the course's limit of 1 KiB for one cell"),
    (lambda nb: nb["cells"][0].update(source=["x" * 900] * 2), "over the course's limit of 1 KiB for one cell"),
    (lambda nb: nb.update(nbformat=3), "not an nbformat 4 notebook"),
    (lambda nb: nb.update(cells={"a": 1}), "no list of cells"),
])
def test_every_bound_is_named_with_its_value_and_rule(mutate, rule):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "source": "x",
                                                                         "metadata": {}, "outputs": []}]}
    mutate(nb)
    with pytest.raises(Refused, match=rule.replace("(", r"\(")):
        read_notebook(json.dumps(nb).encode(), NotebookBounds(cells=10, cell_source=1024, source=4096))
