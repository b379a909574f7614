"""The grading kernel's fence, in a plain Python process (fast; the real autograde runs are in
test_grading_integrity.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent('''
    import json, os, sys
    settings = json.loads(sys.argv[1])
    from grader import sandbox
    sandbox.install(**settings)
    results = {}
    def attempt(name, fn):
        try:
            fn()
            results[name] = "ok"
        except BaseException as exc:
            results[name] = f"{type(exc).__name__}: {exc}"
    course, work = settings["private_roots"][0], settings["workdir"]
    attempt("write_own", lambda: open(os.path.join(work, "notes.txt"), "w").write("x"))
    attempt("read_own", lambda: open(os.path.join(work, "notes.txt")).read())
    attempt("write_course", lambda: open(os.path.join(course, "owned.txt"), "w").write("x"))
    attempt("write_relative", lambda: open(os.path.join(work, "..", "..", "owned2.txt"), "w").write("x"))
    attempt("read_solutions", lambda: open(os.path.join(course, "solutions", "secret.ipynb")).read())
    attempt("list_course", lambda: os.listdir(course))
    attempt("read_exercises", lambda: open(os.path.join(course, "exercises", "public.ipynb")).read())
    attempt("remove_in_course", lambda: os.remove(os.path.join(course, "solutions", "secret.ipynb")))
    attempt("rename_out", lambda: os.rename(os.path.join(work, "notes.txt"), os.path.join(course, "moved.txt")))
    attempt("subprocess", lambda: __import__("subprocess").run(["true"]))
    attempt("system", lambda: os.system("true"))
    attempt("kill", lambda: os.kill(os.getpid(), 0))
    attempt("rlimit", lambda: __import__("resource").setrlimit(__import__("resource").RLIMIT_AS, (-1, -1)))
    attempt("ctypes_libc", lambda: __import__("ctypes").CDLL(None))
    attempt("memory", lambda: bytearray(3 * 1024 ** 3))
    attempt("torch_memory", lambda: __import__("torch").empty(2 ** 31, dtype=__import__("torch").float64))
    box = []
    sys.audit(sandbox.VERIFY_EVENT, box)
    results["verify_clean"] = box
    import torch
    torch.allclose = lambda *a, **k: True
    attempt("verify_patched", lambda: sys.audit(sandbox.VERIFY_EVENT, []))
    print(json.dumps(results))
''')


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    work = course / "autograded" / "alice" / "02-attention"
    work.mkdir(parents=True)
    (course / "solutions").mkdir()
    (course / "solutions" / "secret.ipynb").write_text("hidden tests")
    (course / "exercises").mkdir()
    (course / "exercises" / "public.ipynb").write_text("release")
    settings = {"workdir": str(work), "private_roots": [str(course)], "public_roots": [str(course / "exercises")],
                "memory_mb": 2048}
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(settings)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return course, json.loads(res.stdout.strip().splitlines()[-1])


def test_the_submission_may_use_its_own_folder(results):
    _, r = results
    assert r["write_own"] == "ok" and r["read_own"] == "ok"


@pytest.mark.parametrize("attempt", ["write_course", "write_relative", "remove_in_course", "rename_out"])
def test_nothing_outside_the_submission_can_be_changed(results, attempt):
    course, r = results
    assert r[attempt].startswith("PermissionError: grading sandbox: writing"), r[attempt]
    assert not (course / "owned.txt").exists() and (course / "solutions" / "secret.ipynb").exists()


@pytest.mark.parametrize("attempt", ["read_solutions", "list_course"])
def test_the_instructors_files_cannot_be_read(results, attempt):
    _, r = results
    assert r[attempt].startswith("PermissionError: grading sandbox: reading"), r[attempt]


def test_the_public_release_stays_readable(results):
    _, r = results
    assert r["read_exercises"] == "ok"


@pytest.mark.parametrize("attempt, what", [("subprocess", "starting a process"), ("system", "starting a process"),
                                           ("kill", "sending a signal"), ("rlimit", "changing resource limits"),
                                           ("ctypes_libc", "loading the native library")])
def test_escapes_are_refused(results, attempt, what):
    _, r = results
    assert r[attempt].startswith("PermissionError: grading sandbox: " + what), r[attempt]


@pytest.mark.parametrize("attempt", ["memory", "torch_memory"])
def test_the_memory_limit_holds(results, attempt):
    _, r = results
    assert r[attempt].startswith(("MemoryError", "RuntimeError")), r[attempt]


def test_the_integrity_check_answers_and_sees_a_patch(results):
    _, r = results
    assert r["verify_clean"] == ["verified by the grading sandbox"]
    assert "replaced torch.allclose" in r["verify_patched"], r["verify_patched"]


# --- the kernel's Python environment, wherever it lives -------------------------------------------

KERNEL_START = textwrap.dedent('''
    import json, shutil, subprocess, sys, tempfile
    from grader import sandbox, warm
    from grader.autograde import GuardedExecute
    course = sys.argv[1]
    work = tempfile.mkdtemp(dir=warm.work_root())  # the submission's scratch copy, where grading puts it
    kernel = "\\n".join([
        "import torch, grader.runner",
        "print('started')",
        "try:",
        "    from course_lib import attention",
        "    print('reference: imported', attention.__file__)",
        "except Exception as exc:",
        "    print('reference:', type(exc).__name__)",
    ])
    defaults = GuardedExecute()  # the folders grading opens and closes
    with sandbox.fenced(work, course, public_dirs=list(defaults.public_dirs), closed_dirs=list(defaults.closed_dirs),
                        memory_mb=None, os_fence="bwrap") as fence:
        res = subprocess.run([shutil.which("bwrap"), *fence.bwrap, "--", sys.executable, "-c", kernel],
                             capture_output=True, text=True, timeout=300)
    print(json.dumps({"rc": res.returncode, "out": res.stdout, "err": res.stderr[-3000:], "args": fence.bwrap}))
''')


def test_the_kernel_starts_in_an_environment_the_fence_would_hide_and_its_reference_copy_stays_closed(tmp_path):
    """The grader's Python environment lives outside the course, in a folder the OS fence empties (here under
    the temporary folder, which bubblewrap replaces): the kernel still starts, with the same interpreter; the
    copy of the reference that environment holds (installed, not linked to the checkout) stays closed."""
    import site

    from grader.sandbox import CHECKOUT, bwrap_works

    assert bwrap_works() is None, f"bubblewrap is needed here: {bwrap_works()}"
    env = tmp_path / "elsewhere" / "course-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (packages,) = env.glob("lib/python3*/site-packages")
    # the environment: this one's packages, the checkout's grader (as an editable install links it), and its
    # own installed copy of course_lib
    (packages / "course-env.pth").write_text(f"{site.getsitepackages()[0]}\n{CHECKOUT}\n")
    (packages / "course_lib").mkdir()
    (packages / "course_lib" / "__init__.py").write_text("")
    (packages / "course_lib" / "attention.py").write_text("def attention_scores(q, k):\n    return q @ k.mT\n")
    course = tmp_path / "course"
    course.mkdir()
    res = subprocess.run([str(env / "bin" / "python"), "-c", KERNEL_START, str(course)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["rc"] == 0 and "started" in out["out"], f"the kernel did not start in its environment: {out}"
    assert "reference: imported" not in out["out"], f"the environment's copy of the reference was importable: {out}"


def test_an_environment_folder_that_holds_the_course_is_not_opened(tmp_path, monkeypatch):
    """Were the environment's folder around the course (an environment in /srv, the course in /srv/course),
    opening it would open the course again: it stays as the rest of the system is, and the course closed."""
    import os

    from grader import sandbox

    course = tmp_path / "srv" / "course"
    course.mkdir(parents=True)
    monkeypatch.setattr(sandbox, "environment_roots", lambda: [str(tmp_path / "srv"), "/opt/python"])
    with sandbox.fenced(str(course), str(course), public_dirs=["exercises"], closed_dirs=[], memory_mb=None,
                        os_fence="none"):
        public = json.loads(os.environ[sandbox.ENV_VAR])["public_roots"]
    assert "/opt/python" in public and str(tmp_path / "srv") not in public, public
