"""nbgrader configuration for the course (the repository root is the course directory).

solutions/<assignment>/ is the single source of every assignment; the learner
version under exercises/<assignment>/ is generated from it (`make exercises`).
Submissions, autograded copies, feedback and the gradebook stay in the
instructor's checkout and are git-ignored.
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

# The course directory is the folder of this file, wherever nbgrader is run from.
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "transformers-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# Only notebooks and the data files they read travel with an assignment.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a learner sees in place of a solution.
c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE\nraise NotImplementedError(\"not implemented yet\")",
}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Execution while autograding: every cell gets at most this many seconds; a cell
# that runs longer (an endless loop) is interrupted, its error recorded, and it
# scores zero while the rest of the notebook is still graded.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.Execute.raise_on_iopub_timeout = False
c.Execute.execute_retries = 0
