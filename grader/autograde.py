"""nbgrader preprocessors that make ``make grade`` trustworthy (wired in ``nbgrader_config.py``).

* :class:`RestoreDeletedTests` puts back, as a failing cell worth zero, every
  test cell a learner deleted (nbgrader restores an *edited* locked cell from
  the gradebook, but leaves a *deleted* one ungraded without a word). The
  failing cell says what happened, and ``make grade`` reports it by name.
* :class:`GuardedExecute` runs the notebook in a fenced kernel
  (:mod:`grader.sandbox`: bubblewrap around it, a memory limit, no writes
  outside the submission's folder, no reads of the instructor's files, a
  check before every test cell that the checking functions were not
  replaced; :mod:`grader.kernel`), and keeps grading when a cell kills its
  kernel: the cell scores zero, the kernel is restarted, the cells before it
  are run again, and grading goes on. It judges the hidden tests itself, out
  of the kernel's reach: a test cell's visible asserts run in the kernel, its
  hidden line (``check(slug, exercise, function)``) runs here, in the
  nbgrader process, where the cases are drawn and the reference's results
  computed and compared (:mod:`grader.judge`), after the submission's source
  was read (:mod:`grader.static`); the kernel only runs the learner's
  function on the inputs it is sent (:mod:`grader.runner`). The reference
  (``course_lib``) and the grader's assignments are not visible in the kernel.
  The release's "Check your work" cell (:mod:`grader.practice`) is not run.
* :class:`HideHiddenTests` (for ``make feedback``) removes the hidden tests
  and the integrity line from the learner's feedback and shortens error
  tracebacks to their last line, the diagnosis, so no hidden code leaks; the
  Check your work cell and its heading are left out (not graded work).
"""

from __future__ import annotations

import asyncio
import os
import re

from nbformat.v4 import new_code_cell, new_output
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Enum, Integer, List, Unicode

from .kernel import FencedKernelManager, KernelGone, TooSlow, fenced_manager, run_quietly
from .notebook import (
    HIDDEN,
    cells_of,
    grade_id,
    hidden_check,
    is_check_cell,
    is_test_cell,
    learner_code,
    without_hidden_tests,
)
from .sandbox import KERNEL_STARTUP, PROLOGUE, fenced

DELETED_MARK = "was deleted from this submission"
KERNEL_DIED = "KernelDied"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class RestoreDeletedTests(NbGraderPreprocessor):
    """Insert a zero-scoring stand-in for every autograder test cell missing from the submission."""

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        try:
            with Gradebook(info["db_url"]) as gb:
                notebook = gb.find_notebook(info["notebook"], info["assignment"])
                solution_ids = {c.name for c in notebook.solution_cells}
                tests = [(g.name, g.max_score) for g in notebook.grade_cells
                         if g.cell_type == "code" and g.name not in solution_ids]
        except (KeyError, MissingEntry):
            return nb, resources
        present = {grade_id(c) for c in nb.cells}
        for name, points in tests:
            if name in present:
                continue
            self.log.warning("test cell %s is missing from %s's submission: it scores zero", name, info.get("student"))
            cell = new_code_cell(
                source=(f"raise AssertionError('The test cell {name} {DELETED_MARK}: it scores zero. "
                        "Test cells must stay in the notebook; get a fresh copy of the exercise and keep them.')"),
                metadata={"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": name,
                                       "points": points, "schema_version": 3}, "deletable": False, "editable": False},
            )
            solution = name[len("test_"):] if name.startswith("test_") else None
            where = next((i + 1 for i, c in enumerate(nb.cells) if solution and grade_id(c) == solution), len(nb.cells))
            nb.cells.insert(where, cell)
        return nb, resources


#: the course's folders the grading kernel may read: the release, the book, the grader's kernel side, the environment
PUBLIC_DIRS = ("exercises", "chapters", "grader", ".venv")


