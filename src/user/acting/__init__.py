"""The rollout's ROS-free core: the learned policy acting for several robots at one site.

`PinnedPolicies` keeps each robot on the weight version that was newest when its episode started (or on the newest
at every step) and one policy copy per version in use; `ActingSession` answers queued observations with one batched
forward pass per version, acts at random while the learner warms up, refuses what is not valid on the way in and on
the way out, and in sync mode says when a robot may be reset. With `send: chunks` it sends a robot that plays
chunks itself its next chunk when one is due (`chunks`: real-time chunking continues the one still playing).
`ActingConfig` (`config`) holds the settings. The rollout node (`user.nodes.rollout`) only moves
observations, actions, weights, receipts and resets on and off the bus.
"""

from user.acting.chunks import ChunkingConfig
from user.acting.config import ActingConfig
from user.acting.pinning import PinnedPolicies, WeightSource
from user.acting.session import ActingSession, ActionSink

__all__ = [
    "ActingConfig",
    "ActingSession",
    "ActionSink",
    "ChunkingConfig",
    "PinnedPolicies",
    "WeightSource",
]
