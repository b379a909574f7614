"""nbval on the chapter notebooks: the CPU kernels they run on, and what is compared with the stored outputs.

The stored outputs are written on torch's portable CPU kernels
(``ATEN_CPU_CAPABILITY=default``, :func:`tools.notebooks.writing_kernels`).
Here each notebook's kernel starts on the machine's own kernels
(:func:`tools.portability.suite_kernels`; an environment that names its
kernels keeps them) with the notebooks' own one thread: ``make test`` runs
every notebook once, and that one run proves both that the stored outputs are
what the code prints and, where the machine's kernels are not the writing
ones (any x86-64 machine with AVX2), that they are not one set of kernels'
rounding. ``make portability`` runs the other kernel sets and thread counts.

Everything a cell prints or displays is compared (the sanitizers of
``tests/nbval_sanitize.cfg`` aside), except MyST-NB's glue records: a number a
notebook records for its prose (``course_lib.experiment.quote`` or a claim's
``glue=``) is the machine's own measurement, like the bracket of a claim's
line. The claim that comes with it is compared; the record is not.
"""

from __future__ import annotations

import sys
import warnings

import pytest

from tools.notebooks import WRITING_CAPABILITY
from tools.portability import started_with, suite_kernels

GLUE_MIME_PREFIX = "application/papermill.record/"


class _SkipCompare(tuple):
    """nbval's tuple of keys not compared, also matching every glue record's MIME type."""

    def __contains__(self, key) -> bool:
        return tuple.__contains__(self, key) or (isinstance(key, str) and key.startswith(GLUE_MIME_PREFIX))


def pytest_collectstart(collector):
    if type(collector).__name__ == "IPyNbFile" and hasattr(collector, "skip_compare"):
        collector.skip_compare = _SkipCompare(collector.skip_compare)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """The first cell's set-up starts the notebook's kernel: under :func:`suite_kernels`, and checked."""
    notebook = item.parent
    if type(notebook).__name__ != "IPyNbFile" or notebook.kernel is not None:
        return (yield)
    named, capability = suite_kernels()  # the kernel inherits this process's environment as it is
    result = yield
    if capability == WRITING_CAPABILITY and not _warned:
        _warned.append(capability)
        warnings.warn(f"the notebooks run on {capability!r} kernels, the ones their stored outputs were written "
                      "with: this run does not compare two sets of kernels (make portability on a machine with "
                      "AVX2 does)", stacklevel=1)
    if sys.platform != "linux":  # the check reads the kernel's environment from Linux's /proc
        return result
    found = started_with(notebook.kernel.km.provisioner.process.pid)
    if found != named:
        raise RuntimeError(f"{notebook.path.name}: its kernel runs with ATEN_CPU_CAPABILITY={found!r}, "
                           f"not {named!r}")
    return result


_warned: list[str] = []  # the warning above, once per run
