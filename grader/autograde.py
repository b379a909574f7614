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
  kernel, or runs past its time limit and ignores the interrupt (its kernel
  is then stopped): the cell scores zero, a fresh kernel runs the cells
  before it again, without it, and grading goes on. Each notebook has a
  wall-clock budget (``notebook_seconds``; the cells past it are not run and
  score zero), its outputs are bounded (:mod:`grader.bounds`: a flood is cut,
  an error is always kept), and the static reading of its code runs within a
  budget of its own (:mod:`grader.bounded`). It judges the hidden tests itself, out
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
import time

from nbformat.v4 import new_code_cell, new_output
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Enum, Integer, List, Unicode

from .bounds import Budget, OutputKeeper
from .canonical_cells import NOTES_KEY
from .enclosure import KernelLimits, left_behind
from .failures import MESSAGE, printable
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
#: a cell that did not stop after its time limit and an interrupt: its kernel was stopped
KERNEL_STUCK = "KernelStuck"
#: a cell not run because the notebook's grading budget was spent
BUDGET_SPENT = "GradingBudgetSpent"
#: seconds a kernel has to answer after a cell past its limit was interrupted, before it is stopped
STUCK_GRACE = 5.0


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class KernelStuck(RuntimeError):
    """A cell past its time limit did not stop when interrupted: its kernel must be stopped."""


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
    """nbgrader's Execute in a fenced kernel that survives a learner's code killing it.

    The kernel works in a **scratch copy** of the submission (:func:`scratch_copy`, under the fence's folder):
    the one folder of the grader's it may write, removed when the notebook is graded. Nothing it leaves there
    comes back: nbgrader writes the graded notebook from what it read, and a link, a device, a socket or any
    other file the kernel made is named in the grader's log and removed with the folder.

    The hidden tests run **after the notebook's last cell** (:meth:`_judge_pending`), each on the function as it
    was when its test cell ran (:func:`grader.runner.capture`): no learner cell runs after the judge has sent the
    kernel a hidden case, so no cell can show one.
    """

    course_root = Unicode("", help="the course folder, closed to the learner's code").tag(config=True)
    memory_mb = Integer(4096, help="memory limit of the grading kernel, in MiB: its control group's (its files in "
                                   "/tmp and shared memory counted) and each process's address space (0: none)"
                        ).tag(config=True)
    max_tasks = Integer(KernelLimits.tasks, help="processes and threads the grading kernel may have at once "
                                                 "(0: no bound)").tag(config=True)
    cpu_seconds = Integer(KernelLimits.cpu_seconds, help="CPU seconds each process of the grading kernel may use "
                                                         "(0: no bound)").tag(config=True)
    tmp_mb = Integer(KernelLimits.tmp_mb, help="size of the grading kernel's /tmp and of its /dev/shm, in MiB "
                                               "(0: no bound but memory)").tag(config=True)
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
    isolation = Enum(["groups", "process-limits"], "groups",
                     help="how each grading kernel's resources are held: 'groups' (a control group of its own for "
                          "memory, tasks and CPU: as root, or below a group delegated to the grading user; grading "
                          "refuses where none can be made) or 'process-limits' (the process limits alone, asked "
                          "for by name: a kernel's memfd and shared memory uncounted)").tag(config=True)
    secret_file = Unicode("", help="the course's grading secret (grader/secret.py): each learner's hidden cases are "
                                   "drawn from a seed derived from it, created there if missing, and hidden from "
                                   "the kernel; empty: the registry's fixed seeds").tag(config=True)
    notebook_seconds = Integer(600, help="wall-clock seconds for grading one notebook, its cells and its hidden tests "
                                         "(0: no bound). The cells stop at the budget less a quarter of it, which "
                                         "is kept for the hidden tests of what ran").tag(config=True)
    shutdown_kernel = Enum(["graceful", "immediate"], "immediate",
                           help="how the kernel stops after the last cell: 'immediate' (its state is thrown away; "
                                "a graceful stop waits 1.5-2.5 s per notebook for its exit hooks)").tag(config=True)

    def limits(self) -> KernelLimits:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        return KernelLimits(memory_mb=self.memory_mb, tasks=self.max_tasks, cpu_seconds=self.cpu_seconds,
                            cpus=float(threads) if threads.isdigit() and int(threads) > 0 else 0, tmp_mb=self.tmp_mb)

    def preprocess(self, nb, resources=None, km=None):
        import shutil
        import tempfile

        from .secret import read_or_create

        resources = resources or {}
        workdir = resources.get("metadata", {}).get("path") or os.getcwd()
        self._student = resources.get("nbgrader", {}).get("student")
        self._secret = read_or_create(self.secret_file)[0] if self.secret_file and self._student else None
        if self.os_fence == "bwrap":
            from . import warm

            base = warm.work_root()
        else:
            base = None
        scratch = tempfile.mkdtemp(prefix="submission-", dir=base)
        private = tempfile.mkdtemp(prefix="grader-private-")
        metadata = resources.setdefault("metadata", {})
        self._notes: list[str] = []
        try:
            for name, why in scratch_copy(workdir, scratch):
                self._note(f"its submission's {printable(name)} {why}: not given to the kernel")
            metadata["path"] = scratch  # the kernel's folder
            with fenced(scratch, self.course_root or os.getcwd(), public_dirs=list(self.public_dirs),
                        closed_dirs=list(self.closed_dirs), memory_mb=self.memory_mb, os_fence=self.os_fence,
                        private_dirs=list(self.private_dirs) + ([self.secret_file] if self.secret_file else []),
                        limits=self.limits(), isolation=self.isolation) as fence:
                self._fence_dir, self._exchange = fence.fence_dir, fence.exchange
                self.kernel_manager_class = fenced_manager(fence, private)
                mine = ("--HistoryManager.enabled", "--IPKernelApp.exec_lines")
                self.extra_arguments = [a for a in self.extra_arguments if not a.startswith(mine)] + [
                    "--HistoryManager.enabled=False", f"--IPKernelApp.exec_lines={KERNEL_STARTUP}"]
                for cell in nb.cells:
                    if is_test_cell(cell) and not cell.source.startswith(PROLOGUE):
                        cell.source = PROLOGUE + cell.source
                self._died_at: set[int] = set()
                self._static: dict[str, dict] = {}  # what the submission's source shows, per assignment, read once
                self._pending: list[tuple[int, tuple[str, str, str]]] = []  # hidden tests, judged after the last cell
                self._budget = Budget.starting(self.notebook_seconds)
                self._kept, self._cut_said = OutputKeeper(), set()
                for note in nb.metadata.pop(NOTES_KEY, None) or []:  # what CanonicalCells did, read before
                    if isinstance(note, str):
                        self._note(printable(note)[:300])
                return super().preprocess(nb, resources, km=km)
        finally:
            metadata["path"] = workdir
            left = left_behind(scratch) + [pair for end in _kernel_ends(private) for pair in end.get("left", [])]
            for name, kind in left:
                self._note(f"its kernel left {kind} in its folder, {printable(str(name))!r}: removed, never followed")
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.rmtree(private, ignore_errors=True)
            notebook = resources.get("nbgrader", {}).get("notebook")
            if notebook:
                write_notes(workdir, notebook, self._notes)

    def _note(self, text: str) -> None:
        """What the instructor should know of this submission's grading: the grader's log, and make grade's notes
        (:func:`read_notes`)."""
        self.log.warning("%s: %s", self._student, text)
        self._notes.append(text)

    async def async_start_new_kernel_client(self):
        """nbclient's kernel start; a kernel that does not come up has its own output (its launcher's reason, a
        traceback) in the grader's log."""
        km = self.km  # nbclient lets go of it when the start fails
        try:
            return await super().async_start_new_kernel_client()
        except Exception:
            tail = getattr(getattr(km, "output", None), "text", lambda: "")()
            ended = km.ended(wait=1.0) if isinstance(km, FencedKernelManager) else {}
            self.log.error("the grading kernel did not start (%s); its output:\n%s", ended or "no end recorded",
                           tail[-3000:] or "(none)")
            raise

    def start_new_kernel_client(self):
        from nbclient.util import run_sync

        return run_sync(self.async_start_new_kernel_client)()

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if getattr(self, "_fence_dir", None) and isinstance(km, FencedKernelManager):
            km.transport = "ipc"
            km.connection_file = os.path.join(self._fence_dir, "kernel.json")
        return km

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        try:
            return await self._execute_cell(cell, cell_index, execution_count, store_history)
        finally:
            if cell_index == len(self.nb.cells) - 1:  # the notebook has run: the hidden tests now
                await self._judge_pending()

    async def _execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        from nbclient.exceptions import DeadKernelError

        if is_check_cell(cell):  # Check your work: the course's own cell, for the learner's kernel, not graded
            if cell.cell_type == "code":
                cell.outputs = []
            return cell
        if cell.cell_type == "code" and self._budget.cells_left() <= 0:
            self._not_run(cell, cell_index)
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
            await self._capture(judged[2])
            self._pending.append((cell_index, judged))
            return cell
        except DeadKernelError:
            self._kernel_died(cell, cell_index)
            await self._restart_and_replay(cell_index)
            return cell
        except KernelStuck:
            self._kernel_died(cell, cell_index, stuck=True)
            await self._restart_and_replay(cell_index)
            return cell

    def _not_run(self, cell, cell_index: int) -> None:
        """A code cell past the notebook's budget: not run, an error in its place (a test cell scores zero)."""
        if not getattr(self, "_budget_noted", False):
            self._budget_noted = True
            self._note(f"the notebook's grading budget of {self.notebook_seconds} s was spent before cell "
                       f"{grade_id(cell) or cell_index + 1}: it and the cells after it were not run (scored zero)")
        cell.outputs = [new_output("error", ename=BUDGET_SPENT, evalue=(
            f"not run: grading this notebook took longer than its budget of {self.notebook_seconds} s; this cell "
            "scores zero"), traceback=[f"{BUDGET_SPENT}: not run, the notebook's grading budget was spent"])]

    def _get_timeout(self, cell):
        """The cell's time limit, and never past the time the notebook's cells have left (at least a second)."""
        timeout = super()._get_timeout(cell)
        left = self._budget.cells_left() if hasattr(self, "_budget") else float("inf")
        if left == float("inf"):
            return timeout
        return max(1, int(min(timeout or left, left)))

    async def _async_handle_timeout(self, timeout, cell=None):
        """nbclient interrupts a cell past its time limit; a cell that ignores the interrupt would keep the kernel
        busy for every later cell. So the kernel is asked to answer an empty request within :data:`STUCK_GRACE`
        seconds: requests are answered in order, so no answer means the cell is still running, and
        :class:`KernelStuck` has the kernel stopped (:meth:`_execute_cell`)."""
        import queue

        from nbclient.util import ensure_async

        reply = await super()._async_handle_timeout(timeout, cell)
        probe = self.kc.execute("", silent=True, store_history=False)
        deadline = time.monotonic() + STUCK_GRACE
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KernelStuck(f"the cell ran past its limit of {timeout} s and did not stop when interrupted")
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=left))
            except queue.Empty:
                continue
            if msg.get("parent_header", {}).get("msg_id") == probe:
                return reply

    def process_message(self, msg, cell, cell_index):
        """nbclient's handling of a kernel message, within the notebook's output bounds (:class:`OutputKeeper`): an
        output past them is dropped, and the cell says so once; widgets' messages are not kept."""
        kind = msg.get("msg_type", "")
        if kind.startswith("comm"):
            return None  # a widget's state is not graded work: never kept
        if kind in ("stream", "display_data", "execute_result", "update_display_data", "error"):
            if not self._kept.admit(kind, msg.get("content", {}), cell_index):
                if cell_index not in self._cut_said:
                    self._cut_said.add(cell_index)
                    self._note(f"cell {grade_id(cell) or cell_index + 1} printed more than the course keeps: its "
                               "output was cut")
                    cell.outputs.append(new_output("stream", name="stderr", text=(
                        "\n[output cut here: this cell printed more than the course keeps of a cell "
                        f"({self._kept.bounds.cell_bytes >> 20} MiB, {self._kept.bounds.notebook_bytes >> 20} MiB "
                        "for the whole notebook); the rest was not kept]\n")))
                return None
        return super().process_message(msg, cell, cell_index)

    def _kernel_died(self, cell, cell_index: int, during: str = "while running this cell", stuck: bool = False) -> None:
        """The cell's output when the kernel died, or was stopped because it would not stop (``stuck``): why,
        where the grader knows it (a limit it went over)."""
        why = ("did not stop within its time limit, even when interrupted, and was stopped" if stuck
               else self._why_the_kernel_died())
        self.log.error("the kernel %s in cell %d (%s)%s; restarting it", "was stopped" if stuck else "died",
                       cell_index, grade_id(cell), f": it {why}" if why else "")
        if why:
            self._note(f"the kernel {why}, in cell {grade_id(cell) or cell_index + 1}")
        tail = getattr(getattr(self.km, "output", None), "text", lambda: "")()
        if tail.strip():
            self.log.info("the kernel's own output, last lines:\n%s", tail[-2000:])
        self._died_at.add(cell_index)
        reason = (f"the kernel {why}" if why else
                  "the kernel died (sys.exit in a thread, os._exit, a crash, or memory)")
        ename = KERNEL_STUCK if stuck else KERNEL_DIED
        cell.outputs = [o for o in cell.outputs if during != "while running this cell"] + [new_output(
            "error", ename=ename,
            evalue=f"{reason} {during}: this cell scores zero, and grading went on in a fresh kernel without it",
            traceback=[f"{ename}: {reason} {during}"],
        )]

    def _why_the_kernel_died(self) -> str:
        from .enclosure import over_message

        ended = self.km.ended(wait=15.0) if isinstance(self.km, FencedKernelManager) else {}  # a busy machine is slow
        over = ended.get("over") if isinstance(ended.get("over"), list) else []
        return over_message([str(o) for o in over], self.limits().as_json())

    async def _capture(self, function: str) -> None:
        """Keep the learner's function as it is now, for its hidden test after the last cell."""
        try:
            await run_quietly(self.kc, self.km, CAPTURE.format(name=function), self.timeout or 60)
        except (KernelGone, TooSlow):
            pass  # the hidden test finds the function missing, or the kernel dead, and says so

    async def _judge_pending(self) -> None:
        """Every hidden test of the notebook, in order, on the functions as their test cells saw them."""
        from nbclient.exceptions import DeadKernelError

        pending, self._pending = self._pending, []
        for position, (index, judged) in enumerate(pending):
            cell = self.nb.cells[index]
            try:
                failure = await self._judge(*judged)
            except Exception as exc:  # noqa: BLE001 - the exercise's failure, never the notebook's
                self.log.exception("judging %s failed", judged[1])
                failure = ("ExerciseFailure", f"{judged[1]}: the grader could not judge your function "
                                              f"({type(exc).__name__}); this exercise scores zero")
            if not failure:
                continue
            ename, evalue = failure
            if ename == KERNEL_DIED:
                self._kernel_died(cell, index, during="while the hidden tests called your function")
                try:
                    await self._restart_and_replay(len(self.nb.cells))
                    for _, (_, _, function) in pending[position + 1:]:
                        await self._capture(function)
                except (DeadKernelError, RuntimeError, KernelGone, TooSlow) as exc:
                    self.log.error("the kernel could not be restarted after cell %d: %s", index, exc)
                    for later, _ in pending[position + 1:]:
                        self._kernel_died(self.nb.cells[later], later,
                                          during="and could not be restarted for this exercise's hidden tests")
                    return
                continue
            evalue = printable(evalue)
            evalue = evalue if len(evalue) <= MESSAGE else evalue[:MESSAGE] + " (...)"
            cell.outputs.append(new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]))

    async def _judge(self, slug: str, exercise: str, function: str) -> tuple[str, str] | None:
        """Grade one exercise here, calling the learner's function in the kernel; ``(error name, message)`` or None."""
        from .failures import ExerciseFailure
        from .judge import FileChannel, RemoteLearner
        from .registry import check
        from .secret import learner_seed
        from .static import message

        loop = asyncio.get_running_loop()

        def run(code: str) -> None:
            left = self._budget.left()
            if left <= 1:
                raise TooSlow(f"the notebook's grading budget of {self.notebook_seconds} s was spent before your "
                              "function was called: this exercise scores zero")
            limit = min(self.timeout or 60, left)
            asyncio.run_coroutine_threadsafe(run_quietly(self.kc, self.km, code, limit), loop).result()

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
            except Exception as exc:  # noqa: BLE001 - whatever the reply did to the judge: this exercise's failure
                self.log.exception("the judge failed on %s's %s", self._student, exercise)
                return "ExerciseFailure", (f"{exercise}: the grader could not judge what your function returned "
                                           f"({type(exc).__name__}); this exercise scores zero")
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
        from .bounded import OverBudget, run_bounded
        from .bounds import STATIC_READING
        from .registry import assignments
        from .static import Finding, assignment_findings

        if slug not in self._static:
            try:
                self._static[slug] = run_bounded(assignment_findings, learner_code(cells_of(self.nb)),
                                                 assignments()[slug], memory_mb=STATIC_READING.memory_mb,
                                                 seconds=STATIC_READING.seconds)
            except OverBudget as exc:  # code the grader cannot read within its budget: nothing of it is judged
                self._note(f"its code could not be read within the grader's budget ({exc}): every exercise of it "
                           "scored zero")
                unread = [Finding(0, 0, f"could not be read within the grader's budget ({exc})")]
                self._static[slug] = {ex.name: unread for ex in assignments()[slug].exercises}
        return self._static[slug]

    def execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        from nbclient.util import run_sync

        return run_sync(self.async_execute_cell)(cell, cell_index, execution_count, store_history)

    async def _restart_and_replay(self, upto: int) -> None:
        """A fresh kernel, the cells before ``upto`` run again in it (but those that killed or stuck a kernel, the
        test cells and Check your work), and the functions of the hidden tests still to judge kept again. A cell
        that is stuck on its replay is left out too, and the replay starts over without it."""
        from nbclient.util import ensure_async

        while True:
            await ensure_async(self.km.restart_kernel(now=True))
            self.kc.stop_channels()
            self.kc = self.km.client()
            await ensure_async(self.kc.start_channels())
            await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))
            try:
                for i, earlier in enumerate(self.nb.cells[:upto]):  # restore the state the next cells expect
                    if (earlier.cell_type != "code" or i in self._died_at or is_test_cell(earlier)
                            or is_check_cell(earlier)):
                        continue
                    if self._budget.cells_left() <= 0:
                        break
                    replaying = i
                    msg_id = await ensure_async(self.kc.execute(earlier.source, store_history=False, silent=True))
                    await self.async_wait_for_reply(msg_id, earlier)
            except KernelStuck:
                self._died_at.add(replaying)
                self._note(f"cell {grade_id(self.nb.cells[replaying]) or replaying + 1} did not stop when it was run "
                           "again in a fresh kernel: left out of the replay")
                continue
            break
        for _, (_, _, function) in self._pending:
            await self._capture(function)


