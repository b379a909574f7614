"""What a grading worker and ``make grade``'s client must share: the course they grade (:func:`course_hash`),
the variables only the client may hold, and Dask's settings for the scheduler and the workers."""

from __future__ import annotations

import hashlib
from pathlib import Path

#: what a worker's grading depends on: the grading code of the clone that runs it, and the course's assignments
#: and nbgrader configuration; two graders grade alike when these hash alike
CODE_PARTS = ("grader", "classroom", "course_lib")
COURSE_PARTS = ("solutions", "nbgrader_config.py")
#: the clone this module runs from
CHECKOUT = Path(__file__).resolve().parents[2]
#: the clone a worker grades with (set by ``classroom.cluster worker`` for the worker's process)
ROOT_VARIABLE = "COURSE_GRADING_ROOT"
#: the folder of a worker's scratch courses (set by ``classroom.cluster worker``, removed when it stops)
SCRATCH_VARIABLE = "COURSE_GRADING_SCRATCH"
#: the client's variables a worker's grading must never see
CLIENT_ONLY = ("GRADEBOOK_URL", "DEADLINES", "GRADING_SECRET_FILE")
#: Dask's settings for the scheduler and the workers (an instructor's own DASK_* variables win): a grading task
#: runs for seconds, so Dask's statistical profiler (a sample every 10 ms), its 20 ms event-loop tick and its
#: half-second system monitor only cost CPU the kernels need. Measured, a scheduler and two idle workers: 2.21 s
#: of CPU in 30 s with Dask's defaults, 0.32 s with these
DASK_SETTINGS = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
}
#: the prefix of a worker's warm processes' folder (grader.warm), by which its launcher finds what a worker that
#: died left running (:func:`classroom.cluster.processes.stop_warm_processes_of`)
WARM_PREFIX = "grade-worker-warm-"


class WorkerRefused(RuntimeError):
    """A worker that must not grade for this client: another course, or the client's gradebook in reach."""


def course_hash(root: Path, code: Path = CHECKOUT) -> str:
    """A content hash of what grading reads, as 16 hex digits: :data:`CODE_PARTS` of the clone ``code`` and
    :data:`COURSE_PARTS` of the course folder ``root`` (on a worker, both its clone)."""
    digest = hashlib.sha256()
    for base, parts in ((code, CODE_PARTS), (root, COURSE_PARTS)):
        for part in parts:
            top = base / part
            files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
            for path in files:
                rel = path.relative_to(base).as_posix()
                if "__pycache__" in rel or rel.endswith(".pyc") or ".ipynb_checkpoints" in rel:
                    continue
                digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]
