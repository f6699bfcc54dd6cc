"""What the learner takes in from robots before its session sees it: every transition and episode event checked at
the door (`user.interfaces.validate`: finite values, actions in [-1, 1] of the policy's dimension, ids in range, the
topic's robot), a refused one counted per cause and logged, rate-limited (`Refusals`), never handed on; and the
episodes robots re-send for want of a receipt, gathered step by step until their done step (`ResentEpisodes`).

A re-send that never finishes (a message lost) is dropped once `MAX_RESENDS` newer ones are being gathered; the
robot sends it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from user.interfaces.domain import Transition, transition_from_msg
from user.interfaces.episode_events import EpisodeEvent, episode_event_from_msg
from user.interfaces.refusals import Refusals
from user.interfaces.validate import InvalidMessageError, check_episode_event, check_transition

MAX_RESENDS = 64  # re-sent episodes gathered at once; beyond, the oldest unfinished one is dropped


class Door:
    """Decodes and checks what arrives on a robot's topics; refusals go to `refusals`."""

    def __init__(self, refusals: Refusals, action_dim: int) -> None:
        self.refusals = refusals
        self.action_dim = action_dim  # the policy's: a transition's action must have it

    def transition(self, robot: str, topic: str, msg: Any) -> Transition | None:
        """The transition `msg` carries when it passes the door (`check_transition`: finite, in range, of the
        topic's robot, ids consistent); else None, the refusal counted and logged (rate-limited)."""
        what = f"transition on {topic} (episode {msg.episode_id} step {msg.step})"
        try:
            transition = transition_from_msg(msg)
            check_transition(transition, robot_id=robot, action_dim=self.action_dim)
        except InvalidMessageError as exc:
            self.refusals.invalid(what, exc)
            return None
        except (ValueError, TypeError) as exc:  # a decoded message that is no transition after all
            self.refusals.refuse("transition unreadable", f"{what}: {exc}")
            return None
        return transition

    def episode_event(self, robot: str, msg: Any) -> EpisodeEvent | None:
        """The episode event `msg` carries when it passes the door (`check_episode_event`), else None (refused)."""
        try:
            event = episode_event_from_msg(msg)
            check_episode_event(event, robot_id=robot)
        except (InvalidMessageError, ValueError) as exc:
            cause = exc.cause if isinstance(exc, InvalidMessageError) else "event.kind is unknown"
            self.refusals.refuse(cause, f"episode event on /{robot}/episode_events: {exc}")
            return None
        return event


@dataclass
class ResentEpisode:
    """A re-sent episode: its transitions and, where storable as they came, their bytes (else None)."""

    steps: list[Transition] = field(default_factory=list)
    payloads: list[bytes | None] = field(default_factory=list)


class ResentEpisodes:
    """The re-sent episodes being gathered, by (robot id, episode id)."""

    def __init__(self, limit: int = MAX_RESENDS) -> None:
        self.limit = limit
        self._gathering: dict[tuple[str, int], ResentEpisode] = {}

    def add(self, transition: Transition, payload: bytes | None) -> ResentEpisode | None:
        """Gather one re-sent step (a step 0 starts its episode afresh); the whole episode once this is its done
        step, else None."""
        key = (transition.robot_id, transition.episode_id)
        if transition.step == 0:
            self._gathering.pop(key, None)
        episode = self._gathering.setdefault(key, ResentEpisode())
        while len(self._gathering) > self.limit:  # re-sends that never finished: the oldest goes
            del self._gathering[next(iter(self._gathering))]
        episode.steps.append(transition)
        episode.payloads.append(payload)
        if not transition.done:
            return None
        self._gathering.pop(key, None)
        return episode
