"""Learning-rate schedules: the rate of gradient step k as a pure function of k, so a resumed run continues the
schedule exactly from its step counter (nothing else to checkpoint).

cosine: a linear warm-up to `lr` over `warmup_steps`, then half a cosine from `lr` down to `lr * final_fraction`
over `decay_steps`, then flat (openpi's CosineDecaySchedule has this shape; the RLinf-USER paper fine-tunes π0 at
1e-5 with a cosine schedule).
"""

from __future__ import annotations

import math
from typing import Literal

ScheduleKind = Literal["constant", "cosine"]
SCHEDULES: tuple[ScheduleKind, ...] = ("constant", "cosine")


def cosine_rate(lr: float, step: int, warmup_steps: int, decay_steps: int, final_fraction: float) -> float:
    """The cosine schedule's rate at gradient step `step` (0 = the first)."""
    if step < warmup_steps:
        return lr * (step + 1) / (warmup_steps + 1)
    progress = min(1.0, (step - warmup_steps) / max(1, decay_steps))
    final = lr * final_fraction
    return final + (lr - final) * 0.5 * (1.0 + math.cos(math.pi * progress))
