"""SAC: losses against hand-computed values, shapes, loss decrease on a fixed batch, bit-exact checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from test.algorithms.factories import fixed_batch, spy_critic_steps, through_file
from user.algorithms.base import AlgorithmError, TorchBatch, to_torch
from user.algorithms.critics import EnsembleLayerNorm
from user.algorithms.sac import SAC, SACConfig, actor_loss, critic_loss, td_target, temperature_loss
from user.buffer.config import SamplerConfig
from user.config import ConfigError, from_mapping
from user.policies.base import TensorObs
from user.policies.gaussian import GaussianPolicy
from user.policies.mlp import MLPPolicy, MLPPolicyConfig


def _sac(**cfg: object) -> SAC:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    return SAC(policy, from_mapping(SACConfig, {"critic_hidden": [32, 32], **cfg}, where="test"), seed=2)


def test_td_target_by_hand() -> None:
    reward = torch.tensor([1.0, 0.5])
    terminated = torch.tensor([0.0, 1.0])
    next_q = torch.tensor([[2.0, 3.0], [1.0, 4.0]])  # min over members: [1, 3]
    logp = torch.tensor([-1.0, 2.0])
    y = td_target(reward, terminated, next_q, logp, gamma=0.9, alpha=0.5, backup_entropy=True)
    # row 0: 1 + 0.9 * (1 - 0.5 * -1) = 1 + 0.9 * 1.5 = 2.35; row 1: terminated -> 0.5
    assert torch.allclose(y, torch.tensor([2.35, 0.5]))
    y2 = td_target(reward, terminated, next_q, logp, gamma=0.9, alpha=0.5, backup_entropy=False)
    assert torch.allclose(y2, torch.tensor([1.9, 0.5]))


def _td_target(**inputs: torch.Tensor) -> torch.Tensor:
    args = {"reward": torch.zeros(3), "terminated": torch.zeros(3), "next_q": torch.zeros(2, 3)}
    args = {**args, "next_log_prob": torch.zeros(3), **inputs}
    return td_target(**args, gamma=0.9, alpha=0.1, backup_entropy=True)


@pytest.mark.parametrize(
    "inputs",
    [
        {"terminated": torch.zeros(3, 1)},  # a column would broadcast the target to (B, B)
        {"next_log_prob": torch.zeros(3, 1)},
        {"next_q": torch.zeros(3)},  # no member axis
        {"next_q": torch.zeros(2, 3, 1)},
    ],
)
def test_td_target_refuses_misshapen_inputs_instead_of_broadcasting(inputs: dict[str, torch.Tensor]) -> None:
    assert _td_target().shape == (3,)
    with pytest.raises(AssertionError):
        _td_target(**inputs)


@pytest.mark.parametrize(("q", "other"), [((2, 3), (3, 1)), ((2, 3, 1), (3, 1))])
def test_losses_refuse_misshapen_ensemble_values(q: tuple[int, ...], other: tuple[int, ...]) -> None:
    with pytest.raises(AssertionError):
        critic_loss(torch.zeros(q), torch.zeros(other))
    with pytest.raises(AssertionError):
        actor_loss(torch.zeros(q), torch.zeros(other), 0.1, "min")


@pytest.mark.parametrize(("log_alpha", "log_prob"), [((1,), (3,)), ((), (3, 1))])
def test_temperature_loss_refuses_misshapen_inputs(log_alpha: tuple[int, ...], log_prob: tuple[int, ...]) -> None:
    with pytest.raises(AssertionError):
        temperature_loss(torch.zeros(log_alpha, requires_grad=True), torch.zeros(log_prob), -1.0)


def test_critic_loss_by_hand() -> None:
    q = torch.tensor([[1.0, 2.0], [3.0, 0.0]])
    target = torch.tensor([1.0, 1.0])
    loss, info = critic_loss(q, target)
    assert math.isclose(float(loss), (0 + 1 + 4 + 1) / 4)
    assert math.isclose(info["q_mean"], 1.5)
    with pytest.raises(AssertionError):
        critic_loss(q, torch.zeros(3))


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_critic_loss_compares_every_member_with_the_same_constant_target() -> None:
    q = torch.tensor([[1.0, 2.0], [3.0, 0.0], [0.0, 0.0]], requires_grad=True)
    target = torch.tensor([1.0, 3.0], requires_grad=True)
    loss, info = critic_loss(q, target)
    assert math.isclose(float(loss.detach()), (0 + 1 + 4 + 9 + 1 + 9) / 6)
    assert info == {"q_mean": 1.0, "target_mean": 2.0}
    loss.backward()  # type: ignore[no-untyped-call]
    assert target.grad is None and q.grad is not None  # the TD target is a constant of the regression


def test_actor_loss_by_hand() -> None:
    q = torch.tensor([[1.0, 4.0], [3.0, 2.0]])
    logp = torch.tensor([0.5, -1.0])
    loss_min, _ = actor_loss(q, logp, 0.2, "min")  # q_pi = [1, 2]
    assert math.isclose(float(loss_min), ((0.1 - 1) + (-0.2 - 2)) / 2, rel_tol=1e-6)
    loss_mean, info = actor_loss(q, logp, 0.2, "mean")  # q_pi = [2, 3]
    assert math.isclose(float(loss_mean), ((0.1 - 2) + (-0.2 - 3)) / 2, rel_tol=1e-6)
    assert math.isclose(info["entropy"], 0.25)
    assert math.isclose(info["q_pi"], 2.5) and math.isclose(actor_loss(q, logp, 0.2, "min")[1]["q_pi"], 1.5)


def test_temperature_loss_by_hand() -> None:
    log_alpha = torch.tensor(math.log(2.0), requires_grad=True)
    logp = torch.tensor([1.0, -3.0])
    loss, info = temperature_loss(log_alpha, logp, target_entropy=-1.0)
    # -2 * mean(logp + H) = -2 * mean([0, -4]) = 4
    assert math.isclose(float(loss.detach()), 4.0, rel_tol=1e-6)
    loss.backward()  # type: ignore[no-untyped-call]
    assert log_alpha.grad is not None and float(log_alpha.grad.detach()) > 0  # entropy above target: alpha falls
    assert math.isclose(info["temperature"], 2.0, rel_tol=1e-6)


def test_temperature_loss_raises_alpha_when_the_entropy_is_below_the_target() -> None:
    log_alpha = torch.tensor(0.0, requires_grad=True)
    logp = torch.tensor([2.0, 1.0])  # entropy -1.5 < target -1
    loss, _ = temperature_loss(log_alpha, logp, target_entropy=-1.0)
    assert math.isclose(float(loss.detach()), -0.5, rel_tol=1e-6)  # -1 * mean([2 - 1, 1 - 1])
    loss.backward()  # type: ignore[no-untyped-call]
    assert log_alpha.grad is not None and float(log_alpha.grad) < 0  # descent raises log alpha


def test_critic_shapes_and_batch_check() -> None:
    sac = _sac(num_critics=3)
    batch = to_torch(fixed_batch(8), sac.policy)
    assert sac.critic(batch.obs, batch.action).shape == (3, 8)
    with pytest.raises(AlgorithmError):
        sac.update(fixed_batch(8, action_dim=3))


def test_unknown_config_key_fails_loudly() -> None:
    with pytest.raises(ConfigError, match="unknown key 'gama'"):
        from_mapping(SACConfig, {"gama": 0.9}, where="sac")
    with pytest.raises(ConfigError, match="critic_subsample"):
        from_mapping(SACConfig, {"num_critics": 2, "critic_subsample": 3}, where="sac")


def test_defaults_are_the_published_ones() -> None:
    """Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications", Table 1 (and stable-baselines3)."""
    cfg = SACConfig()
    assert (cfg.gamma, cfg.tau, cfg.batch_size) == (0.99, 0.005, 256)
    assert (cfg.actor_lr, cfg.critic_lr, cfg.temperature_lr) == (3e-4, 3e-4, 3e-4)
    assert (cfg.num_critics, cfg.critic_subsample, cfg.critic_hidden, cfg.actor_q) == (2, None, (256, 256), "min")
    assert (cfg.init_temperature, cfg.target_entropy, cfg.backup_entropy) == (1.0, None, True)
    assert (cfg.utd_ratio, cfg.critic_actor_ratio, cfg.critic_layer_norm, cfg.grad_clip) == (1, 1, False, None)
    assert cfg.entropy_target(6) == -6.0 and SACConfig(target_entropy=-0.5).entropy_target(6) == -0.5


