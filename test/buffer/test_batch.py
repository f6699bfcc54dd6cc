"""Typed batches (stacked numpy, with their state names; take and concat over every field) and the background
prefetch worker."""

from dataclasses import fields, replace

import numpy as np
import pytest

from test.buffer.factories import ACTION_DIM, STATE_DIM, episode
from user.buffer.batch import CAMERA_ARRAYS, CHUNK_ARRAYS, ROW_ARRAYS, BatchError, TransitionBatch, collate
from user.buffer.errors import SampleTimeoutError
from user.buffer.frames.prefetch import Prefetcher
from user.interfaces.domain import Transition


def test_collate_stacks_typed_fields() -> None:
    ts = episode("arm", 3, 6, success=True, intervened=True)
    batch = collate(ts, np.arange(6), decode_images=True)
    assert len(batch) == 6
    assert batch.state.shape == (6, STATE_DIM) and batch.state.dtype == np.float32
    assert batch.action.shape == (6, ACTION_DIM)
    assert batch.images["wrist"].shape == (6, 16, 16, 3) and batch.images["wrist"].dtype == np.uint8
    assert batch.next_images["front"].shape == (6, 16, 16, 3)
    assert batch.done.tolist() == [False] * 5 + [True]
    assert batch.terminated[-1] and batch.success[-1] and batch.intervened.all()
    compressed = collate(ts, np.arange(6), decode_images=False)
    assert compressed.images["wrist"].dtype == object and compressed.images["wrist"][0][:2] == b"\xff\xd8"


def test_collate_names_the_transition_that_does_not_fit() -> None:
    ts = episode("arm", 0, 3, images=False)
    odd = replace(ts[2], observation=replace(ts[2].observation, state=np.zeros(3, dtype=np.float32)))
    with pytest.raises(BatchError, match="transition 12: state has shape"):
        collate([*ts[:2], odd], np.array([10, 11, 12]), decode_images=False)


def test_prefetch_keeps_batches_ready_and_reports_errors() -> None:
    counter = iter(range(1000))

    def produce(_timeout: float) -> int:
        return next(counter)

    pre: Prefetcher[int] = Prefetcher(produce, depth=2)
    assert [pre.get(5.0) for _ in range(3)] == [0, 1, 2]
    pre.close()

    def failing(_timeout: float) -> int:
        raise RuntimeError("disk gone")

    bad: Prefetcher[int] = Prefetcher(failing, depth=1)
    with pytest.raises(RuntimeError, match="disk gone"):
        bad.get(5.0)
    bad.close()


def test_prefetch_get_has_a_deadline() -> None:
    pre: Prefetcher[int] = Prefetcher(lambda _t: None, depth=1)
    with pytest.raises(SampleTimeoutError, match="no batch ready"):
        pre.get(0.2)
    pre.close()


NAMES = tuple(f"s{i}" for i in range(STATE_DIM))


def _named(ts: list[Transition], names: tuple[str, ...]) -> list[Transition]:
    """`ts` with the state (and next state) names `names`, as separate but equal tuples per row."""
    return [
        replace(
            t,
            observation=replace(t.observation, state_names=tuple(list(names))),
            next_observation=replace(t.next_observation, state_names=tuple(list(names))),
        )
        for t in ts
    ]


def _distinct_batch(n: int, seed: int) -> TransitionBatch:
    """A batch in which every per-row array differs from row to row (so a row taken from the wrong place shows)."""
    ts = episode("arm", seed, n, success=True, intervened=True)
    ts = [
        replace(t, reward=float(k + seed), is_demo=k % 2 == 0, success=k % 3 == 0, truncated=k == 1)
        for k, t in enumerate(ts)
    ]
    ts = [replace(t, action=replace(t.action, intervened=k % 2 == 1, policy_version=k)) for k, t in enumerate(ts)]
    batch = collate(_named(ts, NAMES), np.arange(n) + 100 * seed, decode_images=True)
    rows = np.arange(n)[:, None] + np.arange(3)[None, :]  # action chunks of 3 whose every row differs
    return replace(
        batch,
        action_chunk=np.repeat(rows[..., None], ACTION_DIM, axis=2).astype(np.float32) + seed,
        chunk_mask=rows < n,
        chunk_intervened=rows % 2 == 1,
    )


def _per_row(batch: TransitionBatch) -> dict[str, np.ndarray]:
    """Every per-row array of `batch` by name, found from the dataclass's fields (not from the batch's code)."""
    out: dict[str, np.ndarray] = {}
    for f in fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, dict):
            out.update({f"{f.name}.{camera}": v for camera, v in value.items()})
        elif f.name != "state_names" and value is not None:
            out[f.name] = value
    return out


