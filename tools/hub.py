"""`make hub`: the course's JupyterHub on one machine, with nbgrader's exchange, for a class.

    python -m tools.hub setup  [--prefix DIR]             lay out the hub's folder (as root)
    python -m tools.hub users  --roster CSV [--instructor NAME] [--prefix DIR]
    python -m tools.hub start  [--prefix DIR] [--port 8000] [--auth pam|shared] [--idle-minutes 60] [--url URL]
                               [--memory 2G] [--cpus 1] [--tasks 512] [--class-memory SIZE]
                               [--instructor-memory 6G] [--limits none]
    python -m tools.hub stop   [--prefix DIR]

The shape of The Littlest JupyterHub, with the repository's own files, under one folder (the prefix,
``/opt/transformers-course``; hub/jupyterhub_config.py says what each sub-folder holds), one module per concern:
this one (set-up, accounts, start and stop), :mod:`tools.hub_exchange` (nbgrader's exchange),
:mod:`tools.hub_cgroups` (the limits and the hub's processes), :mod:`tools.hub_spawner` (a user's server),
:mod:`tools.hub_kernels` (a kernel stopped for memory says so) and :mod:`tools.learner_files` (what is taken from a
learner):

* **setup** installs what is missing (Debian packages as root: Node.js for the proxy, bubblewrap for the
  grading fence), copies the repository's tracked files into ``course/`` (read-only for everyone), builds
  ``env/`` from the system's Python (a virtual environment made from an interpreter inside root's home
  folder cannot be run by other users) with the same pins as ``.venv`` (less the book's builder and the
  test tools, :data:`LEFT_OUT`), installs configurable-http-proxy
  from hub/package-lock.json with ``npm ci``, makes the exchange's root (root's, 0755), and writes each role's
  Jupyter configuration: learners get the Assignments tab and Validate, the instructor adds the formgrader,
  which JupyterLab shows in a frame of the instructor's own server (JupyterHub forbids frames on every server;
  only the instructor's allows its own). Run again, it redoes only what changed.
* **users** adds learners from a class list (``id,name,email``) as Unix accounts whose home folders only
  they can read (mode 0700), in the learners' group, each with a first password written to
  ``state/passwords.csv`` (root only) for the instructor to hand out; ``--instructor`` adds the
  instructor, with a copy of the course to grade in (``~/course``, with ``hub.toml`` naming the exchange) and the
  exchange's course folder. A bad row (an invalid or duplicate id, an account that exists but is not the
  course's) is named and skipped; nothing is half-created.
* **start** stops whatever a killed hub left running, refuses a port another process holds (naming it), makes
  the hub's control groups with the learners' limits, starts JupyterHub in the background (its log:
  ``state/jupyterhub.log``), each user's server on a subdomain of ``--url``, and waits until its own proxy
  answers; **stop** stops it and everything it started, whether it still runs or was killed. Users,
  submissions, grades and feedback stay: ``start`` again and everything is there.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import grp
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tools import hub_exchange
from tools.course_book import ROOT
from tools.hub_cgroups import CgroupError, HubGroups, Limits, default_limits, parse_size
from tools.roster import Entry, RosterError, read_roster

DEFAULT_PREFIX = Path("/opt/transformers-course")
COURSE_ID = "transformers-course"
LEARNERS, INSTRUCTORS = "course-learners", "course-instructors"
#: a Unix account name as Debian's useradd accepts it by default
USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
#: requirements.txt's packages the hub's environment leaves out: the book's builder and the maintainers' test
#: tools (a class runs notebooks, nbgrader and JupyterHub; nothing on the hub builds the book or runs the suite)
LEFT_OUT = ("uv", "jupyter-book", "sphinxcontrib-bibtex", "sphinx-mathjax-offline", "pytest", "pytest-xdist", "ruff",
            "nbval", "hypothesis", "playwright")
START_S = 120


class HubError(RuntimeError):
    """Something the hub needs is missing or wrong; the message names it."""


@dataclass(frozen=True)
class Layout:
    """The hub's folders under its prefix."""

    prefix: Path

    env = property(lambda self: self.prefix / "env")
    course = property(lambda self: self.prefix / "course")
    proxy = property(lambda self: self.prefix / "proxy")
    etc = property(lambda self: self.prefix / "etc")
    exchange = property(lambda self: self.prefix / "exchange")
    state = property(lambda self: self.prefix / "state")
    wheels = property(lambda self: self.prefix / "wheels")