def test_critic_loss_decreases_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    sac = _sac(tau=0.0)  # frozen targets: a plain regression problem
    batch = fixed_batch(64)
    first = sac.update(batch).losses["critic"]
    for _ in range(150):
        last = sac.update(batch).losses["critic"]
    assert last < 0.5 * first


def test_actor_loss_decreases_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    sac = _sac(critic_lr=0.0, temperature_lr=0.0)  # fixed critic and temperature: the actor climbs Q
    batch = to_torch(fixed_batch(64), sac.policy)
    first = sac.actor_step(batch)[0]["actor"]
    for _ in range(100):
        last = sac.actor_step(batch)[0]["actor"]
    assert last < first


def test_temperature_is_tuned_unless_its_learning_rate_is_zero() -> None:
    tuned, fixed = _sac(init_temperature=0.5), _sac(init_temperature=0.5, temperature_lr=0.0)
    for _ in range(5):
        tuned.update(fixed_batch(64))
        fixed.update(fixed_batch(64))
    assert tuned.alpha != pytest.approx(0.5, abs=1e-6)
    assert fixed.alpha == pytest.approx(0.5, abs=1e-9)


def test_critic_actor_ratio_and_utd() -> None:
    sac = _sac(utd_ratio=4, critic_actor_ratio=2)
    stats = sac.update(fixed_batch(64))
    assert stats.updates == 4 and sac.critic_steps == 4 and sac.actor_steps == 2


