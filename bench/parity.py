"""Parity benchmark (issue 14): does the pipeline learn as well as the field's standard SAC, step for step, and
how long does it take per env step?

The same gymnasium envs for the same number of env steps, N seeds, three variants side by side in one run:

  sb3       (a) stable-baselines3's SAC with CleanRL's settings: gamma 0.99, tau 0.005, batch 256, replay buffer
            1e6, automatic entropy (target -dim A, initial temperature 1), one gradient step per env step
            (train_freq 1, gradient_steps 1) after `learning_starts` uniformly random steps, two 256-256 critics,
            a 256-256 actor. SB3 has ONE learning rate for actor, critics and temperature (it re-sets every
            optimiser to it before each update), so CleanRL's q_lr 1e-3 cannot be had: every variant uses
            --lr (3e-4) for actor, critics and temperature alike, so that the three differ in nothing but
            the implementation.
  plain     (b) the project's SAC (`LearningConfig(algorithm="sac")`, `build_policy`, `build_algorithm`, the same
            hyperparameters) in one plain process loop: the env steps with the project's policy acting
            (uniformly random for the first `learning_starts` steps), transitions go into numpy arrays, and
            after `learning_starts` every env step is followed by one `update` on 256 transitions drawn
            uniformly. Actions in [-1, 1] are mapped linearly onto the env's Box, as the gym driver does.
  pipeline  (c) the full pipeline: `user bringup` of a deployment written here (private Zenoh router): a
            `driver: gym` robot (realtime false: lockstep with the policy, held back by the learner's data
            credit), the learner (SAC, async, `updates_per_step` 1, `min_transitions` = learning_starts,
            `stop_after: {env_steps: N}`) and the rollout (`random_steps` = learning_starts), each its own
            process. The learner ends the run itself (bringup exits 0). Its returns are read from the run
            directory's episodes.csv. The rollout applies new weights at episode boundaries (the learner
            publishes every `pacing.publish_every` = 50 updates), which (a) and (b) do not need to;
            --rollout-apply immediate and --publish-every N change both.

What still differs between (a) and (b)/(c), by design of SB3: its actor clamps the log std to [-20, 2] (the
project's, like CleanRL's, squashes it into [-5, 2]); its temperature loss is -log(alpha) (log pi + target)
(the project's and CleanRL's -alpha (log pi + target)). Both bootstrap through time-limit truncations.
And in (c), by design of the pipeline: the learner trains only on whole stored episodes, a robot that is not real
time may run ahead of the ratio by `credit_tolerance` (256) transitions plus its running episode. At N
transitions received the learner does the update calls it still owes for the episodes stored by then (robots get
no more credit meanwhile: `stop_after.catch_up_s`), so (c) takes as many gradient steps per env step as (a) and
(b) (counted over its stored episodes, as its returns are). The table's `upd/step` column (gradient steps per
env step after the warm-up) shows what each variant did.

What is measured, the same way for all three (training returns, as a user of the pipeline sees them):

- Every finished episode's return and the env step at which it ended. (a) and (b) count the steps of the env
  itself (a wrapper); (c) counts them as the running sum of episodes.csv's `steps` of the one robot in episode
  order (the learner's `env_steps` column is written beside it into the JSON).
- The return at a checkpoint C (a third, two thirds and all of the steps: 5k/10k/15k by default, 10k/20k/30k
  for Hopper) is the mean return of the episodes that ended in the last 10 % of the run's steps before C,
  i.e. in (C - 0.1 N, C]. When none ended there (long episodes), the last episode that ended at or before C
  stands in; with none at all the figure is missing. These are the exploring (stochastic) policy's returns,
  random warm-up included, since that is all the pipeline's run directory holds; the first checkpoint falls
  at the end of the warm-up with the default settings.
- Wall-clock: (a) and (b) from building the env to the last step (in this process; imports excluded);
  (c) from starting `user bringup` to its exit (process start-up, router, checkpoint at exit included).
  Per env step: the whole run's wall / N, and the learning phase's alone (from the first episode ending after
  learning_starts to the last episode, so that neither start-up nor the fast random warm-up counts). The
  table gives (c)/(b) of both: below 1 means the pipeline overlaps acting and training.
- The update-to-data ratio (c) reached: the learner's gradient steps / (env steps - learning_starts) from the
  last row of its progress.csv.

Variants and seeds are interleaved (per env: for each seed, the variants in an order rotated by the seed) so
that the machine's load hits all three alike. Every run's record goes to --json as soon as it ends.

torch threads: (a) and (b) run with torch's default in this process (every core), the pipeline's learner with
its default (`torch_threads: 0`: every core but one, or --learner-threads) and the rollout with 1 thread (its
default).

Run (smoke: about 3 min in all on 2 shared cores):
    nice -n 10 .venv/bin/python bench/parity.py --envs Pendulum-v1 --seeds 1 --steps 1500 --learning-starts 500
Full (hours on 2 cores): nice -n 10 .venv/bin/python bench/parity.py --json parity.json
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import yaml

from bringup import REPO, Bringup, free_port

sys.path.insert(0, str(REPO))  # test.algorithms.ring, the tests' replay ring
from test.algorithms.ring import RingBuffer

VARIANTS = ("sb3", "plain", "pipeline")
ALIASES = {"a": "sb3", "b": "plain", "c": "pipeline"}
DEFAULT_ENVS = ("Pendulum-v1", "InvertedPendulum-v5", "Hopper-v5")
DEFAULT_STEPS = 15_000
LONGER = {"Hopper": 30_000}  # env name (without version) -> default env steps
LEARNING_STARTS = 5_000  # CleanRL's; never more than a third of the run
WINDOW_FRACTION = 0.1  # returns at a checkpoint: episodes ending in the last 10 % of the run's steps before it
BUFFER_SIZE = 1_000_000
BATCH_SIZE = 256
GAMMA = 0.99
TAU = 0.005
HIDDEN = (256, 256)
ROBOT = "parity_robot"
STOP_TIMEOUT_S = 120.0  # after the learner's stop, for the deployment to wind down


@dataclass(frozen=True)
class RunSpec:
    env_id: str
    variant: str
    seed: int
    steps: int
    learning_starts: int
    lr: float
    learner_threads: int = 0  # the pipeline learner's `torch_threads` (0: its default, every core but one)
    rollout_apply: str = "episode_boundary"  # the pipeline rollout's `apply`: when a robot takes new weights
    publish_every: int = 50  # the pipeline learner's `pacing.publish_every` (update calls between weight versions)

    @property
    def checkpoints(self) -> tuple[int, ...]:
        return (self.steps // 3, 2 * self.steps // 3, self.steps)


@dataclass
class Episode:
    end_step: int  # env steps when it ended, its own included
    episode_return: float
    wall_s: float  # since the run started


@dataclass
class RunResult:
    spec: RunSpec
    wall_s: float
    env_steps: int
    episodes: list[Episode]
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def checkpoint_returns(self) -> dict[int, float | None]:
        return {c: return_at(self.episodes, c, WINDOW_FRACTION * self.spec.steps) for c in self.spec.checkpoints}

    def updates_per_step(self) -> float | None:
        """Gradient steps per env step after the warm-up (the pipeline: per step of its stored episodes, the steps
        its returns are counted over; the episode running at the end is received, never stored nor owed)."""
        grads = self.extra.get("gradient_steps")
        steps = self.env_steps - self.spec.learning_starts
        return grads / steps if grads is not None and steps > 0 else None

    def learning_s_per_step(self) -> float | None:
        """Wall seconds per env step from the first episode ending after learning_starts to the last episode."""
        after = [e for e in self.episodes if e.end_step > self.spec.learning_starts]
        if len(after) < 2 or after[-1].end_step <= after[0].end_step:
            return None
        return (after[-1].wall_s - after[0].wall_s) / (after[-1].end_step - after[0].end_step)


def return_at(episodes: Sequence[Episode], checkpoint: int, window: float) -> float | None:
    """Mean return of the episodes ending in (checkpoint - window, checkpoint]; else the last one before it."""
    inside = [e.episode_return for e in episodes if checkpoint - window < e.end_step <= checkpoint]
    if inside:
        return float(np.mean(inside))
    before = [e.episode_return for e in episodes if e.end_step <= checkpoint]
    return before[-1] if before else None


# ------------------------------------------------------------------------------------------------ envs


class EpisodeLog(gym.Wrapper[Any, Any, Any, Any]):
    """Counts the env's steps and records every finished episode's return, step and wall time."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.started = time.monotonic()
        self.steps = 0
        self.episodes: list[Episode] = []
        self._return = 0.0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        self._return += float(reward)
        if terminated or truncated:
            self.episodes.append(Episode(self.steps, self._return, time.monotonic() - self.started))
            self._return = 0.0
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._return = 0.0
        return self.env.reset(seed=seed, options=options)


