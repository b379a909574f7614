"""Grading a class on a Dask cluster: ``make grade SCHEDULER=tcp://HOST:8786`` and ``make grade-worker``.

    python -m classroom.cluster scheduler [--host 127.0.0.1] [--port 8786]
    python -m classroom.cluster worker tcp://HOST:8786 [--root DIR] [--name NAME] [--threads N]

Four modules: :mod:`~classroom.cluster.course` (what a worker and the client must share: the course's hash, the
variables only the client holds), :mod:`~classroom.cluster.worker` (what a worker keeps and each task does),
:mod:`~classroom.cluster.client` (``make grade``'s side, one :class:`classroom.grading.Grading`) and
:mod:`~classroom.cluster.processes` (starting the scheduler and a worker).

The scheduler is Dask's own (``dask scheduler``), started in a clone
(``make grade-scheduler``): it reads each task, so the course must be on its
Python path. A worker is started on any
machine that holds a clone of the same commit (``make grade-worker
SCHEDULER=...`` in that clone); ``make grade SCHEDULER=...`` then sends each
(learner, assignment) to the cluster as one task, where :func:`~classroom.cluster.worker.grade_task`
grades it as local grading does: ``nbgrader autograde`` with the course's
``nbgrader_config.py``, in the same fenced kernel (:mod:`grader.autograde`).
A worker keeps what local grading keeps for a run, for its whole run
(:class:`~classroom.cluster.worker.WorkerGrading`): one scratch course, one long-lived nbgrader process
and its warm kernels, so each task pays for grading, not for starting a
grader. The client alone writes the gradebook:

- **One course.** A worker's course (``grader/``, ``classroom/``, ``solutions/``,
  ``course_lib/`` and ``nbgrader_config.py``) is hashed (:func:`~classroom.cluster.course.course_hash`); a worker whose
  hash is not the client's is refused, with both hashes named, and is given no
  task; a task that reaches one anyway refuses itself.
- **The gradebook stays with the client.** A worker grades into a scratch
  SQLite gradebook of its own and returns the autograded folder; the client
  records the scores with nbgrader's own ``SaveAutoGrades`` into the course's
  gradebook (PostgreSQL for a class), whose address never leaves the client:
  a worker's grading runs without ``GRADEBOOK_URL``, ``DEADLINES`` or any
  password in its environment. Late penalties are the client's too
  (:func:`classroom.late.apply_late_policy`).
- **Each submission once.** A task's key names the assignment, the learner and
  a hash of their files, so the same submission sent twice is one task; a
  task whose worker dies runs again on another (Dask reschedules it; after
  three workers lost to one task it is named as the problem); the client
  records each result once, when it arrives.
- **What goes wrong is named in one line** (an unreachable scheduler, no worker
  of this course, a refused worker, a task lost), and everything else is still
  graded. A submission that kills its kernel scores zero there, as locally.

Cases per learner: the client's grading secret travels with each task into
the scratch course, mode 0600, and is gone when the task ends, so the worker
draws the learner's cases from it as the client would (with
``GRADING_SECRET_FILE=none`` on the client, the registry's seeds there too).
"""