def _state_equal(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_state_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_state_equal, a, b))
    return a == b


def test_checkpoint_round_trip_is_bit_exact(tmp_path: Path) -> None:
    torch.manual_seed(0)
    sac = _sac(critic_subsample=1)
    batch = fixed_batch(32)
    for _ in range(3):
        sac.update(batch)
    other = _sac(critic_subsample=1)
    through_file(sac, other, tmp_path / "ckpt.pt")
    assert _state_equal(sac.state_dict(), other.state_dict())
    assert torch.equal(sac.policy.get_weights().data, other.policy.get_weights().data)
    torch.manual_seed(5)
    a = sac.update(batch)
    torch.manual_seed(5)
    b = other.update(batch)
    assert a == b
    assert _state_equal(sac.state_dict(), other.state_dict())


def test_critic_subsample_must_fit_the_ensemble() -> None:
    for bad in (0, 3):
        with pytest.raises(ValueError, match=r"critic_subsample must be in 1\.\.num_critics \(2\)"):
            SACConfig(num_critics=2, critic_subsample=bad)
    assert [SACConfig(num_critics=2, critic_subsample=m).critic_subsample for m in (1, 2, None)] == [1, 2, None]


def test_construction_is_seeded_and_leaves_the_global_generator_alone() -> None:
    state = torch.random.get_rng_state()
    a, b = _sac(num_critics=5, critic_subsample=2), _sac(num_critics=5, critic_subsample=2)
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    c = SAC(policy, SACConfig(critic_hidden=(32, 32), num_critics=5, critic_subsample=2), seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(x, y) for x, y in zip(a.critic.parameters(), b.critic.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.critic.parameters(), c.critic.parameters(), strict=True))
    draws = [[tuple(s.target_members().tolist()) for _ in range(8)] for s in (a, b, c)]
    assert draws[0] == draws[1] != draws[2]  # the members of the target come from the learner's own seed


def test_temperature_starts_at_init_temperature_and_aims_at_minus_action_dim_by_default() -> None:
    assert _sac(init_temperature=0.25).alpha == pytest.approx(0.25)
    assert _sac().target_entropy == -2.0
    assert _sac(target_entropy=-0.5).target_entropy == -0.5


@pytest.mark.parametrize(("target_entropy", "grows"), [(5.0, True), (-50.0, False)])
def test_alpha_grows_when_the_policy_entropy_is_below_the_target(target_entropy: float, grows: bool) -> None:
    sac = _sac(target_entropy=target_entropy, temperature_lr=1e-2, init_temperature=0.5)
    for _ in range(3):
        sac.update(fixed_batch(16))
    assert sac.alpha != pytest.approx(0.5, abs=1e-3)
    assert (sac.alpha > 0.5) == grows


def test_utd_ratio_splits_the_batch_into_that_many_critic_steps() -> None:
    sac = _sac(utd_ratio=3)
    batch = fixed_batch(12)
    seen = spy_critic_steps(sac)
    stats = sac.update(batch)
    assert [len(b) for b in seen] == [4, 4, 4]
    assert torch.equal(torch.cat([b.reward for b in seen]), torch.as_tensor(batch.reward))  # every row once
    assert stats.updates == sac.critic_steps == 3
    assert _sac(utd_ratio=3).update(fixed_batch(3)).updates == 3  # one row per slice is enough
    with pytest.raises(AlgorithmError, match=r"a batch of 2 cannot be split into utd_ratio=3 slices"):
        _sac(utd_ratio=3).update(fixed_batch(2))