def test_every_field_of_a_batch_is_a_row_array_a_camera_map_or_the_state_names() -> None:
    """A field added to TransitionBatch must be one of the kinds `map`, `take` and `concat` carry."""
    names = {f.name for f in fields(TransitionBatch)}
    assert set(ROW_ARRAYS) | set(CAMERA_ARRAYS) | set(CHUNK_ARRAYS) | {"state_names"} == names
    assert len(ROW_ARRAYS) + len(CAMERA_ARRAYS) + len(CHUNK_ARRAYS) + 1 == len(names)
    assert CAMERA_ARRAYS == ("images", "next_images")
    assert CHUNK_ARRAYS == ("action_chunk", "chunk_mask", "chunk_intervened")


def test_take_and_concat_carry_every_field() -> None:
    a, b = _distinct_batch(5, 1), _distinct_batch(3, 2)
    rows_a, rows_b = _per_row(a), _per_row(b)
    assert len(rows_a) == len(ROW_ARRAYS) + len(CHUNK_ARRAYS) + 4  # two cameras, observation and next observation
    assert all(len({v[k].tobytes() for k in range(len(v))}) > 1 for v in rows_a.values()), "rows must differ"
    mixed = TransitionBatch.concat([a, b])
    assert mixed.state_names == NAMES and len(mixed) == 8
    for name, value in _per_row(mixed).items():
        assert np.array_equal(value, np.concatenate([rows_a[name], rows_b[name]])), name
    order = np.array([7, 0, 3, 5, 1, 6, 2, 4])
    taken = mixed.take(order)
    assert taken.state_names == NAMES
    for name, value in _per_row(taken).items():
        assert np.array_equal(value, _per_row(mixed)[name][order]), name
    mask = np.arange(8) % 2 == 0
    assert np.array_equal(mixed.take(mask).indices, mixed.indices[mask])
    doubled = a.map(lambda x: np.concatenate([x, x]))
    assert all(np.array_equal(v, np.concatenate([rows_a[k], rows_a[k]])) for k, v in _per_row(doubled).items())


def test_collate_gives_the_batch_its_state_names() -> None:
    ts = _named(episode("arm", 0, 4, images=False), NAMES)
    assert collate(ts, np.arange(4), decode_images=False).state_names == NAMES
    assert collate(episode("arm", 0, 4, images=False), np.arange(4), decode_images=False).state_names == ()
    unnamed = episode("arm", 1, 2, images=False)  # e.g. imported demonstrations: positional state
    mixed = collate([*unnamed, *ts, *unnamed], np.arange(8), decode_images=False)
    assert mixed.state_names == NAMES


def test_rows_with_different_state_names_do_not_share_a_batch() -> None:
    ts = _named(episode("arm", 0, 3, images=False), NAMES)
    other = _named(episode("arm", 1, 1, images=False), tuple(reversed(NAMES)))
    with pytest.raises(BatchError, match=r"transition 12: state names \(s6, s5, s4, s3, \.\.\.; 7 names\) differ"):
        collate([*ts[:2], other[0]], np.array([10, 11, 12]), decode_images=False)
    odd_next = replace(ts[2], next_observation=replace(ts[2].next_observation, state_names=("a",) * STATE_DIM))
    with pytest.raises(BatchError, match="transition 2: state names"):
        collate([*ts[:2], odd_next], np.arange(3), decode_images=False)
    a = collate(ts, np.arange(3), decode_images=False)
    b = collate(other, np.arange(1), decode_images=False)
    with pytest.raises(BatchError, match="batch 1: state names"):
        TransitionBatch.concat([a, b])
    assert TransitionBatch.concat([a, replace(b, state_names=())]).state_names == NAMES


def test_batches_with_different_cameras_do_not_concatenate() -> None:
    with_images = collate(episode("arm", 0, 2), np.arange(2), decode_images=False)
    without = collate(episode("arm", 1, 2, images=False), np.arange(2), decode_images=False)
    with pytest.raises(BatchError, match=r"cannot mix batches with cameras \['front', 'wrist'\] and \[\]"):
        TransitionBatch.concat([with_images, without])
    with pytest.raises(BatchError, match="no batches"):
        TransitionBatch.concat([])


def test_decoded_rows_of_one_robot_share_one_state_names_tuple() -> None:
    """Transitions decoded from the wire or the disk share one names tuple, so a batch checks them by identity."""
    from user.interfaces import default_codec
    from user.interfaces.domain import transition_from_msg, transition_to_msg

    codec = default_codec()
    decoded = [
        transition_from_msg(codec.decode(codec.encode(transition_to_msg(t, codec)), "user/msg/Transition"))
        for t in _named(episode("arm", 0, 3, images=False), NAMES)
    ]
    assert all(t.observation.state_names is decoded[0].observation.state_names for t in decoded)
    assert all(t.next_observation.state_names is decoded[0].observation.state_names for t in decoded)
