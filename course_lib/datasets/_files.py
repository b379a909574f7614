"""Where an installed package keeps its data files, found without importing the package."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_file(package: str, *parts: str) -> Path:
    """The path of ``parts`` inside the installed ``package`` (its import is not run: scikit-learn's takes a second).

    Raises ModuleNotFoundError naming the requirement when the package is not installed.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the data set needs the package {package!r}: pip install -r requirements.txt")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.exists():
        raise FileNotFoundError(f"{path}: the installed {package!r} does not ship this file (see requirements.txt)")
    return path
