"""A π0-shaped vision-language-action model built from stock transformers classes (optional extra `vla`).

Import this package only where the model is used: it needs transformers, safetensors and tokenizers. One module
per concern: `config` (sizes, the transformers configs), `masks` (π0's attention mask), `backbone` (PaliGemma
prefix and Gemma action expert with joint attention), `flow` (flow matching and the Euler sampler), `model`
(the model, its chunk loss and sampler), `tokenizer`, `checkpoint` (the checkpoint directory), `names` (the
published checkpoints' tensor names), `rtc` (real-time chunking: a chunk sampled to continue the
actions still executed), `vla` (the model behind `user.policies.vla.VLAModel`), `kind` (the
learner's `vla` policy kind: its settings and builder).
"""

from user.policies.pi0.checkpoint import load, save
from user.policies.pi0.config import PI0_SIZE, TEST_SIZE, GemmaSize, Pi0Config, VisionSize
from user.policies.pi0.errors import CheckpointError, Pi0Error
from user.policies.pi0.model import Pi0Model, Pi0Observation
from user.policies.pi0.names import published_names
from user.policies.pi0.rtc import RtcConfig, sample_continuing, soft_mask
from user.policies.pi0.tokenizer import TokenBatch, tokenize, train_word_tokenizer
from user.policies.pi0.vla import Pi0VLA

__all__ = [
    "PI0_SIZE",
    "TEST_SIZE",
    "CheckpointError",
    "GemmaSize",
    "Pi0Config",
    "Pi0Error",
    "Pi0Model",
    "Pi0Observation",
    "Pi0VLA",
    "RtcConfig",
    "TokenBatch",
    "VisionSize",
    "load",
    "published_names",
    "sample_continuing",
    "save",
    "soft_mask",
    "tokenize",
    "train_word_tokenizer",
]