def action_box(env: gym.Env[Any, Any]) -> gym.spaces.Box:
    """The env's action space, which must be a 1-D Box (as the gym driver needs)."""
    space = env.action_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise ValueError(f"{env.spec.id if env.spec else env}: the action space must be a 1-D Box, not {space}")
    return space


def env_dims(env_id: str) -> tuple[int, int]:
    """(flattened observation size, action size) of an env with a 1-D Box action space."""
    env = gym.make(env_id)
    try:
        return int(gym.spaces.flatdim(env.observation_space)), int(action_box(env).shape[0])
    finally:
        env.close()


def default_steps(env_id: str) -> int:
    return LONGER.get(env_id.split("-v", maxsplit=1)[0], DEFAULT_STEPS)


# ------------------------------------------------------------------------------------------------ (a) sb3


def run_sb3(spec: RunSpec) -> RunResult:
    from stable_baselines3 import SAC as SB3SAC

    log = EpisodeLog(gym.make(spec.env_id))
    model = SB3SAC(
        "MlpPolicy",
        log,
        learning_rate=spec.lr,  # actor, critics and entropy coefficient alike (SB3 has one rate)
        buffer_size=BUFFER_SIZE,
        learning_starts=spec.learning_starts,
        batch_size=BATCH_SIZE,
        tau=TAU,
        gamma=GAMMA,
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto",
        target_entropy="auto",
        policy_kwargs={"net_arch": list(HIDDEN)},
        seed=spec.seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=spec.steps)
    wall = time.monotonic() - log.started
    log.close()
    return RunResult(spec, wall, log.steps, log.episodes, {"gradient_steps": int(model._n_updates)})


