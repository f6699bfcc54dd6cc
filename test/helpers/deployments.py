"""Pieces of small learning deployments for the multi-site tests, as YAML text: a learner with a small RLPD and
one sim arm with its rollout and scripted expert (peg insertion from state, lockstep unless asked)."""

from __future__ import annotations

SMALL_RLPD = "{{num_critics: 2, critic_hidden: [64, 64], batch_size: 64, utd_ratio: {utd}}}"
SMALL_MLP = "{state_dim: 17, action_dim: 7, hidden: [64, 64]}"


def small_learning(utd: int = 2) -> str:
    """The learning settings in flow style (for a file without the learner's `&learning` anchor)."""
    return f"{{mlp: {SMALL_MLP}, rlpd: {SMALL_RLPD.format(utd=utd)}}}"


def learner_node(robots: list[str], site: str = "cloud", utd: int = 2, admit: str = "") -> str:
    """The learner node, its learning settings anchored as `&learning`; `admit`: a glob pattern of the robots that
    may join it at run time."""
    return f"""  - name: learner
    kind: learner
    site: {site}
    shutdown_timeout_s: 30.0
    params:
      robots: [{", ".join(robots)}]
      admit: [{admit}]
      run_dir: "{{run_dir}}"
      learning: &learning
        mlp: {SMALL_MLP}
        rlpd: {SMALL_RLPD.format(utd=utd)}
      pacing: {{min_transitions: 64, publish_every: 10}}
      stats_period_s: 0.5
      torch_threads: 1
"""


def arm_nodes(arm: str, site: str, seed: int, *, learning: str = "*learning", demos: int = 2, robot: str = "") -> str:
    """Rollout, expert (the first `demos` episodes) and robot of one arm in `site` ("": no site); `robot`: more
    of the robot's params, e.g. "realtime: true, " (lockstep otherwise)."""
    where = f"\n    site: {site}" if site else ""
    return f"""  - name: rollout_{arm}
    kind: rollout{where}
    params:
      robots: [{arm}]
      start_episode: {demos}
      weights_publisher: learner
      learning: {learning}
  - name: expert_{arm}
    kind: expert{where}
    params: {{robot_id: {arm}, task: peg_insertion, until_episode: {demos}}}
  - name: {arm}
    kind: robot{where}
    params: {{robot_id: {arm}, task: peg_insertion, privileged_state: true, seed: {seed}, wait_for_consumer_s: 60.0,
             {robot or "realtime: false"}}}
"""


def ros_site(router: str, domain: str, admit: str = "") -> str:
    """A ROS 2 site's deployment: a bridge to the Zenoh router at `router` and one arm `arm_r` (run by ros2 launch);
    with `admit` (a glob pattern) the bridge relays the robots announced at the site that match it instead of
    naming arm_r."""
    robots = f"admit: [{admit}]" if admit else "robots: [arm_r]"
    return f"""name: ros_site
nodes:
  - name: bridge
    kind: bridge
    params: {{{robots}, zenoh_router: [{router}], domain: {domain}}}
{arm_nodes("arm_r", "", 2, learning=small_learning())}"""
