"""The learner's settings extend the session's (`SessionConfig`): each session setting is declared once, and users
set it under the name they always did (config/*.yaml, `ros2 param`): `run_dir`, `learning.rlpd.gamma`, ..."""

from __future__ import annotations

import dataclasses
import inspect

from user.bus.ros_params import ros_params
from user.config.strict import from_mapping
from user.learner.session_config import SessionConfig
from user.nodes.learner import LearnerParams


def test_each_session_setting_is_declared_once_and_keeps_its_name() -> None:
    assert issubclass(LearnerParams, SessionConfig)
    own = inspect.get_annotations(LearnerParams)
    assert not [f.name for f in dataclasses.fields(SessionConfig) if f.name in own]  # none declared again
    names = {p.name for p in ros_params(LearnerParams)}
    session = {"run_dir", "resume", "checkpoint_period_s", "keep_checkpoints", "device", "sync_train_timeout_s"}
    assert session | {"learning.rlpd.gamma", "learning.algorithm", "pacing.mode", "buffer.sampler.kind"} <= names


def test_the_params_as_users_write_them_are_the_session_s_settings() -> None:
    data = {
        "robots": ["arm"],
        "run_dir": "runs/x",
        "resume": False,
        "learning": {"algorithm": "sac", "sac": {"gamma": 0.5}},
        "pacing": {"mode": "sync"},
        "checkpoint_period_s": 5.0,
        "keep_checkpoints": 2,
        "sync_train_timeout_s": 30.0,
    }
    p = from_mapping(LearnerParams, data, where="learner")
    assert (p.run_dir, p.resume, p.learning.sac.gamma, p.pacing.mode) == ("runs/x", False, 0.5, "sync")
    assert (p.checkpoint_period_s, p.keep_checkpoints, p.sync_train_timeout_s, p.device) == (5.0, 2, 30.0, "cpu")
