"""A tiny numpy ring buffer producing the project's `TransitionBatch`, for learning tests."""

from __future__ import annotations

import numpy as np

from user.buffer.batch import TransitionBatch


class RingBuffer:
    def __init__(self, capacity: int, state_dim: int, action_dim: int) -> None:
        self.capacity = capacity
        self.state = np.zeros((capacity, state_dim), np.float32)
        self.next_state = np.zeros((capacity, state_dim), np.float32)
        self.action = np.zeros((capacity, action_dim), np.float32)
        self.reward = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, bool)
        self.is_demo = np.zeros(capacity, bool)
        self.intervened = np.zeros(capacity, bool)
        self.size = 0
        self._next = 0

    def add(
        self,
        state: np.ndarray,
        action: np.ndarray,
        reward: float,
        next_state: np.ndarray,
        terminated: bool,
        *,
        is_demo: bool = False,
        intervened: bool = False,
    ) -> None:
        i = self._next
        self.state[i], self.action[i], self.reward[i] = state, action, reward
        self.next_state[i], self.terminated[i] = next_state, terminated
        self.is_demo[i], self.intervened[i] = is_demo, intervened
        self._next = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def batch(self, rows: np.ndarray) -> TransitionBatch:
        n = len(rows)
        return TransitionBatch(
            indices=rows.astype(np.int64),
            state=self.state[rows],
            action=self.action[rows],
            reward=self.reward[rows],
            next_state=self.next_state[rows],
            terminated=self.terminated[rows],
            truncated=np.zeros(n, bool),
            success=np.zeros(n, bool),
            is_demo=self.is_demo[rows],
            intervened=self.intervened[rows],
            policy_version=np.zeros(n, np.int64),
            images={},
            next_images={},
        )

    def sample(self, rng: np.random.Generator, size: int, where: np.ndarray | None = None) -> TransitionBatch:
        """`size` rows drawn uniformly (among rows where `where` holds, when given)."""
        pool = np.arange(self.size) if where is None else np.flatnonzero(where[: self.size])
        return self.batch(rng.choice(pool, size=size, replace=True))
