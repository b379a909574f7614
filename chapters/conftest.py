"""nbval on the chapter notebooks: the CPU kernels they run on, and what is compared with the stored outputs.

Each notebook's kernel starts on torch's portable CPU kernels
(``ATEN_CPU_CAPABILITY=default``, :func:`tools.portability.portable_kernels`;
an environment that names its kernels keeps them) with the notebooks' own one
thread: ``make test`` runs every notebook once, and
that one run proves both that the stored outputs are what the code prints and
that they are not one processor's SIMD rounding. ``make portability`` runs the
other kernel sets and thread counts.

Everything a cell prints or displays is compared (the sanitizers of
``tests/nbval_sanitize.cfg`` aside), except MyST-NB's glue records: a number a
notebook records for its prose (``course_lib.experiment.quote`` or a claim's
``glue=``) is the machine's own measurement, like the bracket of a claim's
line. The claim that comes with it is compared; the record is not.
"""

from __future__ import annotations

import sys

import pytest

from tools.portability import portable_kernels, started_with

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
    """The first cell's set-up starts the notebook's kernel: under :func:`portable_kernels`, and checked."""
    notebook = item.parent
    if type(notebook).__name__ != "IPyNbFile" or notebook.kernel is not None:
        return (yield)
    with portable_kernels() as capability:
        result = yield
    if sys.platform != "linux":  # the check reads the kernel's environment from Linux's /proc
        return result
    found = started_with(notebook.kernel.km.provisioner.process.pid)
    if found != capability:
        raise RuntimeError(f"{notebook.path.name}: its kernel runs with ATEN_CPU_CAPABILITY={found!r}, "
                           f"not {capability!r}")
    return result
