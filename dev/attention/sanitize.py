"""Odd shapes through every attention kernel (both head sizes, plain, ESPnet-shifted and WeNet-unshifted), for
compute-sanitizer:

    compute-sanitizer --tool memcheck python3 dev/attention/sanitize.py
    compute-sanitizer --tool racecheck python3 dev/attention/sanitize.py

T = 1, 65 (a partial query and key block) and 130 (three blocks), key lengths with a 1 and a 0, and a chunk mask
with one chunk left (skipped key blocks); bf16, q, k, v the views of one packed QKV. Correctness is the tests'
(tests/test_attention.py); this runs the launches only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import oasr

DTYPE = torch.bfloat16


def main() -> None:
    torch.manual_seed(0)
    launches = 0
    for d in (64, 128):
        for t in (1, 65, 130):
            b, h = 3, 2
            qkv = torch.randn(b, t, 3, h, d, device="cuda", dtype=DTYPE)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
            u, vb = (0.1 * torch.randn(h, d, device="cuda", dtype=DTYPE) for _ in range(2))
            lengths = torch.tensor([t, 1, 0], dtype=torch.int32, device="cuda")
            for chunk, left in ((None, None), (16, 1)):
                oasr.attention(q, k, v, lengths, chunk_size=chunk, left_chunks=left)
                for shift in (True, False):
                    p = torch.randn(2 * t - 1 if shift else t, h, d, device="cuda", dtype=DTYPE)
                    oasr.rel_pos_attention(q, k, v, p, u, vb, lengths, shift, chunk_size=chunk, left_chunks=left)
                launches += 3
    torch.cuda.synchronize()
    print(f"sanitize run done: {launches} launches")


if __name__ == "__main__":
    main()
