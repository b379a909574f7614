"""``make hub``'s set-up (as root): the hub's folder laid out, the course copied in, the environment and the
proxy installed, and each role's Jupyter configuration written. Run again, it redoes only what changed."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from classroom.hub import exchange
from classroom.hub.layout import COURSE_ID, ROOT, HubError, Layout, digest, require_root, run

#: requirements.txt's packages the hub's environment leaves out: the book's builder and the maintainers' test
#: tools (a class runs notebooks, nbgrader and JupyterHub; nothing on the hub builds the book or runs the suite)
LEFT_OUT = ("uv", "jupyter-book", "sphinxcontrib-bibtex", "sphinx-mathjax-offline", "pytest", "pytest-xdist", "ruff",
            "nbval", "hypothesis", "playwright")


def tracked_files(repo: Path) -> list[str]:
    """The repository's tracked files (git ls-files), or every file but the build folders without git."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, check=True).stdout
        return [f for f in out.decode().split("\0") if f and (repo / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".venv", "_build", ".git", "__pycache__", "submitted", "autograded", "feedback", "exports"}
        return [str(p.relative_to(repo)) for p in repo.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(repo).parts)]


def install_course(layout: Layout, repo: Path) -> None:
    """The repository's files into course/, world-readable, replaced whole (a removed file goes too)."""
    fresh = layout.prefix / "course.new"
    shutil.rmtree(fresh, ignore_errors=True)
    for rel in tracked_files(repo):
        dest = fresh / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, dest)
    for path in [fresh, *fresh.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    old = layout.prefix / "course.old"
    shutil.rmtree(old, ignore_errors=True)
    if layout.course.exists():
        layout.course.rename(old)
    fresh.rename(layout.course)
    shutil.rmtree(old, ignore_errors=True)


def system_python() -> str:
    """The interpreter the environment is made from: HUB_PYTHON, else Debian's /usr/bin/python3."""
    exe = os.environ.get("HUB_PYTHON") or "/usr/bin/python3"
    if not Path(exe).is_file():
        raise HubError(f"no system Python at {exe}: install Debian's python3 (or name one with HUB_PYTHON=)")
    return exe


def build_env(layout: Layout, repo: Path) -> bool:
    """The course's environment in env/ from the system's Python, the same pins as .venv. True if (re)built.

    torch is the CPU wheel pip finds (pip's configuration may point at a local file of it), fetched with the
    running environment's pip and installed by uv with everything else.
    """
    python = system_python()
    version = run([python, "-c", "import sys; print(sys.version)"]).stdout
    reqs, cons, over, own = ((repo / f).read_bytes() for f in ("requirements.txt", "constraints.txt",
                                                                "hub/overrides.txt", "hub/requirements.txt"))
    key = digest(reqs, cons, over, own, version.encode())
    stamp = layout.env / ".course-env"
    if stamp.is_file() and stamp.read_text() == key:
        return False
    shutil.rmtree(layout.env, ignore_errors=True)
    run([python, "-m", "venv", "--without-pip", str(layout.env)])
    layout.wheels.mkdir(exist_ok=True)
    torch = next(line for line in reqs.decode().splitlines() if line.startswith("torch=="))
    if not list(layout.wheels.glob(f"torch-{torch.split('==')[1]}*.whl")):
        run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
             "-d", str(layout.wheels), torch])
    wheel = sorted(layout.wheels.glob(f"torch-{torch.split('==')[1]}*.whl"))[-1]
    overridden = {re.split(r"[=<>!~ ]", line)[0].lower() for line in over.decode().splitlines()
                  if line.strip() and not line.startswith("#")}
    pins = layout.prefix / "constraints.txt"
    pins.write_text("".join(line + "\n" for line in cons.decode().splitlines()
                            if re.split(r"[=<>!~ \[]", line)[0].lower() not in overridden))
    wanted = layout.prefix / "requirements.txt"
    wanted.write_text("".join(line + "\n" for line in reqs.decode().splitlines()
                              if line.strip() and not line.startswith("#")
                              and re.split(r"[=<>!~ \[]", line)[0].lower() not in LEFT_OUT + ("torch",)))
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise HubError("uv is missing from the course's .venv: run `make setup` first")
    # bytecode at install: the users cannot write it into this root-owned environment, and without it every
    # server and kernel would compile what it imports
    run([uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(layout.env / "bin" / "python"),
         str(wheel), "-r", str(wanted), "-r", str(repo / "hub" / "requirements.txt"), "-c", str(pins),
         "--override", str(repo / "hub" / "overrides.txt")])
    site = next((layout.env / "lib").glob("python3*/site-packages"))
    (site / "transformers_course.pth").write_text(f"{layout.course}\n")  # course_lib and the grader
    settings = layout.env / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "tools" / "jupyterlab" / "overrides.json", settings / "overrides.json")
    run(["chmod", "-R", "a+rX", str(layout.env)])
    stamp.write_text(key)
    return True


def install_mathjax_macro(layout: Layout, repo: Path) -> None:
    """nbconvert's MathJax macro in the hub's environment, replaced by the course's (hub/mathjax.html.j2): the
    formgrader's pages load MathJax from the instructor's own server, no page from a CDN."""
    for target in (layout.env / "share" / "jupyter" / "nbconvert" / "templates" / "base").glob("mathjax.html.j2"):
        shutil.copy(repo / "hub" / "mathjax.html.j2", target)
        target.chmod(0o644)


