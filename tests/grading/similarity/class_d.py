"""Planted class D, held out: learners written once the rule that the book's code is evidence of nothing between
two learners (classroom/similarity/forms.py) was final, with rings made from them.

The independent learners are class_d_attention.py's and class_d_vit.py's (fifteen per assignment, three of 09's
and two of 02's writing the book's code on most exercises, some behind helpers), written apart from classes A, B
and C; the rings and whole-notebook copies are made from them by rings.py (measure.py's ``d-rings``), the
textbook learners among the possible sources. Class D was measured once, at the end, and its figures are recorded
in test_similarity.py as they came out; nothing in classroom/similarity was tuned on it.
"""

from tests.grading.similarity import class_d_attention as att
from tests.grading.similarity import class_d_vit as vit
from tests.grading.similarity.planted import Copy, Submission

LEARNERS = {}
for slug, module in (("02-attention", att), ("09-vision-transformer", vit)):
    LEARNERS[slug] = {k: Submission(v, module.ADDED.get(k, [])) for k, v in module.INDEPENDENT.items()}

#: class D's copies are its ring classes' (rings.py), not its own
COPIES: list[Copy] = []

#: learners excluded as ring sources (none: the textbook learners may be copied too)
SOLUTION_LIKE: set[str] = set()
