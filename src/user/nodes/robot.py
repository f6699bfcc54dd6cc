"""`robot` node: one per robot. Runs the control loop and publishes what it sees and does.

Topics (prefix `namespace`, default `/<robot_id>`):

- `observation` (user/msg/Observation, BEST_EFFORT depth 1): a sensor stream where only the newest matters;
  a dropped one costs the policy one period, never a stall (the loop holds and republishes), and
  observations reach the learner reliably inside `transitions` anyway. Images inside it make blocking
  congestion control the wrong choice on a busy link.
- `action`, `intervention` (user/msg/Action, subscribed): policy actions and human overrides; with
  `actions_from: chunks`, `action_chunk` (user/msg/ActionChunk): whole chunks played here (`parts.robot_chunks`);
- `transitions` (user/msg/Transition, RELIABLE): must arrive; `episode_events` (user/msg/EpisodeEvent, RELIABLE);
- `joint_states` (sensor_msgs/JointState), `<camera>/image/compressed` (sensor_msgs/CompressedImage), BEST_EFFORT,
  with `robot_description`, `/tf`, `<camera>/camera_info`, `markers` and `clock_topic` (`user.nodes.parts.robot_view`);
- `reset` service (user/srv/Reset); `/estop` (std_msgs/Bool, latched) for arms.

The loop runs on its own thread, not a bus timer: bus timers run under the callback lock, and a control
period blocks (the driver paces to the period's deadline, or in fast mode the loop waits for the policy's
action for this very step), which would stall every subscription. Bus callbacks only hand data over
(`ActionGate.feed_*`, a reset request) and never touch the robot. The reset service waits for the control
thread to reset the robot (a real arm drives home for seconds), so it runs on the bus's service thread
(`OwnThread`), never in front of the e-stop, actions and interventions. A latched e-stop refuses resets (the
running episode goes on, held) until it is cleared.

With `state_dir`, a respawned node continues its episode ids (no id twice, no demonstration redone) and still
delivers the episodes the learner had not acknowledged (its outbox: `user.nodes.parts.robot_outbox`). Not in real
time, it waits while it is ahead of the learner's update-to-data ratio (`credit_topic`, `user.robot_loop.data_credit`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from user.bus.base import BEST_EFFORT, RELIABLE, Bus, OwnThread
from user.hardware.announce import Announcer
from user.hardware.descriptor import ResourceDescriptor, from_robot
from user.interfaces.domain import Observation, action_from_msg, observation_to_msg, transition_to_msg
from user.interfaces.episode_events import RESET_SEED_DEFAULT, EpisodeEvent
from user.nodes.parts.robot_assignment import Assignment
from user.nodes.parts.robot_chunks import ChunkFeed
from user.nodes.parts.robot_outbox import RobotOutbox
from user.nodes.parts.robot_params import RobotNodeParams
from user.nodes.parts.robot_view import RobotView
from user.rewards.human import PressMode
from user.robot_loop import ActionGate, ControlLoop, Observer, TickResult, episode_event_to_msg
from user.robot_loop.data_credit import CreditGate
from user.robot_loop.drivers import build_driver
from user.robot_loop.episode_ids import DurableEpisodeIds, EpisodeIdError, EpisodeIds
from user.robot_loop.observe import ObserverConfig
from user.robot_loop.reset_requests import ResetRequests
from user.robots.arm import ArmRobot, EStopError
from user.robots.base import RobotError
from user.robots.estop import EStopTopic
from user.robots.pacing import DeadlinePacer
from user.runtime.diagnostics import Status
from user.runtime.node import Node

JOIN_TIMEOUT_S = 3.0
IDLE_S = 0.05  # between episodes without auto reset (or while a reset is refused): how often to look again


class RobotNode(Node):
    """Owns one robot: a control thread drives `ControlLoop`; bus callbacks only feed it."""

    Params = RobotNodeParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(RobotNodeParams)
        ns = p.namespace or f"/{p.robot_id}"
        bundle = self.bundle = build_driver(p, self)  # DriverError is a ConfigError
        self.robot = bundle.robot
        period = 1.0 / p.control_rate_hz
        deadline = period if p.realtime else p.action_timeout_s
        self.gate = ActionGate(deadline, p.intervention_deadline_s, lockstep=not p.realtime)
        dim = self.robot.action_space.shape[0]  # actions_from chunks: a rollout's chunks, played here
        self.chunks = ChunkFeed(self, ns, self.gate, p.robot_id, dim) if p.actions_from == "chunks" else None
        observer = Observer(
            ObserverConfig(
                p.robot_id, bundle.task, self.robot.descriptor.embodiment_id, p.jpeg_quality, p.embodiment_in_state
            ),
            bundle.extras,
            bundle.privileged,
            bundle.frames,
        )
        seed = None if p.seed < 0 else p.seed
        ids = self._episode_ids()  # before the robot connects: an unreadable saved id stops the start here
        self.loop = ControlLoop(
            self.robot, bundle.scorer, observer, self.gate, seed=seed, episode_ids=ids, clock_ns=self._clock_ns
        )
        self._wait_s = min(p.action_timeout_s, 0.5 * period) if p.realtime else p.action_timeout_s
        self._pacer = DeadlinePacer(period) if p.realtime and not bundle.paced else None
        self._namespace = ns
        self.view: RobotView | None = None  # joints, TF, images, markers: made once the robot is connected
        self._pub_obs = self.create_publisher(f"{ns}/observation", "user/msg/Observation", BEST_EFFORT)
        self._pub_transition = self.create_publisher(f"{ns}/transitions", "user/msg/Transition", RELIABLE)
        # episodes kept until the learner's receipt; re-sent on transitions/replay
        self.outbox = RobotOutbox(self, ns, p) if p.outbox_episodes > 0 else None
        credit = self.credit = CreditGate() if not p.realtime and p.credit_topic else None
        if credit is not None:
            self.create_subscription(p.credit_topic, "user/msg/DataCredit", credit.on_message, BEST_EFFORT)
        self._pub_event = self.create_publisher(f"{ns}/episode_events", "user/msg/EpisodeEvent", RELIABLE)
        self.create_subscription(f"{ns}/action", "user/msg/Action", self._on_action)
        self.create_subscription(f"{ns}/intervention", "user/msg/Action", self._on_intervention)
        self.assignment = Assignment(self, ns)  # who serves it, or why it waits (a rollout that admits robots)
        if p.human_reward_topic:
            self.create_subscription(p.human_reward_topic, "user/msg/HumanReward", self._on_human_reward, RELIABLE)
        arm = self.robot if isinstance(self.robot, ArmRobot) else None
        self._estop = EStopTopic(self, arm, p.estop_topic) if arm is not None else None
        self._resets = ResetRequests(self.gate.wake)
        self._refusals_logged: set[str] = set()  # causes logged since the last episode started (once each)
        self.resets_refused = 0
        self._stop = threading.Event()
        self.bus.create_service(f"{ns}/reset", "user/srv/Reset", OwnThread(self._on_reset_request))
        self.announcer = Announcer(self, self._descriptor())
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"{p.robot_id}-control", daemon=True)

    def configure(self) -> None:
        """Connect the robot (unless its driver connects over the bus, from the control thread) and make its view."""
        p = self.params
        if not self.bundle.connects_over_bus:
            self.bundle.connect()
        self.view = RobotView(
            self,
            self._namespace,
            self.robot,
            self.bundle.cameras,
            p.clock_topic,
            gate=self.gate,
            rig=self.bundle.rig,
            world_position=p.world_position,
        )

    def activate(self) -> None:
        """Start the control thread."""
        if self.view is None:
            raise RuntimeError(f"robot node {self.name}: activate before configure")
        self._thread.start()

    def _episode_ids(self) -> EpisodeIds:
        p = self.params
        if not p.state_dir:
            return EpisodeIds(p.first_episode_id)
        ids = DurableEpisodeIds(Path(p.state_dir), p.robot_id, p.first_episode_id)
        if ids.saved is not None and ids.saved > p.first_episode_id:
            self.log.info("continuing at episode %d (saved in %s)", ids.next_id, ids.path)
        return ids

    def _descriptor(self) -> ResourceDescriptor:
        """The robot's own descriptor, at the node's control rate, with the cameras its observations carry."""
        robot = dataclasses.replace(
            self.robot.descriptor, control_rate_hz=self.params.control_rate_hz, cameras=self.bundle.cameras
        )
        return from_robot(robot, task=self.loop.observer.config.task, node=self.name)

    # ---- bus callbacks: hand over, never block ---------------------------------------------------

    def _on_action(self, msg: Any) -> None:
        self.gate.feed_policy(action_from_msg(msg))

    def _on_intervention(self, msg: Any) -> None:
        self.gate.feed_intervention(action_from_msg(msg))

    def _on_human_reward(self, msg: Any) -> None:
        if int(msg.mode) != PressMode.EPISODE_END or (msg.robot_id and msg.robot_id != self.params.robot_id):
            return
        episode = self.loop.episode_id
        who = msg.source or "a person"
        if self.loop.request_end():
            self.log.info("episode %s: %s pressed the end (%s)", episode, who, "success" if msg.success else "failure")
        else:
            self.log.info("an episode-end press from %s arrived between episodes: ignored", who)

    def _on_reset_request(self, payload: bytes) -> bytes:
        """The reset service, on the bus's service thread: waits for the control thread, holding up no callback."""
        request = self.codec.decode(payload, "user/srv/Reset_Request")
        return self.codec.encode(self._on_reset(request), "user/srv/Reset_Response")

    def _on_reset(self, request: Any) -> Any:
        if request.robot_id and request.robot_id != self.params.robot_id:
            return self._reset_response(False, f"this is robot {self.params.robot_id!r}, not {request.robot_id!r}")
        outcome = self._resets.ask(int(request.seed), self.params.reset_timeout_s)
        obs = self.loop.observation
        if outcome.refusal is not None:
            return self._reset_response(False, outcome.refusal)
        if not outcome.served or obs is None:
            return self._reset_response(False, f"reset did not complete within {self.params.reset_timeout_s} s")
        return self._reset_response(True, f"episode {obs.episode_id}", obs)

    def _reset_response(self, success: bool, message: str, obs: Observation | None = None) -> Any:
        if obs is None:
            obs = Observation(self.params.robot_id, "", 0, 0, np.zeros(0, np.float32), 0)
        if not success:
            self.log.warning("reset refused: %s", message)
        return self.codec.msg_class("user/srv/Reset_Response")(
            success=success, message=message, observation=observation_to_msg(obs, self.codec)
        )

    # ---- control thread --------------------------------------------------------------------------

    def _wait_for_consumer(self) -> None:
        """So that no episode streams into the void while the learner (or a recorder) is still starting."""
        topic = self._pub_transition.topic
        deadline = time.monotonic() + self.params.wait_for_consumer_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            if self.bus.count_subscribers(topic, timeout_s=0.2) > 0:
                self.log.info("%s has a subscriber: starting", topic)
                return
        if not self._stop.is_set():
            self.log.warning(
                "nobody subscribed to %s within %.0f s: starting anyway", topic, self.params.wait_for_consumer_s
            )

    def _run(self) -> None:
        try:
            if self.bundle.connects_over_bus:  # here: under rclpy no callback runs before the constructor returns
                self.bundle.connect()
            if self.params.wait_for_consumer_s > 0:
                self._wait_for_consumer()
            while not self._stop.is_set():
                self._period()
        except RobotError as exc:  # the driver's own words for the operator: one line, no traceback
            self.failed = exc
            self.fail(f"control loop stopped: {exc}")
        except Exception as exc:
            self.failed = exc
            self.log.exception("control loop stopped: %s", exc)
            self.fail(f"control loop stopped: {type(exc).__name__}: {exc}")  # a robot node without a loop ends

    def _period(self) -> None:
        if self._estop is not None:
            self._estop.apply_pending()  # a requested clear, also between episodes
        request = self._resets.take()
        if request is not None:
            if request == RESET_SEED_DEFAULT:
                self._resets.done(self._reset(None))
            else:
                self._resets.done(self._reset(None if request < 0 else request, use_default_seed=False))
            return
        if not self.loop.in_episode:
            # the first episode starts by itself; later ones with auto_reset, else when the reset service asks
            if (self.params.auto_reset or self.loop.episode_id is None) and self._reset(None) is None:
                return
            self._stop.wait(IDLE_S)  # a reset request (or a cleared e-stop) is seen within IDLE_S
            return
        obs = self.loop.observation
        if obs is not None:  # fast mode: lockstep with the policy; real time: at most half a period
            if self.chunks is not None:
                self.chunks.feed(obs.episode_id, obs.step)
            self.gate.wait_for_policy(obs.episode_id, obs.step, self._wait_s)
        if self._stop.is_set() or (self.credit is not None and not self.credit.take(IDLE_S)):
            return  # stopping, or ahead of the learner's update-to-data ratio: this step waits
        self._publish(self.loop.tick())
        if self._pacer is not None:
            self._pacer.wait()

    def _reset(self, seed: int | None, use_default_seed: bool = True) -> str | None:
        """End the running episode (kept, as an operator reset) and start the next; None when it started,
        else why not (a latched e-stop, an episode id that cannot be saved): the robot stays where it is."""
        refusal = self._estop_refusal()
        if refusal is None:
            self._end_running()
            try:
                obs, events = self.loop.reset(seed, use_default_seed=use_default_seed)
            except (EStopError, EpisodeIdError) as exc:  # the e-stop latched just now; the disk is full
                refusal = str(exc)
        if refusal is not None:
            self.resets_refused += 1
            if refusal not in self._refusals_logged:
                self._refusals_logged.add(refusal)
                self.log.error("no new episode: %s", refusal)
            return refusal
        self._refusals_logged.clear()
        if self.chunks is not None:
            self.chunks.start_episode(obs.episode_id)
        if self._pacer is not None:
            self._pacer.restart()
        self._publish_events(events)
        self._pub_obs.publish(observation_to_msg(obs, self.codec))
        return None

    def _estop_refusal(self) -> str | None:
        robot = self.robot
        if not isinstance(robot, ArmRobot) or not robot.estopped:
            return None
        topic = self.params.estop_topic
        return (
            f"robot {self.params.robot_id!r} is e-stopped ({robot.estop_reason}); publish false on {topic} to clear it"
        )

    def _end_running(self) -> None:
        """End the running episode, if any: kept whole, its last step truncated (as the learner does)."""
        ended = self.loop.end_episode()
        if ended is None:
            return
        if self.outbox is not None:
            self.outbox.end_early(ended.episode_id)
        self._publish_events([ended])

    def _publish(self, result: TickResult) -> None:
        if result.transition is None and self.chunks is not None:
            self.chunks.held(result.observation.step)
        if result.transition is not None:
            message = transition_to_msg(result.transition, self.codec)
            self._pub_transition.publish(message)
            if self.outbox is not None:
                self.outbox.add(result.transition.episode_id, message, result.transition.done)
        if result.ended is not None:
            self._publish_events([result.ended])
        if result.ended is None or not self.params.auto_reset:
            self._pub_obs.publish(observation_to_msg(result.observation, self.codec))
        if self.view is not None:
            self.view.publish(result)

    def _publish_events(self, events: list[EpisodeEvent]) -> None:
        for event in events:
            self._pub_event.publish(episode_event_to_msg(event, self.codec))

    def _clock_ns(self) -> int:
        """Stamps of episode events: the robot's clock (simulation time for a simulated arm)."""
        view = self.view  # an episode starts only after `configure` made the view
        return view.clock_ns() if view is not None else time.time_ns()

    def diagnostics(self) -> list[Status]:
        """The node, its arm (e-stop, holding, stepping, interventions) and cameras (`RobotView.diagnostics`)."""
        return [*super().diagnostics(), *(self.view.diagnostics() if self.view is not None else [])]

    def destroy(self) -> None:
        self._stop.set()
        self.gate.wake()
        self._resets.close()  # a reset request waiting on the service thread gives up
        if self._thread.ident is not None:  # started by `activate`
            self._thread.join(JOIN_TIMEOUT_S)
        if self._thread.is_alive():
            self.log.error("control thread did not stop within %.1f s", JOIN_TIMEOUT_S)
        self.announcer.close()
        if self._estop is not None:
            self._estop.close()
        self.bundle.close()