@dataclass(frozen=True)
class Groups:
    learners: str = LEARNERS
    instructors: str = INSTRUCTORS


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        raise HubError(f"{' '.join(map(str, cmd))} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return res


def require_root() -> None:
    if os.geteuid() != 0:
        raise HubError("the hub is set up and run as root (it creates accounts and starts servers as them): "
                       "run it with sudo")
    if not shutil.which("apt-get") and not shutil.which("useradd"):
        raise HubError("the hub needs a Debian or Ubuntu machine (apt-get and useradd are missing)")


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


# --- setup ----------------------------------------------------------------------------------------

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
    reqs, cons, over = ((repo / f).read_bytes() for f in ("requirements.txt", "constraints.txt", "hub/overrides.txt"))
    key = digest(reqs, cons, over, version.encode())
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
         str(wheel), "-r", str(wanted), "-c", str(pins), "--override", str(repo / "hub" / "overrides.txt")])
    site = next((layout.env / "lib").glob("python3*/site-packages"))
    (site / "transformers_course.pth").write_text(f"{layout.course}\n")  # course_lib and the grader
    settings = layout.env / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "tools" / "jupyterlab" / "overrides.json", settings / "overrides.json")
    run(["chmod", "-R", "a+rX", str(layout.env)])
    stamp.write_text(key)
    return True


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
        f"# The course hub's nbgrader settings for the {role}s (tools/hub.py writes this file).",
        "c = get_config()  # noqa: F821",
        f"c.Exchange.root = {str(layout.exchange)!r}",
        f"c.CourseDirectory.course_id = {COURSE_ID!r}",
    ]
    if role == "learner":
        lines += [
            "# the course's exchange (tools/hub_exchange.py, from the hub's copy of the course): the exchange checked",
            "# before each action, a submission readable by its learner and the instructors alone",
            *(f"c.ExchangeFactory.{action} = {name!r}" for action, name in hub_exchange.factory_settings().items()),
        ]
    else:
        lines += [
            "# The instructor's course folder (make hub-users gives them ~/course): the formgrader's course, and",
            "# nbgrader reads its nbgrader_config.py after this file: the course's exchange classes (its own tools/),",
            "# the grading fence (which hides every home folder and the exchange, wherever grading starts) and the",
            "# feedback's filters are the course's own, the same from the hub's terminal, ssh, su or cron.",
            "import os",
            "c.CourseDirectory.root = os.path.expanduser('~/course')",
        ]
    return "\n".join(lines) + "\n"


def server_config(repo: Path, role: str) -> dict:
    """Each role's Jupyter server settings: a kernel stopped for memory says so (tools/hub_kernels.py); a learner's
    has no formgrader (tools/jupyterlab/learner); the instructor's may frame its own pages (the formgrader's panel)
    and shows learners' notebooks in the formgrader with their HTML sanitized (a learner's output runs no script in
    the instructor's server)."""
    path = repo / "tools" / "jupyterlab" / "learner" / "jupyter_server_config.json"
    config = json.loads(path.read_text()) if role == "learner" else {"ServerApp": {}}
    config["ServerApp"]["kernel_websocket_connection_class"] = "tools.hub_kernels.MemoryLimitConnection"
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
    # nbgrader's exchange: root's, 0755, so that nobody else can replace a course in it (tools/hub_exchange.py);
    # make hub-users lays out the course's folder for its instructor
    done += hub_exchange.lay_out(layout.exchange, COURSE_ID)
    install_course(layout, repo)
    done.append(f"course: {layout.course}")
    if build_env(layout, repo):
        done.append(f"environment built: {layout.env}")
    if install_proxy(layout, repo):
        done.append(f"proxy installed: {layout.proxy}")
    write_role_configs(layout, repo)
    token = layout.state / "course-admin-token"
    if not token.is_file():
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
    return done


# --- users ----------------------------------------------------------------------------------------

def read_class_list(path: Path) -> tuple[list[Entry], list[str]]:
    """The class list's learners who can be accounts, and why each other row is skipped (named by line)."""
    try:
        entries, unusable = read_roster(path)
    except RosterError as exc:
        raise HubError(str(exc)) from None
    problems = [(u.line, f"line {u.line}: id {u.id!r} is already on line {u.first}: skipped") for u in unusable
                if u.first is not None]
    rows = []
    for e in [Entry(u.line, "") for u in unusable if u.first is None] + entries:
        if not USERNAME.match(e.id):
            problems.append((e.line, f"line {e.line}: id {e.id!r} is not an account name (lower-case letters, "
                                     "digits, '_' and '-', starting with a letter or '_', at most 32): skipped"))
        elif any(ch in e.name for ch in ":,\n"):
            problems.append((e.line, f"line {e.line}: the name {e.name!r} holds ':' or ',', which account records "
                                     "cannot: skipped"))
        else:
            rows.append(e)
    return rows, [message for _, message in sorted(problems)]


