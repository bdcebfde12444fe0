"""ASR encoders composed of oasr ops, with their plain-torch references.

::

    import oasr
    encoder = oasr.models.ConformerEncoder.from_config("wenet")  # bfloat16, random weights, on the GPU
    out, out_lengths = encoder(feats, lengths)                   # feats [B, T, 80], lengths [B]

- :class:`ConformerEncoder` (``encoder.py``): ESPnet/WeNet's Conformer with their state_dict keys;
  :meth:`~ConformerEncoder.graphed` (``graphs.py``) replays CUDA graphs, :meth:`~ConformerEncoder.stream`
  (``streaming.py``) runs chunk by chunk;
- :class:`ReferenceConformerEncoder` (``reference.py``): the same module in plain torch, any dtype;
- :class:`ConformerConfig` and :data:`CONFIGS` (``config.py``); the positional tables (``positional.py``); the
  attention dispatch (``attention.py``).
"""

from .config import CONFIGS as CONFIGS
from .config import ConformerConfig as ConformerConfig
from .encoder import ConformerEncoder as ConformerEncoder
from .graphs import GraphedEncoder as GraphedEncoder
from .reference import ReferenceConformerEncoder as ReferenceConformerEncoder
from .reference import random_state_dict as random_state_dict
from .streaming import ConformerStream as ConformerStream
