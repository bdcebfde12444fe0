"""Relative positional encoding: ``x * sqrt(d)`` and the sinusoidal embeddings of the three attention forms.

The tables are computed in float32, as ESPnet and WeNet compute them (an fp32 position times an fp32 frequency,
then sin and cos), and cast to the model's dtype with it: a float64 model sees the fp32 sinusoids a checkpoint was
trained with, as ESPnet's own module does. Row layouts (``oasr/models/config.py``'s :data:`POSITION_FORMS`):

- ``"latest"``: 2T - 1 rows, the relative positions T - 1, ..., 0, ..., -(T - 1);
- ``"legacy"``: T rows, the positions M - 1, ..., M - T (M = ``max_len``, or T when longer: ESPnet's table grows);
- ``"wenet"``: T rows, the positions ``offset`` .. ``offset + T - 1`` (streaming passes the first key's position).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .config import ConformerConfig


def sinusoids(positions: Tensor, d_model: int) -> Tensor:
    """``[P, d]`` float32: ``sin`` and ``cos`` of ``positions * 10000^(-2i/d)`` interleaved (even, odd columns)."""
    frequencies = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
    angles = positions.to(torch.float32).unsqueeze(1) * frequencies
    table = torch.empty(positions.shape[0], d_model, dtype=torch.float32)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table


def position_table(form: str, length: int, d_model: int) -> Tensor:
    """The table a form slices its rows from, for sequences up to ``length`` frames (float32)."""
    if form == "latest":
        return sinusoids(torch.arange(length - 1, -length, -1), d_model)  # length - 1 .. -(length - 1)
    if form == "legacy":
        return sinusoids(torch.arange(length - 1, -1, -1), d_model)
    return sinusoids(torch.arange(0, length), d_model)


def _drop_stored_table(state_dict: dict, prefix: str, *args: object) -> None:
    """WeNet's checkpoints store the table (``embed.pos_enc.pe``), older ESPnet ones too: it is a constant."""
    state_dict.pop(prefix + "pe", None)


class RelPositionalEncoding(torch.nn.Module):
    """``forward(x) -> (x * sqrt(d), pos_emb)``, ``pos_emb`` ``[P, d]`` in ``x``'s dtype (P: 2T - 1 or T rows).

    The table (``pe``, a buffer outside the state_dict) covers ``config.max_len`` frames; longer inputs get a table
    of their own length, built on the call (ESPnet extends its table the same way).
    """

    def __init__(self, config: ConformerConfig) -> None:
        super().__init__()
        self.form = config.position
        self.d_model = config.d_model
        self.max_len = config.max_len
        self.xscale = math.sqrt(config.d_model)
        self.register_buffer("pe", position_table(self.form, config.max_len, config.d_model), persistent=False)
        self._register_load_state_dict_pre_hook(_drop_stored_table)

    def rows(self, frames: int) -> int:
        """How many embeddings ``frames`` frames take: 2T - 1 for ``"latest"``, else T."""
        return 2 * frames - 1 if self.form == "latest" else frames

    def position_embedding(self, frames: int, offset: int = 0, dtype: torch.dtype | None = None) -> Tensor:
        """The ``[P, d]`` embeddings of ``frames`` frames (``offset``: the first key's position, ``"wenet"`` only)."""
        table = self.pe
        if self.form == "latest":
            if frames > self.max_len:
                table = position_table("latest", frames, self.d_model).to(self.pe)
            middle = (table.shape[0] - 1) // 2  # the row of position 0
            rows = table[middle - frames + 1 : middle + frames]
        elif self.form == "legacy":
            if frames > self.max_len:
                table = position_table("legacy", frames, self.d_model).to(self.pe)
            rows = table[:frames]
        else:
            if offset + frames > self.max_len:
                table = position_table("wenet", offset + frames, self.d_model).to(self.pe)
            rows = table[offset : offset + frames]
        return rows if dtype is None else rows.to(dtype)

    def forward(self, x: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        return x * self.xscale, self.position_embedding(x.shape[1], offset, x.dtype)


__all__ = ["RelPositionalEncoding", "position_table", "sinusoids"]
