"""ASR encoders built from oasr ops."""

from .config import CONFIGS, ConformerConfig
from .reference import ReferenceConformerEncoder, random_state_dict