def test_actor_and_temperature_step_once_every_critic_actor_ratio_critic_steps() -> None:
    sac = _sac(critic_actor_ratio=3)
    batch = fixed_batch(16)
    stepped = []
    for _ in range(7):
        actor, alpha = sac.policy.get_weights().data.clone(), sac.alpha
        stats = sac.update(batch)
        moved = not torch.equal(sac.policy.get_weights().data, actor)
        assert moved == ("actor" in stats.losses) == ("temperature" in stats.losses) == (sac.alpha != alpha)
        stepped.append(moved)
    assert stepped == [False, False, True, False, False, True, False]  # after the 3rd and the 6th critic step
    assert (sac.critic_steps, sac.actor_steps) == (7, 2)


def _grad_norms(optim: torch.optim.Optimizer) -> list[float]:
    """The total gradient norm of `optim`'s parameters at each of its steps."""
    norms: list[float] = []

    def hook(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        grads = [p.grad.norm() for group in opt.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack(grads))))

    optim.register_step_pre_hook(hook)
    return norms


@pytest.mark.parametrize("clip", [None, 1e-3])
def test_grad_clip_bounds_the_gradient_norm_of_every_step(clip: float | None) -> None:
    sac = _sac(grad_clip=clip)
    norms = {name: _grad_norms(getattr(sac, name)) for name in ("critic_optim", "actor_optim", "temperature_optim")}
    for _ in range(2):
        sac.update(fixed_batch(16))
    for name, values in norms.items():
        assert len(values) == 2, name
        if clip is None:
            assert max(values) > 1e-2, name  # the clip below is really active
        else:
            assert max(values) <= clip * (1 + 1e-4), name


@pytest.mark.parametrize("reduce", ["min", "mean"])
def test_actor_step_climbs_the_configured_ensemble_q_and_leaves_the_critic_alone(reduce: str) -> None:
    sac = _sac(actor_q=reduce, num_critics=3, init_temperature=0.3)
    batch = to_torch(fixed_batch(8), sac.policy)
    critic = [p.detach().clone() for p in sac.critic.parameters()]
    torch.manual_seed(4)
    with torch.no_grad():
        action, log_prob = sac.policy.sample(batch.obs)
        q = sac.critic(batch.obs, action)
        q_pi = q.min(dim=0).values if reduce == "min" else q.mean(dim=0)
        expected_actor = float((0.3 * log_prob - q_pi).mean())
        expected_temperature = float((-0.3 * (log_prob + sac.target_entropy)).mean())
    torch.manual_seed(4)
    losses, info = sac.actor_step(batch)
    assert losses["actor"] == pytest.approx(expected_actor, rel=1e-5)
    assert losses["temperature"] == pytest.approx(expected_temperature, rel=1e-5)
    assert info["q_pi"] == pytest.approx(float(q_pi.mean()), rel=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(critic, sac.critic.parameters(), strict=True))
    assert sac.actor_steps == 1


def test_update_reports_losses_diagnostics_and_the_step_count() -> None:
    sac = _sac(init_temperature=0.5)
    stats = sac.update(fixed_batch(16))
    assert stats.updates == 1
    assert set(stats.losses) == {"critic", "actor", "temperature"}
    assert {"q_mean", "target_mean", "entropy", "q_pi", "temperature"} <= set(stats.info)
    assert stats.info["temperature"] == sac.alpha != 0.5  # the temperature after the step


def test_load_state_dict_restores_everything_a_resumed_learner_needs(tmp_path: Path) -> None:
    torch.manual_seed(0)
    settings = {"critic_subsample": 1, "num_critics": 3, "tau": 0.1}
    sac = _sac(**settings)
    sac.policy.version = 7
    batch = fixed_batch(16)
    for _ in range(3):
        sac.update(batch)
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=9))
    other = SAC(policy, from_mapping(SACConfig, {"critic_hidden": [32, 32], **settings}, where="test"), seed=8)
    through_file(sac, other, tmp_path / "ckpt.pt")
    assert other.policy.version == 7
    assert other.alpha == sac.alpha and (other.critic_steps, other.actor_steps) == (3, 3)
    for a, b in zip(sac.target_critic.parameters(), other.target_critic.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(other.generator.get_state(), sac.generator.get_state())
    assert _state_equal(sac.state_dict(), other.state_dict())
    for _ in range(2):
        torch.manual_seed(5)
        stats = sac.update(batch)
        torch.manual_seed(5)
        assert other.update(batch) == stats
    assert _state_equal(sac.state_dict(), other.state_dict())


def test_critics_targets_and_temperature_live_on_the_policy_device() -> None:
    # "meta": a device other than the host that needs no hardware (tensors without storage)
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(8,), seed=1)).to("meta")
    sac = SAC(policy, SACConfig(critic_hidden=(8,)))
    tensors = [*sac.critic.parameters(), *sac.target_critic.parameters(), sac.log_alpha]
    assert {t.device for t in tensors} == {torch.device("meta")}