def ensure_group(name: str) -> None:
    try:
        grp.getgrnam(name)
    except KeyError:
        run(["groupadd", "--system", name])


def in_group(user: str, group: str) -> bool:
    try:
        return user in grp.getgrnam(group).gr_mem
    except KeyError:
        return False


def create_account(ident: str, name: str, group: str) -> str:
    """A new account in ``group`` with a private home and a first password (returned); all or nothing."""
    run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", name or ident, "--groups", group,
         ident])
    try:
        home = Path(pwd.getpwnam(ident).pw_dir)
        home.chmod(0o700)  # Debian's default 0755 would let classmates read each other's work
        password = secrets.token_urlsafe(12)
        run(["chpasswd"], input=f"{ident}:{password}\n")
        return password
    except BaseException:
        subprocess.run(["userdel", "--remove", ident], capture_output=True)
        raise


def record_passwords(layout: Layout, new: dict[str, str]) -> None:
    path = layout.state / "passwords.csv"
    old = {}
    if path.is_file():
        old = {r["id"]: r["password"] for r in csv.DictReader(path.open())}
    old.update(new)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "password"])
        w.writerows(sorted(old.items()))


def give_course_copy(layout: Layout, user: str) -> Path:
    """The instructor's own course folder, ~/course: the course's files, theirs to grade in, with hub.toml naming
    the hub's exchange (the course's nbgrader_config.py reads it, wherever nbgrader runs from: see there)."""
    entry = pwd.getpwnam(user)
    course = Path(entry.pw_dir) / "course"
    if not course.exists():
        shutil.copytree(layout.course, course)
        run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(course)])
        run(["chmod", "-R", "u+w", str(course)])
    settings = course / "hub.toml"
    if settings.is_symlink() or settings.exists() and settings.stat().st_uid not in (0, entry.pw_uid):
        raise HubError(f"{settings} is a link or belongs to another account: remove it and run make hub-users again")
    settings.write_text(f"# The hub this copy of the course belongs to (make hub-users writes this file).\n"
                        f"exchange = {json.dumps(str(layout.exchange))}\n")
    os.chown(settings, entry.pw_uid, entry.pw_gid)
    return course


def instructor_course(layout: Layout, user: str, groups: Groups) -> list[str]:
    """The instructor's ~/course and the exchange's course folder (theirs, unless an earlier instructor's)."""
    lines = [f"{user}'s course folder: {give_course_copy(layout, user)}"]
    laid = hub_exchange.lay_out(layout.exchange, COURSE_ID, user, groups.instructors)
    return lines + [f"exchange: {line}" for line in laid]


def add_users(layout: Layout, roster: Path | None, instructor: str | None, groups: Groups = Groups()) -> list[str]:
    """Create the accounts; return one line per row: created, already there, or why it was skipped."""
    require_root()
    ensure_group(groups.learners)
    ensure_group(groups.instructors)
    rows, report = read_class_list(roster) if roster else ([], [])
    wanted = [(r, groups.learners) for r in rows]
    if instructor:
        if not USERNAME.match(instructor):
            raise HubError(f"--instructor {instructor!r} is not an account name (lower-case letters, digits, '_' "
                           "and '-', starting with a letter or '_')")
        wanted.insert(0, (Entry(0, instructor, instructor, ""), groups.instructors))
    passwords = {}
    for row, group in wanted:
        where = f"line {row.line}: " if row.line else "instructor: "
        try:
            pwd.getpwnam(row.id)
            exists = True
        except KeyError:
            exists = False
        if exists:
            if in_group(row.id, group):
                report.append(f"{where}{row.id} is already on the hub")
                if group == groups.instructors:
                    report += [f"{where}{line}" for line in instructor_course(layout, row.id, groups)]
            else:
                report.append(f"{where}{row.id} is an existing account that is not the course's: skipped")
            continue
        try:
            passwords[row.id] = create_account(row.id, row.name, group)
        except HubError as exc:
            report.append(f"{where}{row.id} could not be created ({str(exc).splitlines()[0]}): skipped")
            continue
        report.append(f"{where}{row.id} created")
        if group == groups.instructors:
            report += [f"{where}{line}" for line in instructor_course(layout, row.id, groups)]
    if passwords:
        record_passwords(layout, passwords)
        report.append(f"first passwords: {layout.state / 'passwords.csv'} (root only)")
    return report


