"""The suite's kernels are forked from a warm process (tools.forked_kernels): each is the kernel a fresh start gives.

``tests/conftest.py`` starts the warm process for every worker and points the ``python3`` kernelspec at
the launcher. These tests start kernels the way nbval and the tools do (jupyter_client, by kernel name)
and check what a notebook could notice: the folder, the path, the environment, thread counts, CPU
kernels, random state and loaded modules are a fresh kernel's; interrupts arrive; a killed kernel leaves
no process behind; and a kernel whose environment the warm process does not share, or a grading
kernel, is started afresh.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from grader.nbgrader_processes import THREAD_VARIABLES
from tools import forked_kernels

pytestmark = pytest.mark.skipif(os.environ.get(forked_kernels.SOCKET_VARIABLE) in (None, "off"),
                                reason="the suite runs on fresh kernels (COURSE_FORKED_KERNELS=off)")

REPORT = """
import json, os, random, sys
import numpy, torch
print(json.dumps({
    "pid": os.getpid(), "cwd": os.getcwd(), "path": sys.path, "argv": sys.argv[1:2],
    "threads": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
    "capability": torch.backends.cpu.get_cpu_capability(), "torch_seed": torch.initial_seed(),
    "numpy_draw": float(numpy.random.rand()), "random_draw": random.random(),
    "omp": os.environ.get("OMP_NUM_THREADS"), "parent": os.environ.get("JPY_PARENT_PID") is not None,
    "matplotlib_loaded": "matplotlib" in sys.modules, "shell": type(get_ipython()).__name__,
    "main": sys.modules["__main__"].__name__, "tmp": __import__("tempfile").gettempdir(),
}))
"""


def _report(kc, code: str = REPORT) -> dict:
    lines: list[str] = []

    def keep(msg):
        if msg["msg_type"] == "stream":
            lines.append(msg["content"]["text"])

    reply = kc.execute_interactive(code, output_hook=keep, timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    return json.loads("".join(lines))


def _started(cwd: Path, env: dict | None = None):
    return start_new_kernel(kernel_name="python3", cwd=str(cwd), **({"env": env} if env is not None else {}))


def _fresh_environment() -> dict:
    return forked_kernels.ordinary_environment(os.environ)


def test_a_forked_kernel_reports_what_a_fresh_one_does(tmp_path):
    reports = []
    for env in (None, None, _fresh_environment()):
        km, kc = _started(tmp_path, env)
        try:
            reports.append((km.provisioner.process.pid, _report(kc)))
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    (launcher_a, forked_a), (launcher_b, forked_b), (launcher_c, fresh) = reports
    assert forked_a["pid"] != launcher_a and forked_b["pid"] != launcher_b, "the kernels were not forked"
    assert fresh["pid"] == launcher_c, "the kernel without the warm process's socket was not started afresh"
    for key in ("cwd", "path", "argv", "threads", "interop", "capability", "omp", "parent",
                "matplotlib_loaded", "shell", "main", "tmp"):
        assert forked_a[key] == fresh[key], f"{key}: forked {forked_a[key]!r}, fresh {fresh[key]!r}"
    assert forked_a["cwd"] == str(tmp_path)
    # each kernel draws its own random numbers, as fresh processes do
    assert forked_a["numpy_draw"] != forked_b["numpy_draw"]
    assert forked_a["torch_seed"] != forked_b["torch_seed"]
    assert forked_a["random_draw"] != forked_b["random_draw"]


def test_an_interrupt_reaches_the_forked_kernel(tmp_path):
    km, kc = _started(tmp_path)
    try:
        # stop_on_error=False: the interrupted cell's error does not abort the request that follows it
        # (ipykernel aborts requests that arrive while it is still clearing its queue after an error)
        msg_id = kc.execute("import time; print('asleep', flush=True); time.sleep(60)", stop_on_error=False)
        while True:  # interrupt once the cell runs (it says so), not before: a busy machine may start it late
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                break
        start = time.monotonic()
        km.interrupt_kernel()
        while True:
            msg = kc.get_shell_msg(timeout=20)
            if msg["msg_type"] == "execute_reply":
                break
        assert msg["content"]["status"] == "error" and msg["content"]["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - start < 10
        assert _report(kc)["cwd"] == str(tmp_path), "the kernel did not go on after the interrupt"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":  # exited, waiting for the warm process to collect it
            return True
        time.sleep(0.1)
    return False


def test_a_killed_kernel_leaves_no_process(tmp_path):
    km, kc = _started(tmp_path)
    try:
        kernel = _report(kc)["pid"]
        child = _report(kc, "import subprocess, json; p = subprocess.Popen(['sleep', '120']); "
                            "print(json.dumps({'pid': p.pid}))")["pid"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)  # SIGKILL to the launcher: the warm process kills the kernel's group
    assert _gone(kernel), f"the forked kernel {kernel} outlived its launcher"
    assert _gone(child), f"the process {child} the kernel started outlived it"


OTHER_THREADS = "2" if os.environ.get("OMP_NUM_THREADS") == "1" else "1"


@pytest.mark.parametrize("changes", [dict.fromkeys(THREAD_VARIABLES, OTHER_THREADS), {"ATEN_CPU_CAPABILITY": "default"},
                                     {forked_kernels.GRADING_FENCE_VARIABLE: "{}"}],
                         ids=["other-thread-count", "other-cpu-kernels", "grading-kernel"])
def test_a_kernel_the_warm_process_cannot_be_is_started_afresh(tmp_path, changes):
    env = dict(os.environ, **changes)
    km, kc = _started(tmp_path, env)
    try:
        report = _report(kc)
        assert report["pid"] == km.provisioner.process.pid, "the kernel was forked, not started afresh"
        if "OMP_NUM_THREADS" in changes:
            assert report["threads"] == int(changes["OMP_NUM_THREADS"])
        if "ATEN_CPU_CAPABILITY" in changes:
            assert report["capability"] == "DEFAULT"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_refusal_names_what_differs():
    env = dict(os.environ, OMP_NUM_THREADS="7", PYTEST_CURRENT_TEST="another test")
    assert forked_kernels.refusal(env) == "its environment differs in OMP_NUM_THREADS"
    assert forked_kernels.refusal(dict(os.environ, JPY_PARENT_PID="1")) is None
    assert "grading kernel" in forked_kernels.refusal(dict(os.environ, COURSE_GRADING_SANDBOX="{}"))
