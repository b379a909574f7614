"""``make hub`` and ``make hub-stop``: JupyterHub started in the background with the learners' limits, and stopped
with everything it started, whether it still runs or was killed."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from classroom.hub import addresses, logins
from classroom.hub.cgroups import CgroupError, HubGroups, Limits, default_limits
from classroom.hub.disks import Disks, DiskSizes, default_sizes
from classroom.hub.layout import Groups, HubError, Layout, require_root

START_S = 120
#: the variable every process the hub starts carries (the hub, its proxy and services, each user's server and what
#: it starts), naming the hub's folder: how make hub-stop finds them where the hub has no control groups
MARK = "COURSE_HUB_PREFIX"


def free_port() -> int:
    """A port nothing listens on now, on either family (the tests' hubs)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if addresses.bindable_everywhere(port):
            return port


def port_holder(port: int) -> tuple[int | None, str] | None:
    """Who listens on TCP ``port`` (on any address of either family): (process id or None, a description naming its
    user and the address), or None."""
    found = addresses.listeners(port)
    return (found[0].pid, found[0].named()) if found else None


def port_is_free(port: int) -> bool:
    """Whether nothing listens on ``port`` on any address, and a listener could bind it on all of them."""
    return not addresses.listeners(port) and addresses.bindable_everywhere(port)


def hub_environment(layout: Layout, port: int, auth: str, idle_s: int, groups: Groups, limits: Limits | None,
                    public_url: str) -> dict[str, str]:
    token = (layout.state / "course-admin-token").read_text().strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "COURSE_HUB", "GRADEBOOK"))}
    held = addresses.hub_addresses(public_url, port)
    env.update(COURSE_HUB_PREFIX=str(layout.prefix), COURSE_HUB_PORT=str(port), COURSE_HUB_AUTH=auth,
               COURSE_HUB_IDLE_S=str(idle_s), COURSE_HUB_LEARNERS=groups.learners,
               COURSE_HUB_INSTRUCTORS=groups.instructors, COURSE_HUB_ADMIN_TOKEN=token,
               COURSE_HUB_URL=public_url, PATH=f"{layout.env / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               # the proxy (hub/proxy.mjs): its command, and the addresses it holds beside --ip 127.0.0.1
               COURSE_PROXY_CLI=str(layout.proxy / "node_modules" / "configurable-http-proxy" / "bin" /
                                    "configurable-http-proxy"),
               COURSE_PROXY_ALSO=json.dumps({str(port): [a for a in held if a != "127.0.0.1"]}))
    if limits is not None:
        env["COURSE_HUB_LIMITS"] = json.dumps(limits.to_dict())
    env.pop("VIRTUAL_ENV", None)
    return env


#: start()'s limits when none are given: default_limits() for this machine
MACHINE = "machine"