# --- start and stop -------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_holder(port: int) -> tuple[int | None, str] | None:
    """Who listens on TCP ``port`` (any address): (process id or None, a description naming its user), or None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as fh:
            for line in list(fh)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(fields[9])
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        pid = int(entry.name)
                        user = pwd.getpwuid(entry.stat().st_uid).pw_name
                        argv = (entry / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ").strip()
                        return pid, f"process {pid} of {user} ({argv[:120]})"
    return None, "a process this machine does not show"


def port_is_free(port: int) -> bool:
    """Whether a listener could bind ``port`` now (on every address, as the proxy might)."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        with socket.socket(family) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no holder
            try:
                s.bind((address, port))
            except OSError as exc:
                if exc.errno == errno.EADDRNOTAVAIL:  # no IPv6 here
                    continue
                return False
    return True


def hub_environment(layout: Layout, port: int, auth: str, idle_s: int, groups: Groups,
                    api_port: int, proxy_api_port: int, limits: Limits | None, public_url: str) -> dict[str, str]:
    token = (layout.state / "course-admin-token").read_text().strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "COURSE_HUB", "GRADEBOOK"))}
    env.update(COURSE_HUB_PREFIX=str(layout.prefix), COURSE_HUB_PORT=str(port), COURSE_HUB_AUTH=auth,
               COURSE_HUB_IDLE_S=str(idle_s), COURSE_HUB_LEARNERS=groups.learners,
               COURSE_HUB_INSTRUCTORS=groups.instructors, COURSE_HUB_API_PORT=str(api_port),
               COURSE_HUB_PROXY_API_PORT=str(proxy_api_port), COURSE_HUB_ADMIN_TOKEN=token,
               COURSE_HUB_URL=public_url, PATH=f"{layout.env / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    if limits is not None:
        env["COURSE_HUB_LIMITS"] = json.dumps(limits.to_dict())
    env.pop("VIRTUAL_ENV", None)
    return env


#: start()'s limits when none are given: default_limits() for this machine
MACHINE = "machine"


def start(layout: Layout, port: int = 8000, auth: str = "pam", idle_s: int = 3600, groups: Groups = Groups(),
          api_port: int = 8081, proxy_api_port: int = 8001, limits: Limits | None | str = MACHINE,
          public_url: str | None = None, report: list[str] | None = None) -> int:
    """Start JupyterHub in the background; return its process id once it answers on ``port`` and what listens there
    is its own proxy.

    Whatever a killed hub left running is stopped first (its lines go to ``report``), so that a restart runs one
    proxy and one culler. A port another process holds is refused, naming it. ``limits``: each learner's (and the
    class's) memory, CPU and processes (:mod:`tools.hub_cgroups`); None runs without (not for a class).
    ``public_url``: where browsers reach the hub (default ``http://localhost:<port>``); each user's server is on a
    subdomain of it, ``<user>.<host>``.
    """
    require_root()
    report = report if report is not None else []
    if auth not in ("pam", "shared"):
        raise HubError(f"--auth {auth!r} is not a log-in the hub offers: use pam (the machine's accounts) or "
                       "shared (one password for everyone, for a demo)")
    if not (layout.env / "bin" / "jupyterhub").is_file():
        raise HubError(f"no hub at {layout.prefix}: run `make hub` (tools/hub.py setup) first")
    pid_file = layout.state / "hub.pid"
    if pid_file.is_file() and alive(int(pid_file.read_text())):
        raise HubError(f"the hub is already running (process {pid_file.read_text().strip()}): make hub-stop first")
    left = stop(layout)
    if left:
        report += [f"stopped what an earlier hub left running: {line}" for line in left]
    for name, number in (("HUB_PORT", port), ("the hub's API port", api_port), ("the proxy's API port",
                                                                                 proxy_api_port)):
        if not port_is_free(number):
            holder = port_holder(number)
            raise HubError(f"{name} {number} is held by {holder[1] if holder else 'another socket'}: the hub does not "
                           "start where something else could answer in its place; stop that process or choose another "
                           "port (HUB_PORT=)")
    if limits == MACHINE:
        limits = default_limits()
    hub_groups = HubGroups(layout.prefix)
    if limits is not None:
        try:
            hub_groups.create(limits)
        except (CgroupError, OSError) as exc:
            raise HubError(f"the learners' limits cannot be held on this machine: {exc}. Start with HUB_LIMITS=none "
                           "to run without them (not for a class)") from None
        report.append(f"limits: {limits.describe()}")
    if auth == "shared":
        for name, size in (("shared-password", 12), ("shared-admin-password", 32)):
            secret = layout.state / name
            if not secret.is_file():
                fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(secrets.token_urlsafe(size) + "\n")
    public_url = public_url or f"http://localhost:{port}"
    env = hub_environment(layout, port, auth, idle_s, groups, api_port, proxy_api_port, limits, public_url)
    procs_files = hub_groups.procs_files("hub") if limits is not None else []

    def into_hub_group():  # the hub, and the proxy and services it starts, in the hub's own group
        for procs in procs_files:
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))

    log = open(layout.state / "jupyterhub.log", "ab")
    proc = subprocess.Popen([str(layout.env / "bin" / "jupyterhub"), "-f",
                             str(layout.course / "hub" / "jupyterhub_config.py")],
                            cwd=layout.state, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=into_hub_group)
    pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stop(layout)
            raise HubError(f"JupyterHub stopped at start ({proc.returncode}); the end of its log, "
                           f"{layout.state / 'jupyterhub.log'}:\n{tail(layout.state / 'jupyterhub.log')}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/hub/health", timeout=2) as resp:
                answered = resp.status == 200
        except (urllib.error.URLError, OSError):
            answered = False
        if answered:
            holder = port_holder(port)
            ours = hub_processes(layout, proc.pid)
            if holder is None or holder[0] not in ours:
                stop(layout)
                raise HubError(f"port {port} answers, but not from the hub's proxy: it is held by "
                               f"{holder[1] if holder else 'nobody this machine shows'}; the hub was stopped")
            return proc.pid
        time.sleep(0.5)
    stop(layout)
    raise HubError(f"JupyterHub did not answer on port {port} within {START_S} s; its log:\n"
                   f"{tail(layout.state / 'jupyterhub.log')}")


