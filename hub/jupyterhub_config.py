"""JupyterHub's configuration for the course's hub on one machine (`make hub`; classroom/hub/ starts it).

Everything the hub needs lives under one folder, the hub's prefix (``/opt/transformers-course`` unless
``HUB_PREFIX`` names another), which classroom/hub/ lays out:

    env/        the course's Python environment, made from the system's Python: every user can run it
    course/     this repository's files, read-only (course_lib, the grader, exercises, this file)
    proxy/      configurable-http-proxy from npm (hub/package-lock.json)
    etc/learner, etc/instructor   each role's Jupyter configuration (JUPYTER_CONFIG_PATH of its servers)
    exchange/   nbgrader's exchange: release, submit, collect, feedback (root's; classroom/hub/exchange.py)
    state/      the hub's database, cookie secret and log (root only): what survives a restart

classroom/hub/ passes the rest in the environment: the ports, the public address, the log-in, the idle time and the
learners' limits.
"""

import grp
import os
import shutil
from pathlib import Path
from urllib.parse import quote

from classroom.hub.spawner import limits_from_environment  # the course's copy (course/ is on the environment's path)

c = get_config()  # noqa: F821 - provided by traitlets when JupyterHub loads this file

PREFIX = Path(os.environ["COURSE_HUB_PREFIX"])
ENV, STATE = PREFIX / "env", PREFIX / "state"
LEARNERS = os.environ.get("COURSE_HUB_LEARNERS", "course-learners")
INSTRUCTORS = os.environ.get("COURSE_HUB_INSTRUCTORS", "course-instructors")