def _kernel_ends(private: str) -> list[dict]:
    """How each kernel of a notebook ended, as its launcher wrote it in the grader's own folder."""
    import glob
    import json

    ends = []
    for path in sorted(glob.glob(os.path.join(private, "*-ended.json"))):
        try:
            with open(path) as f:
                found = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            ends.append(found)
    return ends


#: beside each graded notebook, what grading noted of it (written by the grader, read by make grade)
NOTES_SUFFIX = ".grading-notes.json"


def write_notes(folder: str, notebook: str, notes: list[str]) -> None:
    """The notes of one graded notebook, replacing whatever stood in their place (a link is never followed)."""
    import json

    path = os.path.join(folder, notebook + NOTES_SUFFIX)
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump({"notes": notes}, f)


def read_notes(folder: str, notebook: str) -> list[str]:
    """The notes :func:`write_notes` wrote for a notebook ([] if none or unreadable); a link is never followed."""
    import json
    import stat

    try:
        fd = os.open(os.path.join(folder, notebook + NOTES_SUFFIX), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    with os.fdopen(fd) as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return []
        try:
            notes = json.loads(f.read(1 << 20)).get("notes", [])
        except (ValueError, AttributeError):
            return []
    return [printable(str(n))[:500] for n in notes if isinstance(n, str)]


#: the line that keeps a learner's function for its hidden test (grader.runner.capture)
CAPTURE = "import grader.runner as _grader_runner; _grader_runner.capture({name!r})"


def scratch_copy(source: str, scratch: str) -> list[tuple[str, str]]:
    """The submission's regular files, copied into ``scratch``, its sub-folders too; what was not copied, and why.

    Nothing is followed: a link, a device, a pipe or a socket is left out, and so is a file with other names
    (a hard link), read with ``O_NOFOLLOW`` from a folder opened without following links.
    """
    skipped: list[tuple[str, str]] = []

    def copy(src_fd: int, dst: str, prefix: str) -> None:
        for entry in sorted(os.listdir(src_fd)):
            name = prefix + entry
            st = os.stat(entry, dir_fd=src_fd, follow_symlinks=False)
            kind = _kind(st.st_mode)
            if kind == "folder":
                sub = os.open(entry, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_fd)
                try:
                    os.mkdir(os.path.join(dst, entry), 0o755)
                    copy(sub, os.path.join(dst, entry), name + "/")
                finally:
                    os.close(sub)
            elif kind != "file":
                skipped.append((name, f"is {kind}"))
            elif st.st_nlink > 1:
                skipped.append((name, "is a hard link (a file with other names)"))
            else:
                fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=src_fd)
                with os.fdopen(fd, "rb") as f, open(os.path.join(dst, entry), "xb") as out:
                    while chunk := f.read(1 << 20):
                        out.write(chunk)

    top = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        copy(top, scratch, "")
    finally:
        os.close(top)
    return skipped


def _kind(mode: int) -> str:
    import stat

    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "folder"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "something that is not a file"


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
