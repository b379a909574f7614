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
* :class:`HideHiddenTests` (for ``make feedback``) removes the hidden tests
  and the integrity line from the learner's feedback and shortens error
  tracebacks to their last line, the diagnosis, so no hidden code leaks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

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


def bwrap_arguments(*, hidden: list[str], readable: list[str], writable: list[str]) -> list[str]:
    """bubblewrap's arguments for the grading kernel.

    The whole system is mounted read-only, a fresh empty /tmp is the scratch
    folder, every namespace is unshared (no network: only loopback inside, and
    nothing listens there; no other process visible), and the kernel dies with
    the grader. ``hidden`` folders (the course, the secrets in the home folder)
    are replaced by empty ones, ``readable`` folders inside them are mounted
    back read-only, and ``writable`` ones (the submission's folder, the
    kernel's connection folder) read-write.
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
    public_dirs = List(Unicode(), ["exercises", "chapters", "course_lib", "grader", ".venv"],
                       help="folders of the course that stay readable").tag(config=True)
    os_fence = Unicode("bwrap", help="the OS fence around the grading kernel: 'bwrap' (bubblewrap: read-only system, "
                                     "no network, the instructor's files out of view) or 'none' (the Python fence "
                                     "alone)").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        resources = resources or {}
        workdir = resources.get("metadata", {}).get("path") or os.getcwd()
        import course_lib

        checkout = os.path.dirname(os.path.dirname(os.path.abspath(course_lib.__file__)))
        courses = sorted({self.course_root or os.getcwd(), checkout})
        home = os.path.expanduser("~")
        roots = courses + [os.path.join(home, p) for p in HOME_SECRETS]
        settings = {
            "workdir": os.path.abspath(workdir),
            "private_roots": roots,
            "public_roots": [os.path.join(r, d) for r in courses for d in self.public_dirs],
            "memory_mb": self.memory_mb or None,
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
                hidden=roots, readable=settings["public_roots"],
                writable=[settings["workdir"], fence_dir])})
            self.kernel_manager_class = fenced
            self._fence_dir = fence_dir
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
        # the kernel inherits this process's environment: no database URL or credential may reach it
        secrets = {k: os.environ.pop(k) for k in list(os.environ) if _is_secret(k)}
        try:
            return super().preprocess(nb, resources, km=km)
        finally:
            os.environ.pop(ENV_VAR, None)
            os.environ.update(secrets)
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
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
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
