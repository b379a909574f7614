"""Python's standard library as a text corpus: 10.7 million characters of code, comments and docstrings.

**Source.** The ``.py`` files of CPython 3.11.7's standard library (``Lib/``),
605 files, 10,652,860 characters, without the test suites (``test/``,
``*/tests/``, ``idle_test/``), the codec tables (``encodings/``), the bundled
wheels (``ensurepip/``) and the build's generated ``_sysconfigdata``. A
snapshot ships with the course, ``course_lib/corpora/python_stdlib.tar.xz``
(1.9 MB), because the files change between Python releases and a trained model
must see the same text on every machine. It was made by :func:`build_snapshot`
(``python -m course_lib.datasets.python_stdlib build <Lib folder>``).

**Licence.** The Python Software Foundation License Version 2 (PSF-2.0), a
permissive licence that allows copying and derived works provided the
copyright notice and the licence are kept: the snapshot holds CPython's
``LICENSE.txt`` beside the files (:func:`licence_text`).

**Splits.** Every file is cut into blocks of whole lines, each block ending at
the first line break after :data:`BLOCK_CHARS` (4,000) characters; every 10th
block of the whole corpus (in path order) is ``"held_out"``, the rest
``"train"``: 2,963 blocks, 296 of them held out (10 % of the text), from every
part of the library, never seen in training. Each split is a list of
*documents*, the runs of consecutive blocks of one file that belong to it.

**Tokens.** :func:`tokenizer` is chapter 1's byte-level BPE
(:class:`course_lib.tokenizer.Tokenizer`, the GPT-4 split pattern) trained on
the training documents to a vocabulary of :data:`VOCAB_SIZE` (its merges ship as
``course_lib/corpora/python_stdlib_bpe.txt``), with one special token,
``<|endoftext|>``, between documents. :func:`token_ids` encodes a split, 3.7
characters a token.
"""

from __future__ import annotations

import functools
import io
import lzma
import tarfile
from pathlib import Path

import torch
from torch import Tensor

from course_lib.tokenizer import GPT4_SPLIT_PATTERN, Tokenizer

__all__ = ["SNAPSHOT", "BPE_FILE", "VOCAB_SIZE", "EOT", "SPLITS", "BLOCK_CHARS", "files", "documents", "text",
           "licence_text", "tokenizer", "token_ids", "train_tokenizer", "build_snapshot"]

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
SNAPSHOT = CORPORA / "python_stdlib.tar.xz"
BPE_FILE = CORPORA / "python_stdlib_bpe.txt"
#: ordinary ids of the BPE (256 bytes and the merges); ``<|endoftext|>`` is id VOCAB_SIZE
VOCAB_SIZE = 4096
EOT = "<|endoftext|>"
SPLITS = ("train", "held_out")
HELD_OUT_EVERY = 10
BLOCK_CHARS = 4000
LICENCE = "LICENSE.txt"
#: top-level folders of Lib/ left out of the snapshot, and folder names left out wherever they occur
_LEFT_OUT_TOP = {"test", "site-packages", "encodings", "ensurepip", "__phello__"}
_LEFT_OUT_ANYWHERE = {"tests", "test", "idle_test", "__pycache__"}


@functools.cache
def _archive() -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(SNAPSHOT.read_bytes()))) as tar:
        return {m.name: tar.extractfile(m).read().decode("utf-8") for m in tar.getmembers() if m.isfile()}


def files() -> dict[str, str]:
    """Every file of the snapshot, ``{path relative to Lib/: its text}``, in sorted path order."""
    return {k: v for k, v in _archive().items() if k != LICENCE}


def licence_text() -> str:
    """CPython's ``LICENSE.txt``, which ships inside the snapshot (the PSF licence and the history of Python's)."""
    return _archive()[LICENCE]


def _blocks(source: str) -> list[str]:
    """``source`` cut into blocks of whole lines, each ending at the first line break after BLOCK_CHARS characters."""
    blocks, start = [], 0
    while start < len(source):
        cut = source.find("\n", start + BLOCK_CHARS)
        end = len(source) if cut < 0 else cut + 1
        blocks.append(source[start:end])
        start = end
    return blocks


@functools.cache
def _documents() -> dict[str, tuple[str, ...]]:
    split_docs: dict[str, list[str]] = {s: [] for s in SPLITS}
    k = 0
    for source in files().values():
        run, run_split = [], None
        for block in _blocks(source):
            split = "held_out" if k % HELD_OUT_EVERY == HELD_OUT_EVERY // 2 else "train"
            k += 1
            if split != run_split and run:
                split_docs[run_split].append("".join(run))
                run = []
            run.append(block)
            run_split = split
        if run:
            split_docs[run_split].append("".join(run))
    return {s: tuple(d) for s, d in split_docs.items()}


def documents(split: str) -> tuple[str, ...]:
    """The documents of ``split`` (``"train"`` or ``"held_out"``): runs of consecutive blocks of one file."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return _documents()[split]


def text(split: str = "train") -> str:
    """The documents of ``split`` joined into one string, each followed by ``<|endoftext|>``."""
    return "".join(t + EOT for t in documents(split))


@functools.cache
def tokenizer() -> Tokenizer:
    """The corpus's BPE (chapter 1's tokenizer, trained on the training files by :func:`train_tokenizer`)."""
    return Tokenizer.load(BPE_FILE)


def train_tokenizer(vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """Train the BPE on the training documents (GPT-4's split pattern; ``<|endoftext|>`` special). A minute."""
    tok = Tokenizer(GPT4_SPLIT_PATTERN)
    tok.train(text("train"), vocab_size, special_tokens=[EOT])
    return tok


@functools.cache
def token_ids(split: str = "train") -> Tensor:
    """``(n_tokens,)`` int32: the documents of ``split`` encoded by :func:`tokenizer`, ``<|endoftext|>`` after each.

    Encoding the training split takes about a minute on one core; the result is kept for the process.
    """
    tok = tokenizer()
    eot = tok.special_tokens[EOT]
    ids: list[int] = []
    for t in documents(split):
        ids.extend(tok.encode_ordinary(t))
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.int32)


def build_snapshot(lib: str | Path, out: str | Path = SNAPSHOT) -> Path:
    """Write the snapshot of the standard library found in ``lib`` (a Python's ``Lib/`` folder) to ``out``.

    The archive is reproducible: files in sorted order, no times, owners or modes of the machine.
    """
    lib, out = Path(lib), Path(out)
    chosen = []
    for p in sorted(lib.rglob("*.py")):
        parts = p.relative_to(lib).parts
        if parts[0] in _LEFT_OUT_TOP or parts[0].startswith(("config-", "_sysconfigdata")):
            continue
        if _LEFT_OUT_ANYWHERE.intersection(parts):
            continue
        chosen.append(p)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for p, name in [(p, p.relative_to(lib).as_posix()) for p in chosen] + [(lib / LICENCE, LICENCE)]:
            data = p.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    out.write_bytes(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    return out


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "build":
        print(build_snapshot(sys.argv[2]))
        print(train_tokenizer().save(BPE_FILE))
    else:
        raise SystemExit("usage: python -m course_lib.datasets.python_stdlib build <a Python's Lib folder>")
