"""How a class runs: the instructor's side of the course.

:mod:`course_lib` is what learners learn and :mod:`grader` judges one learner's answer; this package runs a class
with them. It imports :mod:`grader`; nothing in :mod:`grader` or :mod:`course_lib` imports it. One module per
concern:

* :mod:`classroom.hub`: the course's JupyterHub on one machine, with nbgrader's exchange (``make hub``);
* :mod:`classroom.learner_files`: what is taken from a folder a learner wrote, as hostile ground;
* :mod:`classroom.intake`: submissions in (``submitted/``, a zip's import) and checked before grading;
* :mod:`classroom.gradebook`: which gradebook, and its copy of each assignment kept in step;
* :mod:`classroom.late`: due dates, extensions and the late policy (``deadlines.toml``);
* :mod:`classroom.grading`: the one interface a grading run uses, wherever its kernels run;
* :mod:`classroom.batch`: one ``nbgrader autograde`` of a batch of learners;
* :mod:`classroom.local` and :mod:`classroom.cluster`: grading here, or on a Dask cluster;
* :mod:`classroom.run`: the grading run, from ``submitted/`` to ``grades.csv``;
* :mod:`classroom.report`: ``grades.csv`` and the table;
* :mod:`classroom.grade`: ``make grade``, the command;
* :mod:`classroom.feedback`: ``make feedback``, a page per submission and the LMS's zip;
* :mod:`classroom.similarity`: ``make similarity``, the learners whose code is too alike;
* :mod:`classroom.export_grades` and :mod:`classroom.roster`: ``make export-grades`` with the class list.

A submission's path through it (:mod:`classroom.run` says each step): intake → gradebook → late (extensions) →
grading (local or cluster; batch) → late (the policy) → report → ``grades.csv``.
"""
