#!/usr/bin/env python3
"""OASR Scale Benchmark -- CUDA vs PyTorch (takes the flags of oasr_benchmark.py, e.g. --profile --target oasr)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.routines.scale import run_standalone

if __name__ == "__main__":
    run_standalone("scale")