# ------------------------------------------------------------------------------------------------ (b) plain


def learning_settings(spec: RunSpec, state_dim: int, action_dim: int) -> dict[str, Any]:
    """The project's `learning` section for SAC with the benchmark's hyperparameters (also the pipeline's)."""
    return {
        "policy_id": "parity",
        "policy_kind": "mlp",
        "mlp": {"state_dim": state_dim, "action_dim": action_dim, "hidden": list(HIDDEN), "seed": spec.seed},
        "algorithm": "sac",
        "sac": {
            "gamma": GAMMA,
            "tau": TAU,
            "actor_lr": spec.lr,
            "critic_lr": spec.lr,
            "temperature_lr": spec.lr,
            "batch_size": BATCH_SIZE,
            "critic_hidden": list(HIDDEN),
            "init_temperature": 1.0,
            "target_entropy": None,
        },
        "seed": spec.seed,
    }


def run_plain(spec: RunSpec) -> RunResult:
    import torch

    from user.config.strict import from_mapping
    from user.learner.config import LearningConfig
    from user.policies.base import PolicyInput

    log = EpisodeLog(gym.make(spec.env_id))
    box = action_box(log)
    state_dim, action_dim = int(gym.spaces.flatdim(log.observation_space)), int(box.shape[0])
    learning = from_mapping(LearningConfig, learning_settings(spec, state_dim, action_dim), where="parity")
    torch.manual_seed(spec.seed)
    policy = learning.build_policy()
    algorithm = learning.build_algorithm(policy)
    rng = np.random.default_rng(spec.seed)
    low, high = np.asarray(box.low, np.float64), np.asarray(box.high, np.float64)
    buffer = RingBuffer(spec.steps, state_dim, action_dim)  # the tests' ring: the whole run fits
    obs = np.asarray(log.reset(seed=spec.seed)[0], np.float32).ravel()
    updates = 0
    for step in range(spec.steps):
        if step < spec.learning_starts:
            action = rng.uniform(-1.0, 1.0, action_dim).astype(np.float32)
        else:
            action = policy.act(PolicyInput(obs))
        env_action = np.clip(low + (action + 1.0) * 0.5 * (high - low), low, high).astype(box.dtype)
        next_obs, reward, terminated, truncated, _ = log.step(env_action)
        next_state = np.asarray(next_obs, np.float32).ravel()
        buffer.add(obs, action, float(reward), next_state, bool(terminated))
        obs = np.asarray(log.reset()[0], np.float32).ravel() if terminated or truncated else next_state
        if buffer.size > spec.learning_starts:
            algorithm.update(buffer.batch(rng.integers(0, buffer.size, BATCH_SIZE)))
            updates += 1
    wall = time.monotonic() - log.started
    log.close()
    return RunResult(spec, wall, log.steps, log.episodes, {"gradient_steps": updates})