def hub_processes(layout: Layout, hub_pid: int | None = None) -> set[int]:
    """The processes the hub started: its control groups' (tools/hub_cgroups.py), or, for a hub started without
    limits, whatever runs a program from the hub's folder; and the hub's descendants, given its process."""
    groups = HubGroups(layout.prefix)
    found = groups.pids() if groups.exists() else set(processes_under(layout.prefix))
    if hub_pid is not None:
        found |= {hub_pid} | descendants(hub_pid)
    return found


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a killed one not yet reaped, a zombie, does not: it is reaped if it is ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def tail(path: Path, lines: int = 30) -> str:
    return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:]) if path.is_file() else ""


def stop(layout: Layout, wait_s: float = 30) -> list[str]:
    """Stop the hub and everything it started (proxy, services, every user's server and what those started),
    whether the hub still runs or was killed. One line per thing stopped; empty if nothing ran."""
    said = []
    pid_file = layout.state / "hub.pid"
    pid = int(pid_file.read_text()) if pid_file.is_file() else None
    if pid is not None and alive(pid):
        os.kill(pid, signal.SIGTERM)  # the hub stops its servers, its services and its proxy itself
        deadline = time.monotonic() + wait_s
        while alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        said.append(f"the hub (process {pid})")
    pid_file.unlink(missing_ok=True)
    # a killed hub stopped nothing: its proxy, its culler and the servers run on, in the hub's control groups (and
    # from its folder's programs), and go now
    groups = HubGroups(layout.prefix)
    rest = {p: describe(p) for p in hub_processes(layout) if p != os.getpid()}
    if groups.exists():
        groups.kill(grace_s=3)
        groups.remove()
    for other in rest:
        with contextlib.suppress(ProcessLookupError):
            os.kill(other, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in rest) and time.monotonic() < deadline:
        time.sleep(0.2)
    for other in rest:
        with contextlib.suppress(ProcessLookupError):
            os.kill(other, signal.SIGKILL)
    return said + [rest[p] for p in sorted(rest)]


def describe(pid: int) -> str:
    """'process 123 of ha (jupyterhub-singleuser ...)': a process as make hub-stop names it."""
    entry = Path("/proc") / str(pid)
    try:
        user = pwd.getpwuid(entry.stat().st_uid).pw_name
        argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except (OSError, KeyError):
        return f"process {pid}"
    shown = " ".join(Path(a).name if i == 0 or "/" in a and i < 2 else a for i, a in enumerate(argv) if a)
    return f"process {pid} of {user} ({shown[:100]})"


