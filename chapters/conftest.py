"""nbval on the chapter notebooks: what is compared with the stored outputs.

Everything a cell prints or displays is compared (the sanitizers of
``tests/nbval_sanitize.cfg`` aside), except MyST-NB's glue records: a number a
notebook records for its prose (``course_lib.experiment.quote`` or a claim's
``glue=``) is the machine's own measurement, like the bracket of a claim's
line. The claim that comes with it is compared; the record is not.
"""

from __future__ import annotations

GLUE_MIME_PREFIX = "application/papermill.record/"


class _SkipCompare(tuple):
    """nbval's tuple of keys not compared, also matching every glue record's MIME type."""

    def __contains__(self, key) -> bool:
        return tuple.__contains__(self, key) or (isinstance(key, str) and key.startswith(GLUE_MIME_PREFIX))


def pytest_collectstart(collector):
    if type(collector).__name__ == "IPyNbFile" and hasattr(collector, "skip_compare"):
        collector.skip_compare = _SkipCompare(collector.skip_compare)
