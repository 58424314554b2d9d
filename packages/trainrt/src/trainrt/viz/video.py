"""MP4 encoding and decoding through the ffmpeg binary that the ``imageio-ffmpeg`` wheel ships (no system
ffmpeg), and animated GIFs (Pillow) for TensorBoard."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from trainrt.hotpath import cold_path

VIZ_INSTALL_HINT = (
    "install the viz extra: `uv sync --extra viz` in this repository, or `pip install 'trainrt[viz]'`"
)


def _imageio_ffmpeg() -> Any:
    try:
        import imageio_ffmpeg
    except ImportError as err:
        raise RuntimeError(f"video encoding needs imageio-ffmpeg: {VIZ_INSTALL_HINT}") from err
    return imageio_ffmpeg


class VideoWriter:
    """Writes (height, width, 3) uint8 frames to an H.264 MP4 at ``fps`` frames per second.

    Use as a context manager; the file is complete after ``close()``.
    """

    @cold_path
    def __init__(self, path: str | os.PathLike, width: int, height: int, fps: float) -> None:
        if width % 2 or height % 2:
            raise ValueError(f"H.264 needs an even frame size, got {width}x{height}")
        if not fps > 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.width, self.height, self.fps = int(width), int(height), float(fps)
        self.frames_written = 0
        self._writer = _imageio_ffmpeg().write_frames(
            str(self.path),
            (self.width, self.height),
            fps=self.fps,
            codec="libx264",
            pix_fmt_out="yuv420p",
            quality=7,
            macro_block_size=2,
            ffmpeg_log_level="error",
        )
        self._writer.send(None)

    @cold_path
    def append(self, frame: np.ndarray) -> None:
        """Add one frame (height, width, 3) uint8."""
        if frame.shape != (self.height, self.width, 3) or frame.dtype != np.uint8:
            raise ValueError(
                f"frame must be ({self.height}, {self.width}, 3) uint8, got {frame.shape} {frame.dtype}"
            )
        self._writer.send(np.ascontiguousarray(frame))
        self.frames_written += 1

    @cold_path
    def close(self) -> None:
        """Finish the file."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@cold_path
def read_video(path: str | os.PathLike) -> tuple[np.ndarray, float]:
    """Decode an MP4: its frames (T, height, width, 3) uint8 and its frame rate."""
    reader = _imageio_ffmpeg().read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(raw, dtype=np.uint8).reshape(height, width, 3) for raw in reader]
    return np.stack(frames) if frames else np.zeros((0, height, width, 3), np.uint8), float(meta["fps"])


@cold_path
def gif_bytes(frames: Iterable[np.ndarray], fps: float) -> bytes:
    """An animated GIF of (height, width, 3) uint8 frames, looping."""
    from PIL import Image

    pictures = [Image.fromarray(f) for f in frames]
    buffer = io.BytesIO()
    pictures[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=pictures[1:],
        duration=round(1000.0 / fps),
        loop=0,
    )
    return buffer.getvalue()


@cold_path
def write_tensorboard_gif(writer: Any, tag: str, frames: list[np.ndarray], *, fps: float, step: int) -> None:
    """Add ``frames`` (height, width, 3) uint8 as an animated GIF image summary to a ``SummaryWriter``
    (TensorBoard's image dashboard plays it)."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    height, width = frames[0].shape[:2]
    image = Summary.Image(
        height=height, width=width, colorspace=3, encoded_image_string=gif_bytes(frames, fps)
    )
    writer._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step)