# ------------------------------------------------------------------------------------------------ (c) pipeline


def deployment(spec: RunSpec, endpoint: str, state_dim: int, action_dim: int) -> dict[str, Any]:
    """The deployment of one pipeline run: learner, rollout and one gym robot on a private router."""
    learning = learning_settings(spec, state_dim, action_dim)
    learner = {
        "robots": [ROBOT],
        "run_dir": "{run_dir}",
        "learning": learning,
        "pacing": {
            "mode": "async",
            "updates_per_step": 1.0,
            "min_transitions": spec.learning_starts,
            "publish_every": spec.publish_every,
        },
        "buffer": {"sampler": {"kind": "uniform", "seed": spec.seed}},
        "stop_after": {"env_steps": spec.steps},
        "checkpoint_period_s": 0.0,  # one checkpoint, at the stop
        "torch_threads": spec.learner_threads,
    }
    rollout = {
        "robots": [ROBOT],
        "learning": learning,
        "random_steps": spec.learning_starts,
        "apply": spec.rollout_apply,
    }
    robot = {
        "robot_id": ROBOT,
        "driver": "gym",
        "gym_env": spec.env_id,
        "realtime": False,
        "seed": spec.seed,
        "wait_for_consumer_s": 60.0,
    }
    return {
        "name": f"parity_{spec.env_id}_{spec.seed}".replace("-", "_"),
        "router": {"endpoints": [endpoint], "start": "always"},
        "nodes": [
            {"name": "learner", "kind": "learner", "respawn": False, "shutdown_timeout_s": 30.0, "params": learner},
            {"name": "rollout", "kind": "rollout", "respawn": False, "params": rollout},
            {"name": "robot", "kind": "robot", "respawn": False, "params": robot},
        ],
    }


def pipeline_episodes(run_dir: Path, started_wall: float) -> tuple[list[Episode], list[int]]:
    """The robot's online episodes from episodes.csv in id order (wall since `started_wall`), and the learner's
    env_steps column beside them."""
    path = run_dir / "episodes.csv"
    if not path.exists():
        return [], []
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["robot_id"] == ROBOT and r["is_demo"].lower() in ("0", "false")]
    rows.sort(key=lambda r: int(r["episode_id"]))
    episodes, learner_steps, total = [], [], 0
    for r in rows:
        total += int(r["steps"])
        episodes.append(Episode(total, float(r["episode_return"]), float(r["wall_time"]) - started_wall))
        learner_steps.append(int(r["env_steps"]))
    return episodes, learner_steps


def last_progress(run_dir: Path) -> dict[str, str]:
    path = run_dir / "progress.csv"
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows[-1] if rows else {}


def run_pipeline(spec: RunSpec, workdir: Path, timeout_s: float) -> RunResult:
    state_dim, action_dim = env_dims(spec.env_id)
    name = f"{spec.env_id}_s{spec.seed}"
    config = workdir / f"{name}.yaml"
    dep = deployment(spec, f"tcp/127.0.0.1:{free_port()}", state_dim, action_dim)
    config.write_text(yaml.safe_dump(dep, sort_keys=False))
    run_dir = workdir / f"run_{name}"
    bringup = Bringup(config, run_dir, workdir / f"{name}.out")
    started = time.monotonic()
    error = None
    try:
        bringup.proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        error = f"no stop within {timeout_s:.0f} s (stop_after env_steps {spec.steps})"
    wall = time.monotonic() - started
    code = bringup.stop()
    if error is None and code != 0:
        error = f"user bringup exited {code}"
    episodes, learner_steps = pipeline_episodes(run_dir, bringup.started)
    progress = last_progress(run_dir)
    env_steps, grads = int(progress.get("env_steps") or 0), int(progress.get("gradient_steps") or 0)
    extra = {
        "exit_code": code,
        "learner_env_steps_per_episode": learner_steps,
        "gradient_steps": grads,
        "learner_env_steps": env_steps,
        "output": str(bringup.out),
    }
    if error is not None:
        tail = bringup.out.read_text(errors="replace")[-3000:]
        print(f"  pipeline run failed: {error}; output tail:\n{tail}", file=sys.stderr, flush=True)
    steps = episodes[-1].end_step if episodes else 0
    return RunResult(spec, wall, steps, episodes, extra, error)


