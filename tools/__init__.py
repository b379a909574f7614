"""What maintainers run to build and check the course; nothing a class needs at run time.

* :mod:`tools.course_book`: ``make book``'s Sphinx extension (stored outputs, or ``EXECUTE=1``'s cache keys);
* :mod:`tools.notebooks`: ``make notebooks`` and ``make check``: the chapter notebooks' stored outputs, fresh;
* :mod:`tools.exercises`: ``make exercises``: ``exercises/`` generated from ``solutions/``;
* :mod:`tools.portability`: ``make portability``: the outputs over torch's kernel sets, thread counts and seeds;
* :mod:`tools.zoo`: ``make zoo``: the model zoo's recipes, trained once and loaded;
* :mod:`tools.mutants`: ``make mutants``: mutation testing of the hidden tests;
* :mod:`tools.secret_sweep`: every catalogue entry judged over many grading secrets;
* :mod:`tools.forked_kernels`: the suite's forked notebook kernels;
* :mod:`tools.diagrams`: the book's figures;
* ``tools/system_packages.sh``: the Debian packages each make target needs;
* ``tools/jupyterlab/``: the learners' JupyterLab settings (``make lab``, the hub).

The instructor's side is :mod:`classroom`; how one answer is judged is :mod:`grader`.
"""
