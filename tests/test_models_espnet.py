"""The torch reference encoder (oasr/models/reference.py) against ESPnet's own ConformerEncoder, in float64 on CPU.

Skipped unless the PyPI package ``espnet`` is importable (the test command does not install it). To run it::

    python3 -m venv /tmp/venv-espnet --system-site-packages
    /tmp/venv-espnet/bin/pip install --no-deps espnet typeguard humanfriendly
    /tmp/venv-espnet/bin/python -m pytest tests/test_models_espnet.py -q

(``--no-deps``: the encoder's modules import torch, typeguard and humanfriendly only; ESPnet's full dependency set
pins other torch versions.) Both encoders load one state_dict, strictly, so the key names are the same. Full-length
batches match to float64 rounding; on a padded batch (the latest form) each utterance's valid frames match ESPnet's
output for that utterance alone (ESPnet's convolution module reads padded frames, the reference's does not:
``reference.py``).
"""

from __future__ import annotations

import pytest
import torch

from oasr.models import ConformerConfig, ReferenceConformerEncoder, random_state_dict

conformer_encoder = pytest.importorskip("espnet2.asr.encoder.conformer_encoder")

ATOL = 1e-10
"""float64, O(1) outputs: the two compute the same operations in about the same order."""


def espnet_encoder(config: ConformerConfig) -> torch.nn.Module:
    return conformer_encoder.ConformerEncoder(
        input_size=config.input_dim,
        output_size=config.d_model,
        attention_heads=config.heads,
        linear_units=config.ff_dim,
        num_blocks=config.layers,
        dropout_rate=0.0,
        positional_dropout_rate=0.0,
        attention_dropout_rate=0.0,
        input_layer="conv2d",
        normalize_before=True,
        macaron_style=True,
        rel_pos_type=config.position,
        pos_enc_layer_type="rel_pos",
        selfattention_layer_type="rel_selfattn",
        activation_type="swish",
        use_cnn_module=True,
        cnn_module_kernel=config.kernel_size,
        max_pos_emb_len=config.max_len,
    )


def pair(position: str, **changes: object) -> tuple[torch.nn.Module, ReferenceConformerEncoder, ConformerConfig]:
    config = ConformerConfig(d_model=64, heads=2, ff_dim=96, layers=2, kernel_size=7, position=position, **changes)
    state = random_state_dict(config, seed=3)
    espnet = espnet_encoder(config)
    espnet.load_state_dict(state)  # strict: ESPnet's keys are the reference's
    reference = ReferenceConformerEncoder(config)
    reference.load_state_dict(espnet.state_dict())
    assert list(reference.state_dict()) == list(espnet.state_dict())
    return espnet.eval().double(), reference.double(), config


def features(batch: int, frames: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, frames, 80, generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("position", ["latest", "legacy"])
@pytest.mark.parametrize("frames", [7, 61, 203])
def test_reference_matches_espnet_on_full_batches(position, frames):
    espnet, reference, _ = pair(position)
    feats = features(2, frames, seed=frames)
    lengths = torch.full((2,), frames)
    with torch.no_grad():
        expected, expected_lengths, _ = espnet(feats, lengths)
        actual, actual_lengths = reference(feats, lengths)
    assert actual.shape == expected.shape and actual.dtype == torch.float64
    torch.testing.assert_close(actual, expected, rtol=0, atol=ATOL)
    assert actual_lengths.tolist() == expected_lengths.tolist()


def test_padded_batch_gives_each_utterance_its_espnet_output():
    """(Not for "legacy": there the embeddings of a T-frame batch depend on T, and the old rel_shift mixes the next
    query's row into each query's scores, so ESPnet's own legacy output depends on the padding.)"""
    espnet, reference, _ = pair("latest")
    lengths = torch.tensor([203, 150, 31, 7])
    feats = features(4, 203, seed=1)
    with torch.no_grad():
        actual, actual_lengths = reference(feats, lengths)
        for b, length in enumerate(lengths.tolist()):
            alone, alone_lengths, _ = espnet(feats[b : b + 1, :length], lengths[b : b + 1])
            assert actual_lengths[b] == alone_lengths[0] == alone.shape[1]
            torch.testing.assert_close(actual[b, : alone.shape[1]], alone[0], rtol=0, atol=ATOL)


def test_legacy_positions_follow_espnets_table_length():
    """ESPnet's legacy embeddings are positions M - 1 .. M - T of its M-row table (``max_len``, or T when longer)."""
    espnet, reference, _ = pair("legacy", max_len=40)
    feats = features(1, 203, seed=2)  # T' = 49 > max_len: both grow their table to T'
    with torch.no_grad():
        expected, _, _ = espnet(feats, torch.tensor([203]))
        actual, _ = reference(feats, torch.tensor([203]))
    torch.testing.assert_close(actual, expected, rtol=0, atol=ATOL)
