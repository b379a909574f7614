"""The benchmark script keeps working (a smoke run; speed itself is measured, not asserted)."""

from __future__ import annotations

import runpy

import pytest

from nbtools import ROOT

pytestmark = pytest.mark.slow


def test_compare_hf_runs_and_reports_parity(capsys):
    main = runpy.run_path(str(ROOT / "benchmarks" / "compare_hf.py"))["main"]
    main(["--models", "dinov2-s/14", "--repeats", "1", "--decode-tokens", "8", "--train", "--train-batch", "2",
          "--train-model", "vit-tiny-test"])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("dinov2-s/14"))
    assert float(row.split()[-1]) < 1e-4, row  # same weights, same outputs
    assert "identical tokens: True" in out
    assert "img/s" in out


@pytest.mark.parametrize("argv, message", [
    (["--models", "vit,dinov2"], "'vit', 'dinov2' is not one of vit-b/16, dinov2-s/14"),
    (["--models", ""], "no model"),
    (["--decode-tokens", "0"], "--decode-tokens 0: must be at least 1"),
    (["--repeats", "-1"], "--repeats -1: must be at least 1"),
    (["--device", "tpu"], "--device 'tpu'"),
])
def test_bad_arguments_are_named_with_the_accepted_values(argv, message, capsys):
    main = runpy.run_path(str(ROOT / "benchmarks" / "compare_hf.py"))["main"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_tokenizer_stream_benchmark_runs(capsys):
    main = runpy.run_path(str(ROOT / "benchmarks" / "tokenizer_stream.py"))["main"]
    main(["--megabytes", "0.3", "--vocab", "300"])
    out = capsys.readouterr().out
    assert "encode_iterable:" in out and "peak memory" in out
    with pytest.raises(SystemExit):
        main(["--megabytes", "0"])


def test_check_your_work_benchmark_times_a_fresh_kernels_first_check_and_the_next(capsys):
    main = runpy.run_path(str(ROOT / "benchmarks" / "check_your_work.py"))["main"]
    main(["--assignment", "02-attention", "--learner", "unscaled", "--show"])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("02-attention"))
    first, again = (float(x.rstrip("s")) for x in row.split()[1:3])
    assert first > 0 and again > 0, row
    assert "✗ scaled_dot_product_attention  the fault is in attention_scores" in out, out