class PulledSAC(SAC):
    """SAC with an actor regulariser (like SAC-Flow's BC term) pulling the deterministic action to 0.5."""

    def actor_regulariser(self, batch: TorchBatch) -> tuple[torch.Tensor, dict[str, float], dict[str, float]]:
        assert isinstance(self.policy, GaussianPolicy)
        mean, _ = self.policy.dist_params(batch.obs)
        pull = (torch.tanh(mean) - 0.5).pow(2).mean()
        return 10.0 * pull, {"pull": float(pull.detach())}, {"pulled": 1.0}


def test_an_actor_regulariser_is_minimised_with_the_actor_loss_and_reported() -> None:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    sac = PulledSAC(policy, SACConfig(critic_hidden=(32, 32), critic_lr=0.0, temperature_lr=0.0, actor_lr=1e-2))
    batch = to_torch(fixed_batch(16), policy)
    losses, info = sac.actor_step(batch)
    first = losses["pull"]
    assert info["pulled"] == 1.0 and {"actor", "temperature"} <= set(losses)
    for _ in range(20):
        losses, _ = sac.actor_step(batch)
    assert losses["pull"] < 0.5 * first


def _image_batch(n: int = 6) -> TorchBatch:
    g = torch.Generator().manual_seed(5)
    obs = TensorObs(torch.randn(n, 3, generator=g), {"wrist": torch.rand(n, 3, 12, 12, generator=g)})
    nxt = TensorObs(torch.randn(n, 3, generator=g), {"wrist": torch.rand(n, 3, 12, 12, generator=g)})
    return TorchBatch(
        obs, torch.rand(n, 2, generator=g), torch.randn(n, generator=g), nxt, torch.zeros(n),
        torch.arange(n) % 2 == 0, torch.arange(n) % 3 == 0,
    )  # fmt: skip


def test_drq_shifts_both_observations_images_reproducibly_and_nothing_else() -> None:
    """What each gradient step trains on with `augmentation: drq`: the images of obs and next_obs randomly
    shifted (from the algorithm's seeded generator, so two runs agree), every other field as sampled."""
    batch = _image_batch()
    assert _sac()._augment(batch) is batch  # augmentation "none": the batch as sampled
    a, b = _sac(augmentation="drq", drq_pad=2), _sac(augmentation="drq", drq_pad=2)
    out, again = a._augment(batch), b._augment(batch)
    for side in ("obs", "next_obs"):
        before, after = getattr(batch, side), getattr(out, side)
        assert after.images["wrist"].shape == before.images["wrist"].shape
        assert not torch.equal(after.images["wrist"], before.images["wrist"]), side
        assert torch.equal(after.state, before.state)
        assert torch.equal(after.images["wrist"], getattr(again, side).images["wrist"]), "seeded shifts"
    for name in ("action", "reward", "terminated", "is_demo", "intervened"):
        assert getattr(out, name) is getattr(batch, name), name
    unshifted = _sac(augmentation="drq", drq_pad=0)._augment(batch)
    assert torch.equal(unshifted.obs.images["wrist"], batch.obs.images["wrist"])


@pytest.mark.parametrize("layer_norm", [True, False])
def test_the_configured_learning_rates_and_critic_layer_norm_are_used(layer_norm: bool) -> None:
    sac = _sac(actor_lr=1e-4, critic_lr=2e-4, temperature_lr=5e-4, critic_layer_norm=layer_norm)
    lrs = [o.param_groups[0]["lr"] for o in (sac.actor_optim, sac.critic_optim, sac.temperature_optim)]
    assert lrs == [1e-4, 2e-4, 5e-4]
    assert any(isinstance(m, EnsembleLayerNorm) for m in sac.critic.modules()) is layer_norm


def test_its_settings_build_it_and_size_its_update_calls() -> None:
    config = from_mapping(SACConfig, {"critic_hidden": [32, 32], "batch_size": 48, "utd_ratio": 3}, where="test")
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    sac = config.build(policy, seed=2)
    assert type(sac) is SAC and sac.policy is policy and sac.config is config
    assert torch.equal(sac.generator.get_state(), torch.Generator().manual_seed(2).get_state())  # its seed
    assert (config.rows_per_update(), config.gradient_steps_per_update()) == (48, 3)
    auto = SamplerConfig(seed=5)
    assert config.auto_sampler(auto) is auto  # as it is: half demonstrations once there are any
