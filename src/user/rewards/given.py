"""What a reward node gave each step of its latest episodes, for the episodes robots re-send: a re-sent step gets
the outcome its live copy got (or is again not forwarded), so a re-sent episode is stored exactly as it would have
been. Also the episodes an outcome ended before the robot stopped (a person's EPISODE_END press): their later
steps are past the end."""

from __future__ import annotations

from collections import OrderedDict, deque

from user.rewards.online import Outcome

REMEMBERED_EPISODES = 64  # episodes whose outcomes are kept for re-sends (above any outbox size in use)


class GivenOutcomes:
    """The outcome given to each step of the latest `episodes` episodes (None: the step was not forwarded)."""

    def __init__(self, episodes: int = REMEMBERED_EPISODES) -> None:
        self.episodes = episodes
        self._given: OrderedDict[int, dict[int, Outcome | None]] = OrderedDict()  # episode -> step -> outcome
        self._ended: deque[int] = deque(maxlen=episodes)  # episodes an outcome ended early, newest last

    def remember(self, episode: int, step: int, outcome: Outcome | None) -> None:
        given = self._given.get(episode)
        if given is None:
            given = self._given[episode] = {}
            while len(self._given) > self.episodes:
                self._given.popitem(last=False)
        given[step] = outcome

    def known(self, episode: int, step: int) -> bool:
        """The step was given an outcome (or refused one) here before."""
        return step in self._given.get(episode, {})

    def outcome(self, episode: int, step: int) -> Outcome | None:
        """What the step was given (None: not forwarded); only for a `known` step."""
        return self._given[episode][step]

    def end(self, episode: int) -> None:
        """An outcome ended `episode` before the robot stopped it."""
        self._ended.append(episode)

    def ended(self, episode: int) -> bool:
        return episode in self._ended