def processes_under(prefix: Path) -> dict[int, str]:
    """The processes running a program from ``prefix`` (the course environment's Python, the proxy's script),
    each with its command line."""
    root = str(prefix.resolve()) + os.sep
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(arg.startswith(root) for arg in argv[:2]):
            found[int(entry.name)] = " ".join(argv).strip()
    return found


def limits_from(args: argparse.Namespace) -> Limits | None:
    """The limits make hub's options ask for, each left out one this machine's default (None: HUB_LIMITS=none)."""
    if args.limits == "none":
        return None
    if args.limits not in ("", "on"):
        raise HubError(f"HUB_LIMITS={args.limits!r}: leave it out for the limits, or none to run without them")
    chosen = default_limits().to_dict()
    try:
        for name, option in (("memory", "HUB_MEMORY"), ("class_memory", "HUB_CLASS_MEMORY"),
                             ("instructor_memory", "HUB_INSTRUCTOR_MEMORY")):
            if getattr(args, name):
                chosen[name] = parse_size(getattr(args, name), option)
        if args.cpus:
            chosen["cpus"] = float(args.cpus)
        if args.tasks:
            chosen["tasks"] = int(args.tasks)
        return Limits(**chosen)
    except ValueError as exc:
        raise HubError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make hub", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("setup", "users", "start", "stop"):
        p = sub.add_parser(name)
        p.add_argument("--prefix", type=Path, default=Path(os.environ.get("HUB_PREFIX") or DEFAULT_PREFIX))
        if name == "users":
            p.add_argument("--roster", type=Path, default=None, help="the class list: id,name,email")
            p.add_argument("--instructor", default=None, help="the instructor's account name")
        if name == "start":
            p.add_argument("--port", type=int, default=8000)
            p.add_argument("--auth", default="pam", help="pam (default) or shared")
            p.add_argument("--idle-minutes", type=float, default=60, help="stop a server idle this long")
            p.add_argument("--url", default="", help="where browsers reach the hub (http://localhost:PORT)")
            p.add_argument("--memory", default="", help="each learner's memory, server and kernels together (2G)")
            p.add_argument("--cpus", default="", help="each learner's CPUs (1)")
            p.add_argument("--tasks", default="", help="each learner's processes and threads (512)")
            p.add_argument("--class-memory", default="", help="all learners' memory together")
            p.add_argument("--instructor-memory", default="", help="an instructor's server and grading (6G)")
            p.add_argument("--limits", default="", help="none: no limits (not for a class)")
    args = parser.parse_args(argv)
    layout = Layout(args.prefix.resolve())
    try:
        if args.command == "setup":
            for line in setup(layout):
                print(f"make hub: {line}")
        elif args.command == "users":
            if args.roster is not None and not args.roster.is_file():
                raise HubError(f"ROSTER={args.roster} does not exist or is not a file")
            if args.roster is None and args.instructor is None:
                raise HubError("nothing to add: give ROSTER=roster.csv (id,name,email) and/or INSTRUCTOR=<name>")
            for line in add_users(layout, args.roster, args.instructor):
                print(f"make hub-users: {line}")
        elif args.command == "start":
            if args.idle_minutes <= 0:
                raise HubError(f"IDLE_MINUTES={args.idle_minutes} must be a positive number of minutes")
            said: list[str] = []
            url = args.url or f"http://localhost:{args.port}"
            pid = start(layout, args.port, args.auth, int(args.idle_minutes * 60), limits=limits_from(args),
                        public_url=url, report=said)
            for line in said:
                print(f"make hub: {line}")
            print(f"make hub: JupyterHub is running (process {pid}) at {url}/ (log: {layout.state / 'jupyterhub.log'})")
            if args.auth == "shared":
                print(f"make hub: the learners' shared password is in {layout.state / 'shared-password'}, the "
                      f"instructors' in {layout.state / 'shared-admin-password'}")
        elif args.command == "stop":
            stopped = stop(layout)
            if not stopped:
                print("make hub-stop: no hub was running, and nothing it started was left")
            elif not stopped[0].startswith("the hub "):
                print("make hub-stop: the hub was not running (killed?); stopped what it had left running:")
            else:
                print("make hub-stop: stopped")
            for line in stopped:
                print(f"  {line}")
    except HubError as exc:
        print(f"make hub: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