# ------------------------------------------------------------------------------------------------ the table


def mean_sd(values: Sequence[float], width: int = 9) -> str:
    if not values:
        return "n/a"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):{width}.1f} ± {sd:{width - 2}.1f} (n={len(values)})"


def returns_table(results: Sequence[RunResult], envs: Sequence[str], variants: Sequence[str]) -> list[str]:
    lines = [f"{'env':22s} {'variant':9s} {'env steps':>9s}  return, mean ± sd over seeds"]
    for env in envs:
        for variant in variants:
            runs = [r for r in results if r.spec.env_id == env and r.spec.variant == variant and r.error is None]
            if not runs:
                lines.append(f"{env:22s} {variant:9s} {'-':>9s}  no successful run")
                continue
            for c in runs[0].spec.checkpoints:
                values = [v for r in runs if (v := r.checkpoint_returns()[c]) is not None]
                lines.append(f"{env:22s} {variant:9s} {c:9d}  {mean_sd(values)}")
    return lines


def mean_of(runs: Sequence[RunResult], get: Callable[[RunResult], float | None]) -> float | None:
    values = [v for r in runs if (v := get(r)) is not None]
    return statistics.fmean(values) if values else None


def ms(value: float | None) -> str:
    return f"{1e3 * value:8.2f}" if value is not None else f"{'n/a':>8s}"


def wall_table(results: Sequence[RunResult], envs: Sequence[str], variants: Sequence[str]) -> list[str]:
    head = (
        f"{'env':22s} {'variant':9s} {'wall s, mean ± sd':>24s} {'ms/step':>8s} {'learn ms/step':>13s} {'c/b':>5s} "
        f"{'c/b lrn':>7s} {'upd/step':>8s}"
    )
    lines = [head]
    for env in envs:
        runs = {
            v: [r for r in results if r.spec.env_id == env and r.spec.variant == v and r.error is None]
            for v in variants
        }
        per = {
            v: (mean_of(rs, lambda r: r.wall_s / max(1, r.spec.steps)), mean_of(rs, RunResult.learning_s_per_step))
            for v, rs in runs.items()
        }
        for variant in variants:
            ratio = ratio_l = ""
            if variant == "pipeline" and "plain" in per:
                ratio, ratio_l = (_ratio(per["pipeline"][k], per["plain"][k]) for k in (0, 1))
            walls = mean_sd([r.wall_s for r in runs[variant]], 7)
            upd = mean_of(runs[variant], RunResult.updates_per_step)
            lines.append(
                f"{env:22s} {variant:9s} {walls:>24s} {ms(per[variant][0])} {ms(per[variant][1]):>13s} "
                f"{ratio:>5s} {ratio_l:>7s} {'n/a' if upd is None else f'{upd:.2f}':>8s}"
            )
    return lines


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


# ------------------------------------------------------------------------------------------------ main


