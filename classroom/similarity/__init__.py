"""`make similarity`: which learners' code is too alike, for the instructor to read; never a grade.

For each assignment, every learner's code of each exercise is compared with every other learner's and
with the reference (the course_lib functions the hidden tests compare against, and the solution notebook),
and each pair is scored against how alike the rest of the class is. One module per concern:

* :mod:`classroom.similarity.reading`: what is read, as hostile input: every code cell a learner wrote or
  changed (added cells included), the release, the reference;
* :mod:`classroom.similarity.normalise`: an exercise as the graph of values it computes, with what a disguise
  changes normalised away: the evaluator's statements and functions there, its expressions, calls and loops in
  :mod:`~classroom.similarity.expressions`, :mod:`~classroom.similarity.calls` and
  :mod:`~classroom.similarity.loops`;
  the notebook's top level in :mod:`~classroom.similarity.program`; one spelling per torch call in
  :mod:`~classroom.similarity.spelling`; the graph and its features in :mod:`~classroom.similarity.ir`;
* :mod:`classroom.similarity.compare`: how alike two sides' code of an exercise is;
* :mod:`classroom.similarity.forms`: which learners write an exercise in one form, how rare the form is in the
  class, which write the book's code (evidence of nothing between two learners), and a pair's joint evidence (how
  many pairs of the class would match on so many exercises by chance);
* :mod:`classroom.similarity.calibrate`: each pair's evidence, measured against its classmates; the flag (a pair
  of learners, or a learner against the reference: *matches the book's code*, reported apart);
* :mod:`classroom.similarity.groups`: learners linked by flagged pairs (a solution passed round a group);
* :mod:`classroom.similarity.page` and :mod:`classroom.similarity.table`: the page and the CSVs;
* :mod:`classroom.similarity.command`: ``python -m classroom.similarity``.
"""
