"""``make grade SCHEDULER=...``'s side of the cluster: :class:`ClusterGrading`, one
:class:`classroom.grading.Grading` that sends every (learner, assignment) to the cluster as a task and records
what comes back (:func:`record`). The client alone writes the gradebook."""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from classroom.cluster.course import WorkerRefused, course_hash
from classroom.cluster.worker import grade_task, worker_course_hash
from classroom.gradebook import gradebook_url
from classroom.grading import GradingUnavailable
from classroom.intake import submitted_at

#: seconds the client waits for a worker of its course before it gives up on what is left
NO_WORKER_PATIENCE = 60.0
#: seconds between the client's questions to the scheduler, while no result comes, whether a worker of its course
#: is left (the answer lists every worker: asked four times a second, it cost the graders' CPU)
WAIT_SECONDS = 2.0


class ClusterUnavailable(GradingUnavailable):
    """The cluster cannot grade this course (unreachable, or no worker of this course); nothing was graded."""


@dataclass
class ClusterGrading:
    """``make grade SCHEDULER=...``: every (learner, assignment) a task on the cluster, recorded here."""

    root: Path
    scheduler: str
    timeout: int | None = None
    secret: bytes | None = None
    client: object = None
    course: str = ""
    workers: list[str] = field(default_factory=list)
    #: (learner, assignment) -> the worker that graded it: each recorded once
    recorded: dict[tuple[str, str], str] = field(default_factory=dict)

    def open(self) -> None:
        """Connect and check the workers; :class:`ClusterUnavailable` when the cluster cannot grade this course."""
        from distributed import Client

        self.course = course_hash(self.root)
        try:
            self.client = Client(self.scheduler, timeout="10s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailable(f"SCHEDULER={self.scheduler} cannot be reached ({exc}); nothing was "
                                     "graded") from None
        self.workers = self._matching_workers(report=True)
        if self.workers:  # Dask's scheduler reads each task, so it too must import this module
            probe = self.client.submit(worker_course_hash, workers=self.workers, pure=False)
            try:
                probe.result(timeout=60)
            except Exception as exc:
                self.close()
                raise ClusterUnavailable(
                    f"the scheduler at SCHEDULER={self.scheduler} cannot run the course's tasks "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0]}): start it with `make grade-scheduler` "
                    "in a clone of this commit, which puts the course on its Python path; nothing was graded"
                ) from None
        if not self.workers:
            self.close()
            raise ClusterUnavailable(f"no worker at SCHEDULER={self.scheduler} grades this course "
                             f"({self.course}): start one with `make grade-worker SCHEDULER={self.scheduler}` in a "
                             "clone of this commit; nothing was graded")

    def _matching_workers(self, report: bool) -> list[str]:
        hashes = self.client.run(worker_course_hash, on_error="return")
        names = {a: w.get("name", a) for a, w in self.client.scheduler_info(n_workers=-1)["workers"].items()}
        good = []
        for address, theirs in sorted(hashes.items()):
            if theirs == self.course:
                good.append(address)
            elif report:
                why = (f"its course is {theirs}, this clone's is {self.course}" if isinstance(theirs, str)
                       else f"it could not hash its course ({theirs!r})")
                print(f"make grade: worker {names.get(address, address)} at {address} is refused: {why} (start "
                      "it from a clone of this commit)", file=sys.stderr)
        return good

    def _workers_alive(self) -> bool:
        """Whether a worker of this course is still in the cluster (asks the scheduler, not the workers)."""
        return bool(set(self.client.scheduler_info(n_workers=-1)["workers"]) & set(self.workers))

    def describe(self) -> str:
        """How this run grades, for the line printed per assignment."""
        return f"graded on {len(self.workers)} worker(s) at {self.scheduler}"

    def warm_up(self) -> None:
        """Nothing to start here: the workers are up already (LocalGrading starts its nbgrader processes)."""

    def peak_memory_mb(self) -> float | None:
        """Grading runs on the workers: nothing of it here."""
        return None

    def close(self) -> None:
        """Disconnect from the scheduler (the workers go on)."""
        if self.client is not None:
            self.client.close()
            self.client = None

    def grade(self, assignment: str, students: list[str], everyone: list[str]) -> list[tuple[str, str]]:
        """Grade ``students`` on the cluster and record each result; returns (learner, why) for what failed."""
        from tqdm import tqdm

        del everyone  # a task holds one learner's files: the rest of the class is never on the worker
        futures = {}
        for student in students:
            folder = self.root / "submitted" / student / assignment
            files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
                     if p.is_file() and ".ipynb_checkpoints" not in p.parts}
            digest = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in files.items())).hexdigest()[:16]
            future = self.client.submit(grade_task, assignment, student, files, self.course, self.timeout,
                                        self.secret, key=f"grade-{assignment}-{student}-{digest}",
                                        workers=self.workers, allow_other_workers=False, pure=False, retries=0)
            futures[future] = student
        failed: list[tuple[str, str]] = []
        remaining = dict(futures)
        waiting_since = None
        with tqdm(total=len(futures), desc=assignment, unit="submission", file=sys.stderr, disable=None) as bar:
            asked = time.monotonic()
            while remaining:
                done = [f for f in remaining if f.done()]  # the futures' own state: no question to the scheduler
                if not done:
                    time.sleep(0.1)
                    if time.monotonic() - asked < WAIT_SECONDS:
                        continue
                    asked = time.monotonic()
                    if self._workers_alive():
                        waiting_since = None
                    elif waiting_since is None:
                        waiting_since = time.monotonic()
                    elif time.monotonic() - waiting_since > NO_WORKER_PATIENCE:
                        for future, student in remaining.items():
                            future.cancel()
                            failed.append((student, "no worker of this course was left to grade it"))
                        break
                    continue
                for future in done:
                    student = remaining.pop(future)
                    why = self._finish(assignment, student, future)
                    if why:
                        failed.append((student, why))
                    bar.update()
        by_worker = Counter(w.split(" (")[0] for (_, a), w in self.recorded.items() if a == assignment)
        print(f"{assignment}: recorded {sum(by_worker.values())} submission(s) from the cluster: "
              + (", ".join(f"{w} ({n})" for w, n in sorted(by_worker.items())) or "none"))
        return failed

    def _finish(self, assignment: str, student: str, future) -> str | None:
        """Record one task's result; the reason it failed, or None."""
        from distributed import KilledWorker

        try:
            result = future.result()
        except KilledWorker as exc:
            return f"the cluster lost {exc.last_worker.name if exc.last_worker else 'its worker'} three " \
                   "times grading it: left ungraded"
        except WorkerRefused as exc:
            return str(exc)
        except Exception as exc:  # the task's own error, as the worker raised it
            return f"its task failed on the cluster ({type(exc).__name__}: {exc})"
        notebook = [n for n in result["files"] if n.endswith(".ipynb")]
        if result["returncode"] != 0 or not notebook:
            print(result["log"], file=sys.stderr)
            return f"nbgrader could not grade it on worker {result['worker']} (its log is above)"
        if (student, assignment) in self.recorded:
            raise RuntimeError(f"{student}'s {assignment} came back twice")  # never: each future is read once
        record(self.root, assignment, student, result["files"])
        self.recorded[(student, assignment)] = result["worker"]
        return None


def record(root: Path, assignment: str, student: str, files: dict[str, bytes]) -> None:
    """A worker's autograded folder into the course, and its scores into the gradebook, as autograde does.

    The folder replaces the earlier one (autograde's ``--force``); the submission gets its time from its
    timestamp.txt; nbgrader's ``SaveAutoGrades`` writes each graded cell's score and comment.
    """
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    folder = root / "autograded" / student / assignment
    scratch = folder.with_name(f".{assignment}.incoming")
    shutil.rmtree(scratch, ignore_errors=True)
    for rel, data in files.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_bytes(data)
    shutil.rmtree(folder, ignore_errors=True)
    scratch.rename(folder)
    url = gradebook_url(root)
    timestamp = submitted_at(root, student, assignment)
    with Gradebook(url) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's autoflush notes on nbgrader's own models, as in autograde
        gb.update_or_create_student(student)
        gb.update_or_create_submission(assignment, student, **({"timestamp": timestamp} if timestamp else {}))
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        resources = {"nbgrader": {"notebook": path.stem, "assignment": assignment, "student": student,
                                  "db_url": url}}
        SaveAutoGrades().preprocess(nb, resources)
