"""`make hub`: the course's JupyterHub on one machine, with nbgrader's exchange, for a class.

    python -m classroom.hub setup  [--prefix DIR]             lay out the hub's folder (as root)
    python -m classroom.hub users  --roster CSV [--instructor NAME] [--prefix DIR]
    python -m classroom.hub start  [--prefix DIR] [--port 8000] [--auth pam|shared] [--idle-minutes 60] [--url URL]
                               [--memory 2G] [--cpus 1] [--tasks 512] [--class-memory SIZE]
                               [--instructor-memory 6G] [--limits none] [--disk 1G] [--exchange-disk 8G]
    python -m classroom.hub stop   [--prefix DIR]

The shape of The Littlest JupyterHub, with the repository's own files, under one folder (the prefix,
``/opt/transformers-course``; hub/jupyterhub_config.py says what each sub-folder holds), one module per concern:
:mod:`~classroom.hub.layout` (the folders, names and errors the others share), :mod:`~classroom.hub.setup`,
:mod:`~classroom.hub.accounts` (users), :mod:`~classroom.hub.service` (start and stop),
:mod:`~classroom.hub.command` (the command line), :mod:`~classroom.hub.exchange` (nbgrader's exchange),
:mod:`~classroom.hub.cgroups` (the limits and the hub's processes), :mod:`~classroom.hub.spawner` (a user's server),
:mod:`~classroom.hub.kernels` (a kernel stopped for memory says so), :mod:`~classroom.hub.addresses` (every address
of the hub's port is the hub's) with :mod:`~classroom.hub.guard` (a squatter stopped and named),
:mod:`~classroom.hub.disks` (each learner's disk), :mod:`~classroom.hub.logins` (a learner's log-ins in their
limits) and :mod:`classroom.learner_files` (what is taken from a learner):

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
* **start** stops whatever a killed hub left running, refuses a port another process holds on any address (naming
  it), makes the hub's control groups with the learners' limits (their log-ins join them), mounts each learner's
  home and the exchange on disks of their own, starts JupyterHub in the background (its log:
  ``state/jupyterhub.log``), each user's server on a subdomain of ``--url`` and on a Unix socket of its own, and
  waits until its own proxy answers, holding the port on every loopback address; **stop** stops it and everything
  it started, whether it still runs or was killed, and unmounts the disks. Users, submissions, grades and feedback
  stay: ``start`` again and everything is there.
"""
