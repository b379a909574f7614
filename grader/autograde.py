"""nbgrader preprocessors that make ``make grade`` trustworthy (wired in ``nbgrader_config.py``).

* :class:`RestoreDeletedTests` puts back, as a failing cell worth zero, every
  test cell a learner deleted (nbgrader restores an *edited* locked cell from
  the gradebook, but leaves a *deleted* one ungraded without a word). The
  failing cell says what happened, and ``make grade`` reports it by name.
* :class:`GuardedExecute` runs the notebook in a fenced kernel (see
  :mod:`grader.sandbox`: memory limit, no writes outside the
  submission's folder, no reads of the instructor's files, a check before
  every test cell that the checking functions were not replaced), and keeps
  grading when a cell kills its kernel: the cell scores zero, the kernel is
  restarted, the cells before it are run again, and grading goes on.
  It judges the hidden tests itself, out of the kernel's reach: a test
  cell's visible asserts run in the kernel, its hidden line
  (``check(slug, exercise, function)``) runs here, in the nbgrader process,
  where the cases are drawn and the reference's results computed and
  compared (:mod:`grader.judge`); the kernel only runs the learner's function
  on the inputs it is sent (:mod:`grader.runner`). The reference
  (``course_lib``) and the grader's assignments are not visible in the kernel.
* :class:`HideHiddenTests` (for ``make feedback``) removes the hidden tests
  and the integrity line from the learner's feedback and shortens error
  tracebacks to their last line, the diagnosis, so no hidden code leaks.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import time

from nbformat.v4 import new_code_cell, new_output
from traitlets import Integer, List, Unicode

from jupyter_client.manager import AsyncKernelManager
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution

from .sandbox import PROLOGUE

DELETED_MARK = "was deleted from this submission"
KERNEL_DIED = "KernelDied"
ENV_VAR = "COURSE_GRADING_SANDBOX"
_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS\n?", re.S)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _is_secret(name: str) -> bool:
    upper = name.upper()
    return (upper in ("GRADEBOOK_URL", "DATABASE_URL", "JUPYTER_TOKEN") or upper.startswith("PG")
            or any(w in upper for w in ("PASSWORD", "SECRET", "TOKEN", "CREDENTIAL", "API_KEY")))


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def is_test_cell(cell) -> bool:
    return cell.cell_type == "code" and is_grade(cell) and not is_solution(cell)


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
        present = {_grade_id(c) for c in nb.cells}
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
            where = next((i + 1 for i, c in enumerate(nb.cells) if solution and _grade_id(c) == solution), len(nb.cells))
            nb.cells.insert(where, cell)
        return nb, resources


#: the OS fences GuardedExecute knows: bubblewrap, or none (the Python fence of grader.sandbox alone)
OS_FENCES = ("bwrap", "none")
#: secrets under the home folder the kernel must not see (hidden even where the home folder stays readable)
HOME_SECRETS = (".pgpass", ".pg_service.conf", ".ssh", ".netrc", ".jupyter", ".local/share/jupyter/runtime", ".aws",
                ".config/gcloud", ".docker", ".git-credentials", ".gnupg")


def hidden_check(source: str) -> tuple[str, str, str] | None:
    """``(assignment, exercise, learner's name)`` of a test cell's hidden line, or None if it has none.

    A hidden block is exactly ``from grader import check; check("slug", "name", function)``
    (``tests/grading/test_registry.py`` holds every notebook to it).
    """
    block = _HIDDEN.search(source)
    if not block:
        return None
    body = block.group(0).split("\n", 1)[1].rsplit("### END HIDDEN TESTS", 1)[0]
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return None
    if len(tree.body) != 2 or not isinstance(tree.body[0], ast.ImportFrom) or not isinstance(tree.body[1], ast.Expr):
        return None
    call = tree.body[1].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "check"
            and len(call.args) == 3 and not call.keywords and isinstance(call.args[2], ast.Name)
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args[:2])):
        return None
    return call.args[0].value, call.args[1].value, call.args[2].id


def bwrap_arguments(*, hidden: list[str], readable: list[str], writable: list[str],
                    closed: list[str] = ()) -> list[str]:
    """bubblewrap's arguments for the grading kernel.

    The whole system is mounted read-only, a fresh empty /tmp is the scratch
    folder, every namespace is unshared (no network: only loopback inside, and
    nothing listens there; no other process visible), and the kernel dies with
    the grader. ``hidden`` folders (the course, the secrets in the home folder)
    are replaced by empty ones, ``readable`` folders inside them are mounted
    back read-only, and ``writable`` ones (the submission's folder, the
    kernel's connection folder) read-write; ``closed`` folders inside a
    readable one (the grader's assignments) are emptied again.
    """
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-all", "--die-with-parent", "--setenv", "TMPDIR", "/tmp", "--setenv", "IPYTHONDIR", "/tmp/ipython",
            # the kernel sees bwrap as its parent: bwrap, not the kernel, watches the grader (--die-with-parent)
            "--setenv", "JPY_PARENT_PID", "0"]
    for path in hidden:
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    for path in readable:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in closed:
        if os.path.isdir(path):
            args += ["--tmpfs", path]
    for path in writable:
        args += ["--bind", path, path]
    return args


def bwrap_works() -> str | None:
    """None when bubblewrap can fence a process here, else why not."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (the bwrap command) is not installed"
    try:
        done = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
                               "--die-with-parent", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create its namespaces here: {done.stderr.strip() or done.returncode}"
    return None


class FencedKernelManager(AsyncKernelManager):
    """A kernel started inside bubblewrap, talking to the grader over Unix sockets in a folder both can see.

    The fence unshares the network, so the kernel's sockets cannot be TCP
    ports of the grader's host: they are files (``transport = "ipc"``) in
    ``fence_dir``, the one folder mounted read-write besides the submission's.
    Interrupts (a cell past its time limit) go as messages, since the kernel's
    process is not the grader's child but bwrap's.
    """

    fence_args: list[str] = []

    def format_kernel_cmd(self, extra_arguments=None):
        return [shutil.which("bwrap") or "bwrap", *self.fence_args, "--", *super().format_kernel_cmd(extra_arguments)]

    @property
    def kernel_spec(self):
        spec = super().kernel_spec
        if spec is not None:
            spec.interrupt_mode = "message"
        return spec


class GuardedExecute(Execute):
    """nbgrader's Execute in a fenced kernel that survives a learner's code killing it."""

    course_root = Unicode("", help="the course folder, closed to the learner's code").tag(config=True)
    memory_mb = Integer(4096, help="address-space limit of the grading kernel, in MiB (0: none)").tag(config=True)
    public_dirs = List(Unicode(), ["exercises", "chapters", "grader", ".venv"],
                       help="folders of the course that stay readable").tag(config=True)
    closed_dirs = List(Unicode(), ["course_lib", os.path.join("grader", "assignments")],
                       help="folders closed to the kernel even inside a readable one: the reference and the "
                            "grader's assignments").tag(config=True)
    os_fence = Unicode("bwrap", help="the OS fence around the grading kernel: 'bwrap' (bubblewrap: read-only system, "
                                     "no network, the instructor's files out of view) or 'none' (the Python fence "
                                     "alone)").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        resources = resources or {}
        workdir = resources.get("metadata", {}).get("path") or os.getcwd()
        import grader

        checkout = os.path.dirname(os.path.dirname(os.path.abspath(grader.__file__)))
        courses = sorted({self.course_root or os.getcwd(), checkout})
        home = os.path.expanduser("~")
        roots = courses + [os.path.join(home, p) for p in HOME_SECRETS]
        settings = {
            "workdir": os.path.abspath(workdir),
            "private_roots": roots,
            "public_roots": [os.path.join(r, d) for r in courses for d in self.public_dirs],
            "memory_mb": self.memory_mb or None,
            "closed_roots": [os.path.join(r, d) for r in courses for d in self.closed_dirs],
        }
        fence_dir = None
        if self.os_fence not in OS_FENCES:
            raise ValueError(f"GuardedExecute.os_fence = {self.os_fence!r} is not a fence the grader knows: "
                             f"use one of {list(OS_FENCES)} (GRADER_OS_FENCE in the environment)")
        if self.os_fence == "bwrap":
            why = bwrap_works()
            if why:
                raise RuntimeError(f"grading needs its OS fence and {why}: install bubblewrap (Debian: apt-get install "
                                   "bubblewrap), or grade with the Python fence alone: GRADER_OS_FENCE=none")
            fence_dir = tempfile.mkdtemp(prefix="grader-kernel-")
            settings["private_roots"] = settings["private_roots"] + [fence_dir]
            fenced = type("Fenced", (FencedKernelManager,), {"fence_args": bwrap_arguments(
                hidden=roots, readable=settings["public_roots"], closed=settings["closed_roots"],
                writable=[settings["workdir"], fence_dir])})
            self.kernel_manager_class = fenced
            self._fence_dir = fence_dir
        # the judge's requests and the kernel's replies: a folder the kernel can write (the fence's, or the
        # temporary folder the Python fence leaves writable)
        exchange = tempfile.mkdtemp(prefix="grader-exchange-", dir=fence_dir)
        self._exchange = settings["exchange"] = exchange
        os.environ[ENV_VAR] = json.dumps(settings)
        mine = ("--HistoryManager.enabled", "--IPKernelApp.exec_lines")
        self.extra_arguments = [a for a in self.extra_arguments if not a.startswith(mine)] + [
            "--HistoryManager.enabled=False",
            "--IPKernelApp.exec_lines=import grader.sandbox as _sandbox; _sandbox.install_from_env()",
        ]
        for cell in nb.cells:
            if is_test_cell(cell) and not cell.source.startswith(PROLOGUE):
                cell.source = PROLOGUE + cell.source
        self._died_at: set[int] = set()
        self._static = {}
        # the kernel inherits this process's environment: no database URL or credential may reach it
        secrets = {k: os.environ.pop(k) for k in list(os.environ) if _is_secret(k)}
        try:
            return super().preprocess(nb, resources, km=km)
        finally:
            os.environ.pop(ENV_VAR, None)
            os.environ.update(secrets)
            shutil.rmtree(exchange, ignore_errors=True)
            if fence_dir:
                shutil.rmtree(fence_dir, ignore_errors=True)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if getattr(self, "_fence_dir", None) and isinstance(km, FencedKernelManager):
            km.transport = "ipc"
            km.connection_file = os.path.join(self._fence_dir, "kernel.json")
        return km

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        from nbclient.exceptions import DeadKernelError

        try:
            judged = hidden_check(cell.source) if is_test_cell(cell) else None
            if judged is None:
                return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            source = cell.source
            cell.source = _HIDDEN.sub("", source)  # the visible asserts run in the kernel; the hidden line here
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
            self.log.error("the kernel died in cell %d (%s); restarting it", cell_index, _grade_id(cell))
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

        loop = asyncio.get_running_loop()

        def run(code: str) -> None:
            asyncio.run_coroutine_threadsafe(self._run_quietly(code), loop).result()

        found = self._findings(slug).get(exercise)
        if found:  # the source shows code that could switch the checks off, or a forbidden routine: nothing runs
            from .static import message

            return "ForbiddenCall", message(exercise, found)

        def judge() -> tuple[str, str] | None:
            learner = None
            try:
                learner = RemoteLearner(FileChannel(self._exchange, run), function)
                check(slug, exercise, learner)
            except ExerciseFailure as exc:
                return type(exc).__name__, str(exc)
            except _KernelGone as exc:
                return KERNEL_DIED, str(exc)
            except _TooSlow as exc:
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

        cache = self.__dict__.setdefault("_static", {})
        if slug not in cache:
            cells = [(c.source if c.cell_type == "code" and not is_test_cell(c) else None, _grade_id(c))
                     for c in self.nb.cells]
            cache[slug] = assignment_findings(cells, assignments()[slug])
        return cache[slug]

    async def _run_quietly(self, code: str) -> None:
        """Run one line in the kernel, outside the notebook (no output kept), and wait for it to finish."""
        from nbclient.util import ensure_async

        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False, stop_on_error=False)
        deadline = time.monotonic() + (self.timeout or 60)
        interrupted = False
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if interrupted:
                    raise _KernelGone("the kernel did not answer after an interrupt")
                await ensure_async(self.km.interrupt_kernel())
                interrupted, deadline = True, time.monotonic() + 10
                continue
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=min(remaining, 1.0)))
            except (queue.Empty, TimeoutError, asyncio.TimeoutError):
                if not await ensure_async(self.km.is_alive()):
                    raise _KernelGone("the kernel died while the hidden tests called your function") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                if interrupted:
                    raise _TooSlow(f"your function ran longer than {self.timeout or 60} s on the hidden cases "
                                   "and was stopped: this exercise scores zero")
                return

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


class _KernelGone(RuntimeError):
    """The kernel died while the judge was calling the learner's function."""


class _TooSlow(RuntimeError):
    """The learner's function did not return within the cell time limit."""


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback without the hidden tests: their code removed, their errors cut to the diagnosis."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            source = cell.source
            if source.startswith(PROLOGUE):
                source = source[len(PROLOGUE):]
            hidden = _HIDDEN.search(source)
            source = _HIDDEN.sub("", source).rstrip()
            if hidden:
                source += "\n# (hidden tests: not shown; their result is below)"
            cell.source = source
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {_ANSI.sub('', str(out.get('evalue', '')))}"]
        return nb, resources
