"""A user's server on the course's hub: their own account, their own control group, a private /tmp, private files.

JupyterHub's LocalProcessSpawner starts each server as its user's account; :class:`CourseSpawner` (the hub's
``spawner_class``) adds, before the server's program runs:

* the user's control group (:mod:`classroom.hub.cgroups`): the learner's memory, CPU and process limits hold for the
  server and everything it starts (kernels, terminals), together; an instructor's server has the instructors'.
  When the server stops, whatever it left running in the group is stopped too;
* its own scratch places: a new mount namespace whose /tmp, /var/tmp, /dev/shm and /run/lock are empty
  memory-backed folders that only the user can enter, counted in their memory limit and gone with the server
  (systemd's PrivateTmp=, which The Littlest JupyterHub's units have): nothing a learner writes lands on the
  machine's disk outside their own home (:mod:`classroom.hub.disks`);
* a Unix socket, not a port: the server listens on ``<prefix>/run/<user>/jupyter.sock``, in a folder only the user
  can enter (root made it, and nobody else can make one there), and the hub and the proxy reach it there. A port
  chosen by the spawner and bound a moment later by the server could be bound first by anyone (a learner
  listening on many ports, or a kernel's random port by chance: issue 50's 30th learner), and the proxy would send
  that user's requests, cookies and all, to whoever held it; a socket in the user's own folder has no such race.
  Kernels talk to their server over Unix sockets in the user's private runtime folder too (``ipc``), so no
  learner can take a kernel's port before it binds it and read another's code;
* umask 077: the files a user's server and kernels create are theirs alone unless they open them up;
* a learner's kernels use as many threads as the learner has CPUs.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import pwd
import stat
from urllib.parse import quote

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Dict, Unicode

from classroom.hub.cgroups import HubGroups, Limits
from grader.nbgrader_processes import THREAD_VARIABLES

UMASK = 0o077
_CLONE_NEWNS, _MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV = 0x00020000, 0x4000, 1 << 18, 0x2, 0x4


#: the places everyone may write on a Debian machine outside their home: each server gets empty ones of its own
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
#: the port a server is told (JupyterHub's JUPYTERHUB_SERVICE_URL): jupyter_server's default, the one it accepts
#: beside a socket (ServerApp.sock); nothing listens on it
TOLD_PORT = 8888
#: the longest path a Unix socket may have (sun_path, less its final NUL)
SOCKET_PATH_MAX = 107


def private_tmp(uid: int, gid: int, size: int) -> None:
    """Give this process (as root, before it becomes the user) a mount namespace whose scratch places
    (:data:`SCRATCH`) are fresh tmpfs of ``size`` bytes each, mode 0700, owned by the user; nothing of them reaches
    the rest of the machine, and they go with the namespace."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) for a private /tmp")
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making / private in the server's mount namespace")
    options = f"size={size},mode=0700,uid={uid},gid={gid}".encode()
    for place in SCRATCH:
        if place != "/tmp" and not os.path.isdir(place):
            continue
        if libc.mount(b"tmpfs", place.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
            raise OSError(ctypes.get_errno(), f"mounting the server's private {place}")


def socket_folder(prefix: str, user: str) -> str:
    """Where a user's server makes its socket: ``<prefix>/run/<user>``."""
    return os.path.join(prefix, "run", user)


def make_socket_folder(prefix: str, user: str, uid: int, gid: int) -> str:
    """The user's socket folder, theirs alone (0700), in ``<prefix>/run`` (root's, 0755: nobody else makes or
    renames anything there); made afresh when it is not a real folder of the user's. Its socket's path."""
    run = os.path.join(prefix, "run")
    os.makedirs(run, mode=0o755, exist_ok=True)
    st = os.lstat(run)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise OSError(f"{run} must be root's folder, writable by root alone")
    folder = socket_folder(prefix, user)
    try:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            if stat.S_ISDIR(st.st_mode):
                os.rename(folder, f"{folder}.old-{os.getpid()}")  # not the user's: out of the way, kept
            else:
                os.unlink(folder)
            raise FileNotFoundError
    except FileNotFoundError:
        os.mkdir(folder, 0o700)
        os.chown(folder, uid, gid)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    path = os.path.join(folder, "jupyter.sock")
    if len(path.encode()) > SOCKET_PATH_MAX:
        raise OSError(f"{path} is longer than a Unix socket's path may be ({SOCKET_PATH_MAX} bytes): choose a "
                      "shorter HUB_PREFIX")
    return path


def socket_url(path: str) -> str:
    """The URL JupyterHub's HTTP client and configurable-http-proxy reach a Unix socket at."""
    return f"http+unix://{quote(path, safe='')}"


class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner with the course's limits, a private /tmp and umask 077 (the module's list)."""

    hub_prefix = Unicode("", help="the hub's folder, which names its control groups (classroom/hub/cgroups.py)"
                         ).tag(config=True)
    limits = Dict({}, help="classroom.hub.cgroups.Limits as a dict; empty: no limits (the hub was started so)"
                  ).tag(config=True)
    course_role = Unicode("learner", help="'learner' or 'instructor' (the hub's pre_spawn_hook sets it)")

    @property
    def socket_path(self) -> str:
        return os.path.join(socket_folder(self.hub_prefix, self.user.name), "jupyter.sock")

    # the server's address is its socket: the hub's records hold a URL (scheme, host, port) and lose a socket's
    # path; Server.connect_url, which JupyterHub's HTTP client and its routes to the proxy use, is set again here
    # whenever the hub makes its record of the server anew
    @property
    def server(self):
        server = LocalProcessSpawner.server.fget(self)
        if server is not None and server.proto == "http+unix" and not server.connect_url and self.hub_prefix:
            server.connect_url = socket_url(self.socket_path)
        return server

    @server.setter
    def server(self, server):
        LocalProcessSpawner.server.fset(self, server)

    def _groups(self) -> HubGroups | None:
        return HubGroups(self.hub_prefix) if self.hub_prefix and self.limits else None

    def get_env(self):
        """The server's environment; a learner's kernels start as many threads as the learner has CPUs (torch
        would start one per core of the machine, and threads beyond the CPU quota only wait on each other)."""
        env = super().get_env()
        if self.limits and self.course_role == "learner":
            for name in THREAD_VARIABLES:
                env.setdefault(name, str(max(1, int(self.limits["cpus"]))))
        return env

    def get_args(self):
        """The server listens on its socket alone (ServerApp.sock), which only its user can reach."""
        return [*super().get_args(), f"--ServerApp.sock={self.socket_path}", "--ServerApp.sock_mode=0600"]

    async def start(self):
        groups = self._groups()
        self._procs_files = groups.for_user(self.user.name, self.course_role, Limits(**self.limits)) if groups else []
        entry = pwd.getpwnam(self.user.name)
        path = make_socket_folder(self.hub_prefix, self.user.name, entry.pw_uid, entry.pw_gid)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # an earlier server's; the user's folder, so nobody else's
        self.ip, self.port = "127.0.0.1", TOLD_PORT
        await super().start()
        url = socket_url(path)
        self.server.connect_url = url
        return url

    def make_preexec_fn(self, name):
        become_user = super().make_preexec_fn(name)
        procs_files = list(getattr(self, "_procs_files", []))
        entry = pwd.getpwnam(name)
        tmp_size = (self.limits.get("memory") if self.course_role == "learner" else
                    self.limits.get("instructor_memory")) or 2**30

        def preexec():
            pid = str(os.getpid())
            for procs in procs_files:  # first of all: whatever this process starts is in the user's group
                with open(procs, "w") as fh:
                    fh.write(pid)
            private_tmp(entry.pw_uid, entry.pw_gid, tmp_size)
            os.umask(UMASK)
            become_user()

        return preexec

    async def stop(self, now=False):
        await super().stop(now=now)
        groups = self._groups()
        if groups is not None:  # a kernel or a terminal's process the server left behind
            # a learner's log-ins (logins/, classroom/hub/logins.py) stay; an instructor's grading groups go too
            left = groups.kill((f"{self.course_role}s", self.user.name), grace_s=2,
                               below=self.course_role != "learner")
            if left:
                self.log.info("stopped %d process(es) %s's server left running: %s", len(left), self.user.name, left)


def limits_from_environment() -> dict:
    """The limits classroom/hub/ passed the hub (COURSE_HUB_LIMITS, JSON), checked; {} where there are none."""
    raw = os.environ.get("COURSE_HUB_LIMITS", "")
    return Limits(**json.loads(raw)).to_dict() if raw else {}