def start(layout: Layout, port: int = 8000, auth: str = "pam", idle_s: int = 3600, groups: Groups = Groups(),
          limits: Limits | None | str = MACHINE, public_url: str | None = None,
          report: list[str] | None = None, disks: DiskSizes | None | str = MACHINE) -> int:
    """Start JupyterHub in the background; return its process id once it answers on ``port`` and its own proxy, and
    nobody else, listens there on every address a browser may use (:mod:`classroom.hub.addresses`).

    Whatever a killed hub left running is stopped first (its lines go to ``report``), so that a restart runs one
    proxy and one culler. A port another process holds, on any address of either family, is refused, naming it.
    ``limits``: each learner's (and the class's) memory, CPU and processes (:mod:`classroom.hub.cgroups`); None
    runs without (not for a class). ``public_url``: where browsers reach the hub (default
    ``http://localhost:<port>``); each user's server is on a subdomain of it, ``<user>.<host>``. ``disks``: each
    learner's home and the exchange, each a filesystem of that size (:mod:`classroom.hub.disks`); None: on the
    machine's disk, unbounded (not for a class).
    """
    require_root()
    report = report if report is not None else []
    if auth not in ("pam", "shared"):
        raise HubError(f"--auth {auth!r} is not a log-in the hub offers: use pam (the machine's accounts) or "
                       "shared (one password for everyone, for a demo)")
    if not (layout.env / "bin" / "jupyterhub").is_file():
        raise HubError(f"no hub at {layout.prefix}: run `make hub` (classroom/hub/ setup) first")
    pid_file = layout.state / "hub.pid"
    if pid_file.is_file() and alive(int(pid_file.read_text())):
        raise HubError(f"the hub is already running (process {pid_file.read_text().strip()}): make hub-stop first")
    left = stop(layout)
    if left:
        report += [f"stopped what an earlier hub left running: {line}" for line in left]
    held = addresses.listeners(port)
    if held or not addresses.bindable_everywhere(port):
        holder = "; ".join(x.named() for x in held) or "a socket bound on one of its addresses"
        raise HubError(f"HUB_PORT {port} is held by {holder}: the hub does not start where something else could "
                       "answer in its place (a browser tries every address of localhost); stop that process or choose "
                       "another port (HUB_PORT=)")
    layout.run.mkdir(mode=0o755, exist_ok=True)  # the hub's socket, each user's server's folder, the session hook
    os.chown(layout.run, 0, 0)
    layout.run.chmod(0o755)
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
        # every account's group from the start: an instructor's grading from ssh joins theirs, a learner's log-in
        # theirs (classroom/hub/logins.py)
        for user in learners_of(groups):
            hub_groups.for_user(user, "learner", limits)
        for user in instructors_of(groups):
            hub_groups.for_user(user, "instructor", limits)
        report += [f"log-in: {line}" for line in logins.install(layout, groups, limits.memory, learners_of(groups))]
    if disks == MACHINE:
        disks = Disks(layout).sizes() or default_sizes()
    if disks is not None:
        report += [f"disk: {line}" for line in Disks(layout).mount_all(learners_of(groups), disks)]
        report.append(f"disk: {disks.describe()}")
    else:
        report.append("disk: not bounded (HUB_DISK=none): one learner can fill the disk the class shares")
    Disks(layout).remember(disks)
    if auth == "shared":
        for name, size in (("shared-password", 12), ("shared-admin-password", 32)):
            secret = layout.state / name
            if not secret.is_file():
                fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(secrets.token_urlsafe(size) + "\n")
    public_url = public_url or f"http://localhost:{port}"
    env = hub_environment(layout, port, auth, idle_s, groups, limits, public_url)
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
            ours = hub_processes(layout, proc.pid)
            others = addresses.strangers(port, ours)
            missing = addresses.unheld(port, addresses.hub_addresses(public_url, port), ours)
            if others or missing:
                stop(layout)
                raise HubError(f"port {port} answers, but not only from the hub's proxy: "
                               f"{'; '.join(x.named() for x in others) or 'nobody else listens'}"
                               f"{'; the proxy does not hold ' + ', '.join(missing) if missing else ''}; "
                               "the hub was stopped")
            return proc.pid
        time.sleep(0.5)
    stop(layout)
    raise HubError(f"JupyterHub did not answer on port {port} within {START_S} s; its log:\n"
                   f"{tail(layout.state / 'jupyterhub.log')}")


def learners_of(groups: Groups) -> list[str]:
    return members(groups.learners)


def instructors_of(groups: Groups) -> list[str]:
    return members(groups.instructors)


def members(group: str) -> list[str]:
    import grp

    try:
        return sorted(grp.getgrnam(group).gr_mem)
    except KeyError:
        return []


def hub_processes(layout: Layout, hub_pid: int | None = None) -> set[int]:
    """The processes the hub started: its control groups' (classroom/hub/cgroups.py), or, for a hub started without
    limits, those that carry its mark (:data:`MARK`); and the hub's descendants, given its process."""
    groups = HubGroups(layout.prefix)
    found = groups.pids() if groups.exists() else set(marked(layout.prefix))
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
    logins.remove(layout)  # no learner's log-in asks for the hub's groups from now on
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
    unmounted = Disks(layout).unmount_all()  # the learners' homes and the exchange: their images stay
    return said + [rest[p] for p in sorted(rest)] + [f"disk: {line}" for line in unmounted]


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


def marked(prefix: Path) -> dict[int, str]:
    """The processes the hub of ``prefix`` started, each with its command line: those whose environment carries
    :data:`MARK` naming it (the hub sets it for its proxy, services and every user's server, and what they start
    inherits it). Another's program that merely runs the course's Python (an instructor grading from ssh, a learner's
    script) has no such mark, and is left alone."""
    wanted = f"{MARK}={Path(prefix).resolve()}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone meanwhile
            continue
        found[int(entry.name)] = " ".join(argv).strip()
    return found
