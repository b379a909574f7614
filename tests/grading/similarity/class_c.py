"""Planted class C, held out: learners written after the report was tuned, with rings made from them.

The independent learners are class_c_attention.py's and class_c_vit.py's, written apart from classes A and B
once the report's constants were set; the rings and whole-notebook copies are made from them by rings.py
(measure.py's ``c-rings``). Class C was measured once, at the end, and its figures are recorded in
test_similarity.py as they came out; nothing in classroom/similarity was tuned on it.
"""

from tests.grading.similarity import class_c_attention as att
from tests.grading.similarity import class_c_vit as vit
from tests.grading.similarity.planted import Copy, Submission

LEARNERS = {}
for slug, module in (("02-attention", att), ("09-vision-transformer", vit)):
    LEARNERS[slug] = {k: Submission(v, module.ADDED.get(k, [])) for k, v in module.INDEPENDENT.items()}

#: class C's copies are its ring classes' (rings.py), not its own
COPIES: list[Copy] = []

#: learners who worked alone and whose code is the reference's (none in class C)
SOLUTION_LIKE: set[str] = set()
