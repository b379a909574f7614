"""course_lib: the reference implementation behind the course.

Each module is one concept, named as the chapter that teaches it:

* :mod:`course_lib.attention` (chapter 02): scaled dot-product attention,
  masks, multi-head attention.
* :mod:`course_lib.grading`: what the hidden tests of the exercises use to
  compare a learner's code with this reference.
"""

__version__ = "0.1.0"
