"""One module per assignment, named after its slug (``02-attention``: :mod:`grader.assignments.attention`):
its cases, its likely mistakes and its registry entry, ``ASSIGNMENT`` (see :mod:`grader.registry`)."""

from __future__ import annotations

import importlib

#: former module names, still imported by tests/reference (which the grader's maintainers do not own):
#: ``from grader.assignments import modern`` gives :mod:`grader.assignments.modern_variants`. Drop an entry
#: once nothing imports the old name; the registry never sees these (they are not modules).
_FORMER_NAMES = {"modern": "modern_variants", "multi_head": "multi_head_attention"}


def __getattr__(name: str):
    if name in _FORMER_NAMES:
        return importlib.import_module(f"{__name__}.{_FORMER_NAMES[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