# --- where it listens. Browsers reach the proxy on its port, on every loopback address (IPv6's ::1 and 127.0.0.1:
# Chromium tries ::1 first), so that no learner can take one of them while the hub runs (classroom/hub/addresses.py);
# hub/proxy.mjs listens on the others (COURSE_PROXY_ALSO, from classroom/hub/). Everything behind the proxy is a Unix
# socket in a folder nobody else can write: the hub's API (run/hub.sock, which every user's server calls), the
# proxy's API (state/, root's alone) and each user's server (run/<user>/, theirs: classroom/hub/spawner.py).
# No port but the public one: nothing for a learner to race for.
RUN = PREFIX / "run"
c.JupyterHub.bind_url = f"http://{os.environ.get('COURSE_HUB_IP', '127.0.0.1')}:{os.environ['COURSE_HUB_PORT']}"
# Each user's server on a domain of its own, <user>.<the hub's host> (JupyterHub's subdomains): a page a learner's
# server serves is another site than the instructor's server, so its scripts cannot read or frame the instructor's
# pages, whatever the instructor opens while logged in. On loopback, *.localhost reaches 127.0.0.1 in every browser;
# for a class, a wildcard DNS name and certificate (COURSE_HUB_URL=https://hub.example.edu).
PUBLIC_URL = os.environ.get("COURSE_HUB_URL") or f"http://localhost:{os.environ['COURSE_HUB_PORT']}"
c.JupyterHub.subdomain_host = PUBLIC_URL
c.JupyterHub.cookie_host_prefix_enabled = PUBLIC_URL.startswith("https://")  # __Host- cookies need https
c.JupyterHub.hub_bind_url = c.JupyterHub.hub_connect_url = f"http+unix://{quote(str(RUN / 'hub.sock'), safe='')}"
c.JupyterHub.hub_socket_mode = 0o666  # every user's server calls the hub's API (each with its own token)
c.ConfigurableHTTPProxy.api_url = f"http+unix://{quote(str(STATE / 'proxy-api.sock'), safe='')}"
c.ConfigurableHTTPProxy.command = [shutil.which("node") or "node", str(PREFIX / "course" / "hub" / "proxy.mjs")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")

# --- what survives a restart: users and their servers' records, the cookie secret (log-ins stay valid)
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # `make hub-stop` stops the learners' servers too; their files stay

# --- log-in: the machine's accounts (PAM), or one shared password for a demo
members = {g: set(grp.getgrnam(g).gr_mem) if g in {x.gr_name for x in grp.getgrall()} else set()
           for g in (LEARNERS, INSTRUCTORS)}
if os.environ.get("COURSE_HUB_AUTH", "pam") == "shared":
    # one password for the learners, another (32 characters or more) for the instructors: a learner who
    # knows the first cannot log in as an instructor
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = (STATE / "shared-password").read_text().strip()
    c.SharedPasswordAuthenticator.admin_password = (STATE / "shared-admin-password").read_text().strip()
    c.Authenticator.allowed_users = members[LEARNERS] | members[INSTRUCTORS]  # the course's accounts, nobody else
else:
    c.JupyterHub.authenticator_class = "pam"
    c.PAMAuthenticator.allowed_groups = {LEARNERS, INSTRUCTORS}
    c.PAMAuthenticator.open_sessions = False  # no systemd-logind session per server
c.Authenticator.admin_users = members[INSTRUCTORS]

# --- each user's server: a process of their own account, on loopback, in their home folder, in a control group of
# its own with the limits classroom/hub/ was given (memory, CPU, processes), a private /tmp and umask 077
# (classroom/hub/spawner.py); none of its user's own Jupyter settings (~/.jupyter, their data folder) are read, so
# what a server serves is the course's alone
c.JupyterHub.spawner_class = "classroom.hub.spawner.CourseSpawner"
c.CourseSpawner.hub_prefix = str(PREFIX)
c.CourseSpawner.limits = limits_from_environment()
c.Spawner.disable_user_config = True
c.Spawner.cmd = [str(ENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
# COURSE_HUB_PREFIX: the hub's mark, which whatever a server starts inherits (make hub-stop finds them by it
# where there are no control groups: classroom/hub/service.py)
c.Spawner.environment = {"PATH": f"{ENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", "COURSE_HUB_PREFIX": str(PREFIX)}
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 120


def role_of(name: str) -> str:
    """'instructor' for a member of the instructors' group (as it is now), else 'learner'."""
    try:
        return "instructor" if name in grp.getgrnam(INSTRUCTORS).gr_mem else "learner"
    except KeyError:
        return "learner"


def by_role(spawner) -> None:
    """A learner's server has the Assignments tab and Validate; the instructor's adds the formgrader, which
    JupyterLab shows in a frame: that server alone may be framed by its own pages (etc/instructor)."""
    role = role_of(spawner.user.name)
    spawner.course_role = role
    spawner.environment["JUPYTER_CONFIG_PATH"] = str(PREFIX / "etc" / role)
    spawner.environment["COURSE_ROLE"] = role


c.Spawner.pre_spawn_hook = by_role

# --- a machine that stays up for a class: idle servers are stopped (their files stay)
idle = int(os.environ.get("COURSE_HUB_IDLE_S", "3600"))
c.JupyterHub.services = [{
    "name": "idle-culler",
    # through the proxy's own address (the culler's HTTP client speaks no Unix socket)
    "command": [str(ENV / "bin" / "python"), "-m", "jupyterhub_idle_culler", f"--timeout={idle}",
                f"--cull-every={max(10, min(300, idle // 2))}",
                f"--url=http://127.0.0.1:{os.environ['COURSE_HUB_PORT']}/hub/api"],
    "environment": {"COURSE_HUB_PREFIX": str(PREFIX)},
}, {
    # every few seconds, whoever else listens on the hub's port (on any address) is named in this log and stopped
    # (classroom/hub/guard.py): the proxy holds every address, so this only ever finds someone who was quicker
    # than a proxy the hub restarted
    "name": "port-guard",
    "command": [str(ENV / "bin" / "python"), "-m", "classroom.hub.guard"],
    "environment": {k: os.environ[k] for k in ("COURSE_HUB_PREFIX", "COURSE_HUB_PORT") if k in os.environ},
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]

# --- the course's own tools (classroom/hub/, the tests) speak to the hub as a service with this token
admin_token = os.environ.get("COURSE_HUB_ADMIN_TOKEN")
if admin_token:
    c.JupyterHub.services.append({"name": "course-admin", "api_token": admin_token})
    c.JupyterHub.load_roles.append({"name": "course-admin", "services": ["course-admin"],
                                    "scopes": ["admin:users", "admin:servers", "tokens", "list:users"]})

# --- this machine's own settings (another log-in, TLS, limits): state/jupyterhub_config_local.py, if present,
# is read last (guides/hub.md, "Log-in", has an LTI 1.3 example)
local = STATE / "jupyterhub_config_local.py"
if local.is_file():
    load_subconfig(str(local))  # noqa: F821 - provided by traitlets in a config file