def plan(args: argparse.Namespace) -> list[RunSpec]:
    """Every run, interleaved: per env, for each seed the variants in an order rotated by the seed."""
    specs = []
    for env in args.envs:
        steps = args.steps or default_steps(env)
        starts = args.learning_starts if args.learning_starts is not None else min(LEARNING_STARTS, steps // 3)
        if not 0 <= starts < steps:
            raise SystemExit(f"--learning-starts {starts} must be in 0..{steps - 1} for {env}")
        for k, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
            shift = k % len(args.variants)
            for variant in [*args.variants[shift:], *args.variants[:shift]]:
                specs.append(
                    RunSpec(env, variant, seed, steps, starts, args.lr, args.learner_threads, args.rollout_apply,
                            args.publish_every)
                )  # fmt: skip
    return specs


def run_one(spec: RunSpec, workdir: Path, args: argparse.Namespace) -> RunResult:
    try:
        if spec.variant == "sb3":
            return run_sb3(spec)
        if spec.variant == "plain":
            return run_plain(spec)
        timeout = args.pipeline_timeout_s or 300.0 + 0.5 * spec.steps
        return run_pipeline(spec, workdir, timeout)
    except Exception as exc:  # one failed run is reported, the others go on
        print(f"  {spec.variant} failed: {exc!r}", file=sys.stderr, flush=True)
        return RunResult(spec, math.nan, 0, [], error=repr(exc))


def record(result: RunResult) -> dict[str, Any]:
    return {
        **asdict(result.spec),
        "wall_s": result.wall_s,
        "env_steps": result.env_steps,
        "error": result.error,
        "returns_at": {str(c): v for c, v in result.checkpoint_returns().items()},
        "learning_s_per_step": result.learning_s_per_step(),
        "updates_per_step": result.updates_per_step(),
        "episodes": [asdict(e) for e in result.episodes],
        **result.extra,
    }


def write_json(path: Path | None, args: argparse.Namespace, results: Sequence[RunResult]) -> None:
    if path is None:
        return
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    path.write_text(json.dumps({"settings": settings, "runs": [record(r) for r in results]}, indent=1, default=str))


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--envs", type=lambda s: s.split(","), default=list(DEFAULT_ENVS), help="gymnasium ids, comma-separated"
    )
    p.add_argument("--seeds", type=int, default=3, help="seeds per (env, variant)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=None, help="env steps of every run (default 15000; Hopper 30000)")
    p.add_argument(
        "--variants", type=lambda s: s.split(","), default=list(VARIANTS), help="sb3,plain,pipeline (or a,b,c)"
    )
    p.add_argument(
        "--learning-starts", type=int, default=None, help="random warm-up steps (default min(5000, steps/3))"
    )
    p.add_argument("--lr", type=float, default=3e-4, help="Adam rate of actor, critics and temperature (all variants)")
    p.add_argument("--learner-threads", type=int, default=0, help="pipeline learner's torch threads (0: its default)")
    p.add_argument(
        "--rollout-apply",
        choices=("episode_boundary", "immediate"),
        default="episode_boundary",
        help="when the pipeline's robot takes new weights (rollout `apply`)",
    )
    p.add_argument("--publish-every", type=int, default=50, help="pipeline learner's pacing.publish_every")
    p.add_argument("--pipeline-timeout-s", type=float, default=None, help="default 300 + 0.5 s per env step")
    p.add_argument("--workdir", type=Path, default=None, help="keep the pipeline's configs and runs here")
    p.add_argument("--json", type=Path, default=None, help="write every run's record here")
    args = p.parse_args(argv)
    args.variants = [ALIASES.get(v, v) for v in args.variants]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or args.seeds < 1:
        p.error(f"unknown variants {unknown} (known: {', '.join(VARIANTS)})" if unknown else "--seeds must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    specs = plan(args)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="parity_"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    began = time.monotonic()
    try:
        for k, spec in enumerate(specs, 1):
            print(f"[{k}/{len(specs)}] {spec.env_id} {spec.variant} seed {spec.seed}: {spec.steps} steps, "
                  f"warm-up {spec.learning_starts}", flush=True)  # fmt: skip
            result = run_one(spec, workdir, args)
            results.append(result)
            got = {c: None if v is None else round(v, 1) for c, v in result.checkpoint_returns().items()}
            print(f"  {result.wall_s:.1f} s, {result.env_steps} env steps, {len(result.episodes)} episodes, "
                  f"returns at checkpoints {got}", flush=True)  # fmt: skip
            write_json(args.json, args, results)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nparity: {len(specs)} runs in {time.monotonic() - began:.0f} s; return at a checkpoint C = mean over "
          f"episodes ending in (C - {WINDOW_FRACTION:.0%} of the run's steps, C]\n")  # fmt: skip
    print("\n".join(returns_table(results, args.envs, args.variants)))
    print("\nwall-clock (mean over seeds; ms per env step over the whole run and over the learning phase; c/b = "
          "pipeline / plain; upd/step = gradient steps per env step after the warm-up)\n")  # fmt: skip
    print("\n".join(wall_table(results, args.envs, args.variants)))
    failed = [r for r in results if r.error is not None]
    for r in failed:
        print(f"FAILED {r.spec.env_id} {r.spec.variant} seed {r.spec.seed}: {r.error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
