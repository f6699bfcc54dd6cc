"""Frame decoders: OpenCV threads write the pixels `decode_image` gives into rows of a batch; the device choice."""

from __future__ import annotations

from collections.abc import Iterator

import cv2
import numpy as np
import pytest

from test.buffer.factories import jpeg
from user.buffer.config import FramesConfig
from user.buffer.errors import BufferError
from user.buffer.frames import frame_decode
from user.buffer.frames.frame_decode import CpuDecoder, cuda_available, make_decoder, usable_cores
from user.interfaces.images import ImageCodecError, decode_image, decode_image_into

SIZE = 16
FRAMES = [jpeg(seed, SIZE) for seed in range(24)]


def reference(data: bytes) -> np.ndarray:
    """RGB pixels the plain way: OpenCV's BGR frame with its channels reversed."""
    bgr = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    assert bgr is not None
    return np.ascontiguousarray(bgr[:, :, ::-1])


@pytest.fixture
def decoder() -> Iterator[CpuDecoder]:
    made = CpuDecoder(3, None)
    yield made
    made.close()


def test_decode_into_an_array_matches_decode_image(decoder: CpuDecoder) -> None:
    out = np.zeros((len(FRAMES), SIZE, SIZE, 3), dtype=np.uint8)
    decoder.decode_into(FRAMES, out)
    for k, data in enumerate(FRAMES):
        assert np.array_equal(out[k], reference(data)), f"row {k}"


def test_decode_into_row_views_matches_decode_image(decoder: CpuDecoder) -> None:
    big = np.zeros((len(FRAMES) + 2, SIZE, SIZE, 3), dtype=np.uint8)
    order = np.random.default_rng(1).permutation(len(FRAMES)) + 1  # rows scattered, the edges left alone
    decoder.decode_into(FRAMES, [big[r] for r in order])
    for k, data in enumerate(FRAMES):
        assert np.array_equal(big[order[k]], reference(data)), f"frame {k}"
    assert not big[0].any() and not big[-1].any()


def test_decode_one_matches_decode_image(decoder: CpuDecoder) -> None:
    assert np.array_equal(decoder.decode_one(FRAMES[3]), decode_image(FRAMES[3]))


def test_decode_image_is_the_bgr_frame_with_channels_reversed() -> None:
    for data in FRAMES:
        pixels = decode_image(data)
        assert pixels.dtype == np.uint8 and pixels.flags.c_contiguous
        assert np.array_equal(pixels, reference(data))


def test_start_into_writes_the_rows_by_the_time_wait_returns(decoder: CpuDecoder) -> None:
    out = np.zeros((len(FRAMES), SIZE, SIZE, 3), dtype=np.uint8)
    decoder.start_into(FRAMES, out).wait()
    for k, data in enumerate(FRAMES):
        assert np.array_equal(out[k], reference(data)), f"row {k}"
    decoder.start_into([], out[:0]).wait()  # nothing to decode: nothing to wait for


def test_start_into_raises_a_corrupt_frame_from_wait(decoder: CpuDecoder) -> None:
    frames = [*FRAMES[:5], b"garbage", *FRAMES[5:10]]
    out = np.zeros((len(frames), SIZE, SIZE, 3), dtype=np.uint8)
    decoding = decoder.start_into(frames, out)
    with pytest.raises(ImageCodecError):
        decoding.wait()


@pytest.mark.parametrize("bad", [b"not an image at all", b"\xff\xd8\xff" + b"\x00" * 40])
def test_a_corrupt_frame_raises(decoder: CpuDecoder, bad: bytes) -> None:
    frames = [*FRAMES[:10], bad, *FRAMES[10:]]
    out = np.zeros((len(frames), SIZE, SIZE, 3), dtype=np.uint8)
    with pytest.raises(ImageCodecError, match=f"{len(bad)} bytes"):
        decoder.decode_into(frames, out)


def test_a_frame_that_does_not_fit_its_row_raises(decoder: CpuDecoder) -> None:
    out = np.zeros((4, SIZE // 2, SIZE // 2, 3), dtype=np.uint8)
    with pytest.raises(ImageCodecError, match="does not fit"):
        decoder.decode_into(FRAMES[:4], out)


def test_image_size_resizes_with_area_interpolation() -> None:
    frames = [jpeg(seed, 32) for seed in range(6)]
    resizing = CpuDecoder(2, 8)
    try:
        out = np.zeros((len(frames), 8, 8, 3), dtype=np.uint8)
        resizing.decode_into(frames, out)
        single = resizing.decode_one(frames[0])
    finally:
        resizing.close()
    for k, data in enumerate(frames):
        expected = cv2.resize(decode_image(data), (8, 8), interpolation=cv2.INTER_AREA)
        assert np.array_equal(out[k], expected), f"frame {k}"
    assert np.array_equal(single, out[0])


def test_a_frame_already_at_image_size_is_not_resized() -> None:
    assert np.array_equal(decode_image_into(FRAMES[0], None, SIZE), decode_image(FRAMES[0]))


def test_decode_image_into_writes_into_out() -> None:
    out = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
    result = decode_image_into(FRAMES[0], out)
    assert np.shares_memory(result, out)
    assert np.array_equal(out, decode_image(FRAMES[0]))


@pytest.mark.parametrize(
    "out",
    [
        np.zeros((SIZE // 2, SIZE // 2, 3), dtype=np.uint8),  # wrong shape
        np.zeros((SIZE, 2 * SIZE, 3), dtype=np.uint8)[:, ::2],  # right shape, not contiguous
        np.zeros((SIZE, SIZE, 3), dtype=np.float32),  # wrong type
    ],
    ids=["shape", "non-contiguous", "dtype"],
)
def test_decode_image_into_refuses_an_out_that_does_not_fit(out: np.ndarray) -> None:
    before = out.copy()
    with pytest.raises(ImageCodecError, match="does not fit"):
        decode_image_into(FRAMES[0], out)
    assert np.array_equal(out, before)


def test_make_decoder_cpu() -> None:
    made = make_decoder(FramesConfig(device="cpu", workers=3))
    try:
        assert isinstance(made, CpuDecoder) and made.workers == 3
    finally:
        made.close()
    default = make_decoder(FramesConfig(device="cpu", workers=0))
    try:
        assert isinstance(default, CpuDecoder) and default.workers == usable_cores()
    finally:
        default.close()


def test_make_decoder_auto_falls_back_to_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frame_decode, "cuda_available", lambda: False)
    made = make_decoder(FramesConfig(device="auto", workers=2))
    try:
        assert isinstance(made, CpuDecoder)
    finally:
        made.close()


def test_make_decoder_cuda_without_cuda_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frame_decode, "cuda_available", lambda: False)
    with pytest.raises(BufferError, match="cuda"):
        make_decoder(FramesConfig(device="cuda", workers=2))


def test_cuda_is_not_available_without_torchvision() -> None:
    try:
        import torchvision  # noqa: F401
    except ImportError:
        assert cuda_available() is False
    else:
        pytest.skip("torchvision is installed: whether CUDA decodes depends on the machine")
