"""The speed-ups train as eager float32 does on a fixed batch: the prepared path exactly, compiled forwards within
float rounding, bf16 autocast of the encoders within bf16's precision; a compile failure falls back to eager."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from test.learner.speed_setup import host_batch, tiny_algorithm
from user.config.strict import ConfigError, from_mapping
from user.learner import speed
from user.learner.session_config import SessionConfig
from user.learner.speed import FastUpdate, SpeedConfig, SpeedPlan, speed_plan
from user.policies.resnet import ImageStateEncoder

CPU = torch.device("cpu")


def _losses(kind: str, plan: SpeedPlan, prepared: bool, updates: int = 2) -> list[dict[str, float]]:
    torch.manual_seed(0)
    algo = tiny_algorithm(kind)
    fast = FastUpdate(algo, plan)
    out = []
    for k in range(updates):
        batch = host_batch(seed=k)
        stats = fast.update_prepared(fast.prepare(batch)) if prepared else fast.update(batch)
        out.append({**stats.losses, **stats.info})
    return out


def _close(a: list[dict[str, float]], b: list[dict[str, float]], rel: float, abs_: float) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            assert x[k] == pytest.approx(y[k], rel=rel, abs=abs_), (k, x[k], y[k])


def test_auto_is_on_cuda_only_and_the_defaults_keep_cpu_plain() -> None:
    assert speed_plan(SpeedConfig(), CPU) == SpeedPlan()
    cuda = speed_plan(SpeedConfig(), torch.device("cuda"))
    assert cuda == SpeedPlan(prefetch=True, autocast=torch.bfloat16, channels_last=True, compile=True)
    forced = speed_plan(SpeedConfig(prefetch="on", autocast="bf16", channels_last="on", compile="off"), CPU)
    assert forced == SpeedPlan(prefetch=True, autocast=torch.bfloat16, channels_last=True, compile=False)


@pytest.mark.parametrize("kind", ["sac", "rlpd"])
def test_a_prepared_batch_trains_exactly_as_update(kind: str) -> None:
    """RLPD shuffles a prepared batch's rows on the device with the same draw as `update` does on the host."""
    assert _losses(kind, SpeedPlan(), prepared=True) == _losses(kind, SpeedPlan(), prepared=False)


def test_channels_last_gives_the_same_losses() -> None:
    """Only the memory layout of the images changes: float32 all through, equal up to summation order."""
    _close(_losses("sac", SpeedPlan(channels_last=True), True), _losses("sac", SpeedPlan(), True), 1e-4, 1e-5)


def test_bf16_autocast_of_the_encoders_keeps_the_losses_within_bf16_precision() -> None:
    """bfloat16 keeps 8 significant bits (a relative step of 2^-8 = 0.4 %); convolutions sum hundreds of such
    products, so encoder features move by about 1 %, and the losses (float32 from the features on) by a few %.
    One update on the fixed batch: after it, Adam's first step (about lr x the gradient's sign) amplifies any
    difference in a near-zero gradient, so later losses are no longer a measure of the arithmetic."""
    plan = SpeedPlan(autocast=torch.bfloat16, channels_last=True)
    fast = FastUpdate(tiny_algorithm("sac"), plan)
    encoders = [m for m in fast.algorithm.policy.actor.modules() if isinstance(m, ImageStateEncoder)]
    assert encoders and all(e.autocast is torch.bfloat16 and e.channels_last for e in encoders)
    _close(_losses("sac", plan, True, updates=1), _losses("sac", SpeedPlan(), True, updates=1), 0.05, 0.02)


@pytest.mark.slow  # compiling forward and backward graphs on 2 shared cores: ~1 min
@pytest.mark.timeout(600)
def test_compiled_forwards_give_the_eager_losses() -> None:
    """Inductor fuses and reorders float32 arithmetic: equal within float rounding, not bitwise."""
    compiled = _losses("rlpd", SpeedPlan(compile=True), True)
    _close(compiled, _losses("rlpd", SpeedPlan(), True), 1e-4, 1e-5)


def test_a_compile_failure_falls_back_to_eager_with_one_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        raise RuntimeError("no C++ compiler here")

    monkeypatch.setattr(speed, "COMPILE_BACKEND", broken_backend)
    with caplog.at_level(logging.WARNING, logger="user.learner.speed"):
        fell_back = _losses("rlpd", SpeedPlan(compile=True), True)
    lines = [r for r in caplog.records if "torch.compile" in r.getMessage()]
    assert len(lines) == 1 and "training goes on eagerly" in lines[0].getMessage()
    assert "no C++ compiler here" in lines[0].getMessage()
    assert fell_back == _losses("rlpd", SpeedPlan(), True)  # state and random draws put back: exactly eager


def test_an_error_that_is_not_compiling_s_still_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speed, "COMPILE_BACKEND", "eager")
    fast = FastUpdate(tiny_algorithm("sac"), SpeedPlan(compile=True))
    good = host_batch()
    bad = dataclasses.replace(good, action=good.action[:, :1])
    with pytest.raises(Exception, match="acts in 2"):
        fast.update(bad)


def test_the_speed_settings_are_the_learner_s_and_a_wrong_value_is_named() -> None:
    cfg = from_mapping(SessionConfig, {"speed": {"compile": "off", "autocast": "bf16"}}, where="learner")
    assert cfg.speed == SpeedConfig(compile="off", autocast="bf16")
    with pytest.raises(ConfigError, match="autocast"):
        from_mapping(SessionConfig, {"speed": {"autocast": "fp8"}}, where="learner")