class GuardedExecute(Execute):
    """nbgrader's Execute in a fenced kernel that survives a learner's code killing it."""

    course_root = Unicode("", help="the course folder, closed to the learner's code").tag(config=True)
    memory_mb = Integer(4096, help="address-space limit of the grading kernel, in MiB (0: none)").tag(config=True)
    public_dirs = List(Unicode(), list(PUBLIC_DIRS),
                       help="folders of the course that stay readable").tag(config=True)
    closed_dirs = List(Unicode(), ["course_lib", os.path.join("grader", "assignments")],
                       help="folders closed to the kernel even inside a readable one: the reference and the "
                            "grader's assignments").tag(config=True)
    private_dirs = List(Unicode(), [], help="more folders closed to the kernel, anywhere on the machine (a hub's "
                                           "homes and nbgrader's exchange)").tag(config=True)
    os_fence = Unicode("bwrap", help="the OS fence around the grading kernel: 'bwrap' (bubblewrap: read-only system, "
                                     "no network, the instructor's files out of view) or 'none' (the Python fence "
                                     "alone)").tag(config=True)
    secret_file = Unicode("", help="the course's grading secret (grader/secret.py): each learner's hidden cases are "
                                   "drawn from a seed derived from it, created there if missing, and hidden from "
                                   "the kernel; empty: the registry's fixed seeds").tag(config=True)
    shutdown_kernel = Enum(["graceful", "immediate"], "immediate",
                           help="how the kernel stops after the last cell: 'immediate' (its state is thrown away; "
                                "a graceful stop waits 1.5-2.5 s per notebook for its exit hooks)").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        from .secret import read_or_create

        resources = resources or {}
        workdir = resources.get("metadata", {}).get("path") or os.getcwd()
        self._student = resources.get("nbgrader", {}).get("student")
        self._secret = read_or_create(self.secret_file)[0] if self.secret_file and self._student else None
        # every submission of this nbgrader run lies under autograded/<student>/<assignment>: their kernels are
        # forked from one warm process that sees that folder, each enclosed in its own (grader.warm)
        graded = os.path.dirname(os.path.dirname(os.path.realpath(workdir)))
        with fenced(workdir, self.course_root or os.getcwd(), public_dirs=list(self.public_dirs),
                    closed_dirs=list(self.closed_dirs), memory_mb=self.memory_mb, os_fence=self.os_fence,
                    private_dirs=list(self.private_dirs) + ([self.secret_file] if self.secret_file else []),
                    warm_root=graded if os.path.basename(graded) == "autograded" else None) as fence:
            self._fence_dir, self._exchange = fence.fence_dir, fence.exchange
            if fence.bwrap is not None:
                self.kernel_manager_class = fenced_manager(fence.bwrap, fence.warm_socket)
            mine = ("--HistoryManager.enabled", "--IPKernelApp.exec_lines")
            self.extra_arguments = [a for a in self.extra_arguments if not a.startswith(mine)] + [
                "--HistoryManager.enabled=False", f"--IPKernelApp.exec_lines={KERNEL_STARTUP}"]
            for cell in nb.cells:
                if is_test_cell(cell) and not cell.source.startswith(PROLOGUE):
                    cell.source = PROLOGUE + cell.source
            self._died_at: set[int] = set()
            self._static: dict[str, dict] = {}  # what the submission's source shows, per assignment, read once
            return super().preprocess(nb, resources, km=km)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if getattr(self, "_fence_dir", None) and isinstance(km, FencedKernelManager):
            km.transport = "ipc"
            km.connection_file = os.path.join(self._fence_dir, "kernel.json")
        return km

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        from nbclient.exceptions import DeadKernelError

        if is_check_cell(cell):  # Check your work: the course's own cell, for the learner's kernel, not graded
            cell.outputs = []
            return cell
        try:
            judged = hidden_check(cell.source) if is_test_cell(cell) else None
            if judged is None:
                return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            source = cell.source
            cell.source = without_hidden_tests(source)  # the visible asserts run in the kernel; the hidden line here
            try:
                await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            finally:
                cell.source = source
            if any(o.get("output_type") == "error" for o in cell.outputs):
                return cell  # the visible asserts failed: the cell scores zero already
            failure = await self._judge(*judged)
            if failure:
                ename, evalue = failure
                cell.outputs.append(new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]))
            if failure and failure[0] == KERNEL_DIED:
                raise DeadKernelError(evalue)
            return cell
        except DeadKernelError:
            self.log.error("the kernel died in cell %d (%s); restarting it", cell_index, grade_id(cell))
            self._died_at.add(cell_index)
            cell.outputs = [new_output(
                "error", ename=KERNEL_DIED,
                evalue="the kernel died while running this cell (sys.exit in a thread, os._exit, a crash, or "
                       "memory): this cell scores zero, and grading went on in a fresh kernel",
                traceback=[f"{KERNEL_DIED}: the kernel died while running this cell"],
            )]
            await self._restart_and_replay(cell_index)
            return cell

    async def _judge(self, slug: str, exercise: str, function: str) -> tuple[str, str] | None:
        """Grade one exercise here, calling the learner's function in the kernel; ``(error name, message)`` or None."""
        from .failures import ExerciseFailure
        from .judge import FileChannel, RemoteLearner
        from .registry import check
        from .secret import learner_seed
        from .static import message

        loop = asyncio.get_running_loop()

        def run(code: str) -> None:
            asyncio.run_coroutine_threadsafe(run_quietly(self.kc, self.km, code, self.timeout or 60), loop).result()

        found = self._findings(slug).get(exercise)
        if found:  # the source shows code that could switch the checks off, or a forbidden routine: nothing runs
            return "ForbiddenCall", message(exercise, found)

        def judge() -> tuple[str, str] | None:
            learner = None
            try:
                learner = RemoteLearner(FileChannel(self._exchange, run), function)
                seed = None if self._secret is None else learner_seed(self._secret, self._student, slug, exercise)
                check(slug, exercise, learner, seed=seed)  # the learner's own cases, or the registry's
            except ExerciseFailure as exc:
                return type(exc).__name__, str(exc)
            except KernelGone as exc:
                return KERNEL_DIED, str(exc)
            except TooSlow as exc:
                return "ExerciseFailure", str(exc)
            finally:
                if learner is not None:
                    try:
                        learner.release()
                    except Exception:  # noqa: BLE001 - a dead kernel holds nothing
                        pass
            return None

        return await asyncio.to_thread(judge)

    def _findings(self, slug: str) -> dict:
        """What the submission's source shows, per exercise of the assignment (read once per notebook)."""
        from .registry import assignments
        from .static import assignment_findings

        if slug not in self._static:
            self._static[slug] = assignment_findings(learner_code(cells_of(self.nb)), assignments()[slug])
        return self._static[slug]

    def execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        from nbclient.util import run_sync

        return run_sync(self.async_execute_cell)(cell, cell_index, execution_count, store_history)

    async def _restart_and_replay(self, upto: int) -> None:
        from nbclient.util import ensure_async

        await ensure_async(self.km.restart_kernel(now=True))
        self.kc.stop_channels()
        self.kc = self.km.client()
        await ensure_async(self.kc.start_channels())
        await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))
        for i, earlier in enumerate(self.nb.cells[:upto]):  # restore the state the next cells expect
            if earlier.cell_type != "code" or i in self._died_at or is_test_cell(earlier):
                continue
            msg_id = await ensure_async(self.kc.execute(earlier.source, store_history=False, silent=True))
            await self.async_wait_for_reply(msg_id, earlier)


#: the course's folders that hold learners' work, which the grading kernel of that work can read
LEARNER_DIRS = ("submitted", "autograded", "feedback")


def grading_secret_file(course_root: str, value: str | None) -> str:
    """The grading secret's file for this course (:func:`grader.secret.secret_path`): ``GRADING_SECRET_FILE``'s
    ``value``, by default ``grading-secret`` in the course folder; refused inside a folder the grading kernel
    reads (the fence's public folders, the learners' work)."""
    from .secret import secret_path

    return secret_path(course_root, value, [*PUBLIC_DIRS, *LEARNER_DIRS])


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback without the hidden tests (their code removed, their errors cut to the diagnosis) or Check your work."""

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if not is_check_cell(cell)]  # the learner's tool, not graded work
        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            source = cell.source
            if source.startswith(PROLOGUE):
                source = source[len(PROLOGUE):]
            hidden = HIDDEN.search(source)
            source = without_hidden_tests(source).rstrip()
            if hidden:
                source += "\n# (hidden tests: not shown; their result is below)"
            cell.source = source
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {_ANSI.sub('', str(out.get('evalue', '')))}"]
        return nb, resources