def install_proxy(layout: Layout, repo: Path) -> bool:
    """configurable-http-proxy from hub/package-lock.json with npm ci. True if (re)installed."""
    lock = (repo / "hub" / "package-lock.json").read_bytes()
    stamp = layout.proxy / ".course-proxy"
    key = digest(lock, (repo / "hub" / "package.json").read_bytes())
    if stamp.is_file() and stamp.read_text() == key:
        return False
    if not shutil.which("npm"):
        raise HubError("npm is missing: install Debian's nodejs and npm (tools/system_packages.sh hub)")
    shutil.rmtree(layout.proxy, ignore_errors=True)
    layout.proxy.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(repo / "hub" / name, layout.proxy / name)
    run(["npm", "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"], cwd=layout.proxy)
    run(["chmod", "-R", "a+rX", str(layout.proxy)])
    stamp.write_text(key)
    return True


def nbgrader_config(layout: Layout, role: str) -> str:
    lines = [
        f"# The course hub's nbgrader settings for the {role}s (classroom/hub/ writes this file).",
        "c = get_config()  # noqa: F821",
        f"c.Exchange.root = {str(layout.exchange)!r}",
        f"c.CourseDirectory.course_id = {COURSE_ID!r}",
    ]
    if role == "learner":
        lines += [
            "# the course's exchange (classroom/hub/exchange.py, from the hub's copy of the course): the exchange",
            "# checked before each action, a submission readable by its learner and the instructors alone",
            *(f"c.ExchangeFactory.{action} = {name!r}" for action, name in exchange.factory_settings().items()),
        ]
    else:
        lines += [
            "# The instructor's course folder (make hub-users gives them ~/course): the formgrader's course, and",
            "# nbgrader reads its nbgrader_config.py after this file: the course's exchange classes (its own",
            "# classroom/), the grading fence (which hides every home folder and the exchange, wherever grading",
            "# starts) and the feedback's filters are the course's own, the same from the hub's terminal, ssh, su or",
            "# cron.",
            "import os",
            "c.CourseDirectory.root = os.path.expanduser('~/course')",
        ]
    return "\n".join(lines) + "\n"


def server_config(repo: Path, role: str) -> dict:
    """Each role's Jupyter server settings: a kernel stopped for memory says so (classroom/hub/kernels.py); a learner's
    has no formgrader (tools/jupyterlab/learner); the instructor's may frame its own pages (the formgrader's panel)
    and shows learners' notebooks in the formgrader with their HTML sanitized (a learner's output runs no script in
    the instructor's server)."""
    path = repo / "tools" / "jupyterlab" / "learner" / "jupyter_server_config.json"
    config = json.loads(path.read_text()) if role == "learner" else {"ServerApp": {}}
    config["ServerApp"]["kernel_websocket_connection_class"] = "classroom.hub.kernels.MemoryLimitConnection"
    # kernels talk to their server over Unix sockets in the user's private runtime folder, not on random ports that
    # another learner could bind first (and read the code sent to the kernel)
    config["KernelManager"] = {"transport": "ipc"}
    if role == "learner":  # a full home says so (classroom/hub/disks.py)
        config["ServerApp"]["contents_manager_class"] = "classroom.hub.disks.FullHomeContentsManager"
    if role == "instructor":
        config["ServerApp"]["tornado_settings"] = {"headers": {"Content-Security-Policy": "frame-ancestors 'self'"}}
        config["HTMLExporter"] = {"sanitize_html": True}
    return config


def write_role_configs(layout: Layout, repo: Path) -> None:
    """etc/learner: nbgrader's learner tools only (tools/jupyterlab/learner); etc/instructor: everything, and
    a server that its own pages may frame (the formgrader's panel). Each with the course's exchange."""
    shutil.rmtree(layout.etc, ignore_errors=True)
    learner, instructor = layout.etc / "learner", layout.etc / "instructor"
    shutil.copytree(repo / "tools" / "jupyterlab" / "learner", learner)
    instructor.mkdir(parents=True)
    for role, folder in (("learner", learner), ("instructor", instructor)):
        (folder / "jupyter_server_config.json").write_text(json.dumps(server_config(repo, role), indent=2) + "\n")
        (folder / "nbgrader_config.py").write_text(nbgrader_config(layout, role))
    run(["chmod", "-R", "a+rX", str(layout.etc)])


def setup(layout: Layout, repo: Path = ROOT) -> list[str]:
    """Lay out the hub's folder; return what was done."""
    require_root()
    run([str(repo / "tools" / "system_packages.sh"), "hub"])
    done = []
    layout.prefix.mkdir(parents=True, exist_ok=True)
    layout.prefix.chmod(0o755)
    layout.state.mkdir(exist_ok=True)
    layout.state.chmod(0o700)
    # nbgrader's exchange: root's, 0755, so that nobody else can replace a course in it (classroom/hub/exchange.py);
    # make hub-users lays out the course's folder for its instructor
    done += exchange.lay_out(layout.exchange, COURSE_ID)
    install_course(layout, repo)
    done.append(f"course: {layout.course}")
    if build_env(layout, repo):
        done.append(f"environment built: {layout.env}")
    install_mathjax_macro(layout, repo)
    if install_proxy(layout, repo):
        done.append(f"proxy installed: {layout.proxy}")
    write_role_configs(layout, repo)
    token = layout.state / "course-admin-token"
    if not token.is_file():
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
    return done
