"""Stream-K's workspace for the gemm and bmm launchers: the partial accumulator tiles and their barriers.

One buffer per device, shared by every stream-K module and grown (doubling) to the largest call's need;
a buffer it outgrows stays allocated, as a CUDA graph captured with it may still replay. The launchers
clear its barriers on their stream before each kernel, so calls on two streams at once must not both run
stream-K modules (order them with an event).
"""

from __future__ import annotations

import torch
from torch import Tensor

_WORKSPACES: dict[torch.device, list[Tensor]] = {}
"""Each device's workspaces, the one in use last."""


def stream_k_workspace(size: int, device: torch.device) -> Tensor:
    """A uint8 buffer of at least ``size`` bytes on ``device`` (the device's, grown when too small)."""
    buffers = _WORKSPACES.setdefault(device, [])
    if not buffers or buffers[-1].numel() < size:
        grown = max(size, 2 * buffers[-1].numel()) if buffers else size
        buffers.append(torch.empty(grown, dtype=torch.uint8, device=device))
    return buffers[-1]
