"""A user's server on the course's hub: their own account, their own control group, a private /tmp, private files.

JupyterHub's LocalProcessSpawner starts each server as its user's account; :class:`CourseSpawner` (the hub's
``spawner_class``) adds, before the server's program runs:

* the user's control group (:mod:`classroom.hub.cgroups`): the learner's memory, CPU and process limits hold for the
  server and everything it starts (kernels, terminals), together; an instructor's server has the instructors'.
  When the server stops, whatever it left running in the group is stopped too;
* a /tmp of its own: a new mount namespace whose /tmp is an empty memory-backed folder that only the user can
  enter, counted in their memory limit (systemd's PrivateTmp=, which The Littlest JupyterHub's units have);
* umask 077: the files a user's server and kernels create are theirs alone unless they open them up;
* a learner's kernels use as many threads as the learner has CPUs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import pwd

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Dict, Unicode

from classroom.hub.cgroups import HubGroups, Limits
from grader.nbgrader_processes import THREAD_VARIABLES

UMASK = 0o077
_CLONE_NEWNS, _MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV = 0x00020000, 0x4000, 1 << 18, 0x2, 0x4


def private_tmp(uid: int, gid: int, size: int) -> None:
    """Give this process (as root, before it becomes the user) a mount namespace whose /tmp is a fresh tmpfs of
    ``size`` bytes, mode 0700, owned by the user; nothing of it reaches the rest of the machine."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) for a private /tmp")
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making / private in the server's mount namespace")
    options = f"size={size},mode=0700,uid={uid},gid={gid}".encode()
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
        raise OSError(ctypes.get_errno(), "mounting the server's private /tmp")


class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner with the course's limits, a private /tmp and umask 077 (the module's list)."""

    hub_prefix = Unicode("", help="the hub's folder, which names its control groups (classroom/hub/cgroups.py)"
                         ).tag(config=True)
    limits = Dict({}, help="classroom.hub.cgroups.Limits as a dict; empty: no limits (the hub was started so)"
                  ).tag(config=True)
    course_role = Unicode("learner", help="'learner' or 'instructor' (the hub's pre_spawn_hook sets it)")

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

    async def start(self):
        groups = self._groups()
        self._procs_files = groups.for_user(self.user.name, self.course_role, Limits(**self.limits)) if groups else []
        return await super().start()

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
            left = groups.kill((f"{self.course_role}s", self.user.name), grace_s=2)
            if left:
                self.log.info("stopped %d process(es) %s's server left running: %s", len(left), self.user.name, left)


def limits_from_environment() -> dict:
    """The limits classroom/hub/ passed the hub (COURSE_HUB_LIMITS, JSON), checked; {} where there are none."""
    raw = os.environ.get("COURSE_HUB_LIMITS", "")
    return Limits(**json.loads(raw)).to_dict() if raw else {}
