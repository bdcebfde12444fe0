"""Tables for people (profiling/readable.py, profiling/workbench/display.py): headers that name the quantity,
numbers in units, no column of dashes left unexplained, and tables that wrap text rather than cut numbers."""

from __future__ import annotations

import re

import pandas as pd

from profiling import readable
from profiling.nsight import source
from profiling.workbench import display, publish

TOP_LINES = ["file", "line", "source", "pct_samples", "inst_executed", "warp_samples", "top_stalls"]


def test_top_line_headers_are_words_not_column_names() -> None:
    headers = [readable.header(c) for c in [*TOP_LINES, "l2_excess_sectors", "shared_excess_wavefronts", "pcs"]]
    assert not [h for h in headers if "_" in h], headers
    assert readable.header("pct_samples") == "% of warp samples" and readable.header("err_over_tol").startswith(
        "error / tolerance"
    )


def test_flop_counts_read_with_a_prefix_and_sizes_in_binary_units() -> None:
    shown = readable.people(pd.DataFrame({"flop": [15_360_000.0, 1.06e9, 12.0], "dram_bytes": [8.2e6, 512.0, 2**30]}))
    assert list(shown["FLOP"]) == ["15.4 M", "1.06 G", "12"]
    assert list(shown["DRAM bytes"]) == ["7.82 MiB", "512 B", "1.00 GiB"]


def test_a_column_without_values_is_left_out_and_named_with_its_reason() -> None:
    table = pd.DataFrame({"op": ["glu"], "seconds": [5e-6], "eager_seconds": [float("nan")]})
    page = display.to_html(table)
    assert "eager (µs)" in page and "no value recorded (column left out): eager (µs)" in page
    assert "<th" not in page.split("eager (µs)")[0][-200:]  # named beneath the table, not as a header
    table.attrs["notes"] = ["eager (µs): not in the recordings of glu, made before the eager latency was timed"]
    explained = display.to_html(table)
    assert explained.count("eager (µs)") == 1 and "made before the eager latency" in explained


def test_numbers_never_wrap_and_text_does() -> None:
    page = display.to_html(pd.DataFrame({"kernel": ["nvjet_sm90_hsh_128x128_64x6_2x1_v_bz_bias_TNT"], "flop": [1e9]}))
    number = re.search(r"#T_\w+_row0_col1 \{([^}]*)\}", page)
    text = re.search(r"#T_\w+_row0_col0 \{([^}]*)\}", page)
    assert number and "white-space: nowrap" in number.group(1)
    assert text and "white-space: normal" in text.group(1) and "overflow-wrap: anywhere" in text.group(1)
    assert "overflow:auto" in page  # a table wider than the page scrolls sideways


def test_source_files_are_shown_relative_to_their_library() -> None:
    recorded = "/work/main/.site/cutlass_library/source/include/cutlass/arch/barrier.h"
    assert source.shown_file(recorded) == "cutlass/include/cutlass/arch/barrier.h"
    assert source.shown_file("/root/oasr/include/oasr/norm.cuh") == "include/oasr/norm.cuh"
    assert (
        source.shown_file("/usr/local/cuda/targets/x86_64-linux/include/cuda_fp16.hpp") == "cuda/include/cuda_fp16.hpp"
    )


def test_the_index_shows_one_commit_length() -> None:
    full = publish._provenance_text({"git_commit": "19474589cc8b6920aef2d1d3570dfbd0ffda54c7"})
    short = publish._provenance_text({"git_commit": "d238755"})
    assert "commit 1947458" in full and "19474589" not in full and "commit d238755" in short
