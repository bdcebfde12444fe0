"""The configuration rules' picks, pinned on a table of shapes (CPU).

``gemm_config.choose`` (gemm and bmm, bare and with a bias/activation epilogue), ``gemm_config.choose_group`` and
``conv2d_config.choose`` at the band edges of each rule and on the shapes they were measured on (with the H200's 132
SMs, passed explicitly). A change of which configuration runs a shape shows here first; the why of each rule is beside
it, the measurements in dev/<family>/RESULTS.md.
"""

from __future__ import annotations

import pytest
import torch

from oasr.jit import conv2d_config, gemm_config

GEMM_PICKS = [  # (m, n, k, batch, bare pick, fused pick)
    (1, 1, 1, 1, "64x64x64_c1x1_pingpong_s0", "128x128x64_c1x1_cooperative_s0"),
    (8000, 256, 256, 1, "128x128x64_c1x1_nonpersistent_s0", "64x128x64_c1x1_nonpersistent_s4"),
    (8000, 1024, 256, 1, "128x128x64_c1x1_pingpong_s0", "128x128x64_c1x1_direct_s0"),
    (8000, 256, 1024, 1, "128x128x64_c1x1_nonpersistent_s0", "64x128x64_c1x1_nonpersistent_s4"),
    (1500, 2048, 512, 1, "128x192x64_c1x1_nonpersistent_s0", "128x192x64_c1x1_tail_s0"),
    (1500, 512, 2048, 1, "64x128x64_c1x1_nonpersistent_s0", "128x128x64_c1x1_cooperative_s0"),
    (16000, 512, 512, 1, "128x128x64_c1x1_pingpong_s0", "128x128x64_c1x1_direct_s0"),
    (24000, 2048, 512, 1, "128x128x64_c1x1_pingpong_s0", "128x128x64_c1x1_direct_s0"),
    (16000, 2048, 2048, 1, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (24000, 128, 1024, 1, "128x128x64_c1x1_pingpong_s0", "128x128x64_c1x1_cooperative_s0"),
    (4224, 256, 256, 1, "64x128x64_c1x1_nonpersistent_s0", "128x128x64_c1x1_cooperative_s0"),
    (4225, 256, 256, 1, "128x128x64_c1x1_nonpersistent_s0", "64x128x64_c1x1_nonpersistent_s4"),
    (8448, 256, 256, 1, "128x128x64_c1x1_nonpersistent_s0", "64x128x64_c1x1_nonpersistent_s4"),
    (8449, 256, 256, 1, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (1500, 2112, 512, 1, "128x192x64_c1x1_nonpersistent_s0", "128x192x64_c1x1_tail_s0"),
    (1500, 2113, 512, 1, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (1500, 2304, 512, 1, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (12672, 512, 512, 1, "128x128x64_c1x1_pingpong_s0", "128x128x64_c1x1_direct_s0"),
    (12672, 512, 513, 1, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (12544, 512, 512, 1, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (8000, 64, 256, 1, "64x64x64_c1x1_pingpong_s0", "128x128x64_c1x1_cooperative_s0"),
    (8000, 65, 256, 1, "64x128x64_c1x1_nonpersistent_s0", "128x128x64_c1x1_cooperative_s0"),
    (375, 64, 375, 64, "64x64x64_c1x1_pingpong_s0", "128x128x64_c1x1_cooperative_s0"),
    (375, 375, 64, 64, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (375, 375, 64, 8, "128x128x64_c1x1_nonpersistent_s0", "64x128x64_c1x1_nonpersistent_s4"),
    (375, 375, 64, 4, "64x128x64_c1x1_nonpersistent_s0", "128x128x64_c1x1_cooperative_s0"),
    (750, 2048, 512, 2, "128x192x64_c1x1_nonpersistent_s0", "128x192x64_c1x1_nonpersistent_s0"),
    (7, 9000, 4096, 1, "128x128x64_c1x1_nonpersistent_s0", "64x128x64_c1x1_nonpersistent_s4"),
    (7, 9000, 4096, 300, "128x128x64_c1x1_pingpong_s0", "128x256x64_c1x1_cooperative_s0"),
    (24000, 375, 64, 1, "128x128x64_c1x1_pingpong_s0", "128x128x64_c1x1_direct_s0"),
]

GROUP_PICKS = [  # (n, k, groups, pick)
    (1024, 256, 8, "128x128x64_c1x1_direct_s0"),
    (64, 64, 32, "128x128x64_c1x1_direct_s0"),
    (128, 64, 1024, "128x128x64_c1x1_direct_s0"),
    (256, 2048, 64, "256x128x64_c1x1_cooperative_s0"),
    (128, 4096, 2, "256x128x64_c1x1_cooperative_s0"),
    (257, 2048, 1, "128x128x64_c1x1_pingpong_s0"),
    (512, 2048, 64, "128x128x64_c1x1_pingpong_s0"),
    (1024, 256, 1025, "128x256x64_c1x1_cooperative_s0"),
    (255, 8, 4096, "128x128x64_c2x1_cooperative_s0"),
    (256, 2047, 1025, "128x256x64_c1x1_cooperative_s0"),
    (256, 2047, 1024, "128x128x64_c1x1_direct_s0"),
    (8, 8, 1, "128x128x64_c1x1_direct_s0"),
]

CONV2D_PICKS = [  # (output channels, pick)
    (8, "128x64x64_c1x1"),
    (40, "128x64x64_c1x1"),
    (64, "128x64x64_c1x1"),
    (65, "128x128x64_c1x1"),
    (72, "128x128x64_c1x1"),
    (128, "256x128x64_c1x1_wg2"),
    (192, "128x128x64_c1x1"),
    (256, "128x256x64_c1x1_wg2"),
    (384, "256x128x64_c1x1_wg2"),
    (512, "128x256x64_c1x1_wg2"),
    (640, "256x128x64_c1x1_wg2"),
    (768, "128x256x64_c1x1_wg2"),
]


@pytest.mark.parametrize("m,n,k,batch,bare,fused", GEMM_PICKS, ids=lambda v: str(v))
def test_gemm_rule(m, n, k, batch, bare, fused):
    assert gemm_config.choose(m, n, k, batch, sms=132).name == bare
    assert gemm_config.choose(m, n, k, batch, fused=True, sms=132).name == fused


def test_the_gemm_rule_counts_waves_of_the_gpus_sms():
    """The bands are waves of one CTA per SM: 126 tiles of 128x128 are one wave of an H200 (132 SMs), more than one on
    a GPU of 114; without a GPU the rule takes the H200's count."""
    assert gemm_config.choose(8000, 256, 256, sms=132) == gemm_config.ONE_WAVE
    assert gemm_config.choose(8000, 256, 256, sms=114) == gemm_config.MANY_WAVES
    assert gemm_config.choose(8000, 256, 256, fused=True, sms=114) == gemm_config.FUSED_WIDE
    if not torch.cuda.is_available():
        assert gemm_config.sm_count() == gemm_config.H200_SMS == 132
    else:
        assert gemm_config.sm_count() == torch.cuda.get_device_properties(0).multi_processor_count


@pytest.mark.parametrize("n,k,groups,pick", GROUP_PICKS, ids=lambda v: str(v))
def test_group_gemm_rule(n, k, groups, pick):
    assert gemm_config.choose_group(n, k, groups).name == pick


@pytest.mark.parametrize("k,pick", CONV2D_PICKS, ids=lambda v: str(v))
def test_conv2d_rule(k, pick):
    assert conv2d_config.choose(k).name == pick


def test_every_pick_is_prebuilt():
    """``python -m oasr.jit build --all`` builds every module the rules pick: each shape of the tables, each dtype and
    epilogue."""
    gemm = {v.name for v in gemm_config.gemm_variants()}
    bmm = {v.name for v in gemm_config.bmm_variants()}
    group = {v.name for v in gemm_config.group_gemm_variants()}
    conv = {v.name for v in conv2d_config.implicit_gemm_variants()}
    for dtype in gemm_config.DTYPES:
        for m, n, k, batch, _, _ in GEMM_PICKS:
            for epilogue in gemm_config.EPILOGUES:
                config = gemm_config.choose(m, n, k, 1, fused=epilogue != "plain", sms=132)
                assert gemm_config.gemm_variant(dtype, epilogue, config).name in gemm
            for nn in (False, True):
                assert gemm_config.bmm_variant(dtype, nn, gemm_config.choose(m, n, k, batch, sms=132)).name in bmm
        assert gemm_config.gemm_variant(dtype, "glu", gemm_config.DIRECT).name in gemm
        for n, k, groups, _ in GROUP_PICKS:
            for bias in (False, True):
                assert gemm_config.group_gemm_variant(dtype, gemm_config.choose_group(n, k, groups), bias).name in group
        for k, _ in CONV2D_PICKS:
            for activation in conv2d_config.ACTIVATIONS:
                config = conv2d_config.choose(k)
                assert conv2d_config.implicit_gemm_variant(dtype, activation, config).name in conv
