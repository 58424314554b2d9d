"""Renderer back ends and how one is chosen: ``egl`` and ``osmesa`` (MuJoCo's OpenGL renderer), ``software``.

``make_renderer(poser, width, height, camera, "auto")`` tries EGL, then OSMesa, then the NumPy ray caster on
a machine with a CUDA GPU, and takes the ray caster (it needs nothing beyond the Python packages) on one
without. Asking for one back end by name gives that back end or ``RendererUnavailableError`` saying what to
install. All of them draw the same ``FrameScene`` (see ``trainrt.viz.scene``); training imports none of it."""

from __future__ import annotations

import math
from typing import Any, Protocol

import mujoco
import numpy as np

from trainrt.hotpath import cold_path
from trainrt.viz.scene import GEOM_PLANE, FollowCamera, FrameScene, ScenePoser
from trainrt.viz.software import SoftwareRenderer, sky_gradient

RENDERER_CHOICES: tuple[str, ...] = ("auto", "egl", "osmesa", "software")
_CAPTION_MIN_HEIGHT = 120
_MAX_SCENE_GEOMS = 2000
_FLOOR_HALF_EXTENT_M = 30.0
_SUN_DIRECTION = np.array([0.35, 0.25, 1.0]) / np.linalg.norm([0.35, 0.25, 1.0])

_INSTALL_HINTS = {
    "egl": "EGL needs libEGL with a GPU driver or Mesa (Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri; "
    "NVIDIA: the driver's libEGL_nvidia)",
    "osmesa": "OSMesa needs libOSMesa (Debian/Ubuntu: apt-get install libosmesa6) and PyOpenGL",
}


class RendererUnavailableError(RuntimeError):
    """The requested renderer cannot run here; the message says what to install or which one to use."""


class FrameRenderer(Protocol):
    """Draws ``FrameScene`` frames to ``(height, width, 3)`` uint8 images."""

    name: str
    width: int
    height: int

    def render(self, scene: FrameScene) -> np.ndarray:
        """The image of ``scene``."""
        ...

    def close(self) -> None:
        """Release what the renderer holds."""
        ...


def _gl_context(backend: str, width: int, height: int) -> Any:
    """A current offscreen OpenGL context of MuJoCo's ``egl`` or ``osmesa`` module."""
    if backend == "egl":
        from mujoco.egl import GLContext
    else:
        from mujoco.osmesa import GLContext
    context = GLContext(width, height)
    context.make_current()
    return context


class MujocoGlRenderer:
    """MuJoCo's own OpenGL renderer on an offscreen EGL or OSMesa context.

    MuJoCo draws the posed render model itself (visual meshes, the floor's checker material, terrain); the
    ghost is the robot's geoms at the reference pose (``mjv_addGeoms``) recoloured translucent, and the
    decorations are added with ``mjv_initGeom``: the same frame the software renderer draws.
    """

    @cold_path
    def __init__(
        self, poser: ScenePoser, width: int, height: int, camera: FollowCamera, backend: str
    ) -> None:
        self.name, self.width, self.height, self.camera = backend, int(width), int(height), camera
        model = poser.model
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), self.width)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), self.height)
        model.vis.global_.fovy = camera.fovy
        model.vis.headlight.ambient[:] = 0.35
        model.vis.headlight.diffuse[:] = 0.45
        self._model, self._data = model, poser.data
        self._context = _gl_context(backend, self.width, self.height)
        self._mjr = mujoco.MjrContext(model, int(mujoco.mjtFontScale.mjFONTSCALE_100))
        mujoco.mjr_setBuffer(int(mujoco.mjtFramebuffer.mjFB_OFFSCREEN), self._mjr)
        self._scene = mujoco.MjvScene(model, maxgeom=_MAX_SCENE_GEOMS)
        self._option = mujoco.MjvOption()
        self._option.geomgroup[:] = poser.geomgroup  # the render model's drawn groups
        self._perturb = mujoco.MjvPerturb()
        self._cam = mujoco.MjvCamera()
        self._cam.type = int(mujoco.mjtCamera.mjCAMERA_FREE)
        self._viewport = mujoco.MjrRect(0, 0, self.width, self.height)
        self._pixels = np.zeros((self.height, self.width, 3), dtype=np.uint8)
        self._depth = np.zeros((self.height, self.width), dtype=np.float32)
        self._sky = np.flipud(sky_gradient(self.height, self.width))

    def _add_sun(self) -> None:
        """A directional light from above (the model has none; the head light alone leaves the floor dark)."""
        scene = self._scene
        if self._model.nlight or scene.nlight >= len(scene.lights):
            return  # a render model brings its own sun
        light = scene.lights[scene.nlight]
        light.dir[:] = -_SUN_DIRECTION
        light.pos[:] = _SUN_DIRECTION * 10.0
        light.diffuse[:] = 0.5
        light.ambient[:] = 0.1
        light.specular[:] = 0.1
        light.type = int(mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
        light.castshadow = 0
        light.headlight = 0
        scene.nlight += 1

    def _add(self, batch: Any) -> None:
        scene = self._scene
        for g in range(len(batch)):
            if scene.ngeom >= scene.maxgeom:
                return
            size = batch.sizes[g].astype(np.float64)
            if int(batch.kinds[g]) == GEOM_PLANE and (size[0] <= 0 or size[1] <= 0):
                size = np.array([_FLOOR_HALF_EXTENT_M, _FLOOR_HALF_EXTENT_M, 1.0])  # MuJoCo: 0 = infinite
            mujoco.mjv_initGeom(
                scene.geoms[scene.ngeom],
                int(batch.kinds[g]),
                size,
                batch.pos[g].astype(np.float64),
                batch.mats[g].reshape(9).astype(np.float64),
                batch.rgba[g].astype(np.float32),
            )
            scene.ngeom += 1

    @cold_path
    def render(self, scene: FrameScene) -> np.ndarray:
        """The image (height, width, 3) uint8 of ``scene``."""
        self._context.make_current()
        cam, c = self._cam, self.camera
        cam.lookat[:] = scene.lookat
        cam.distance, cam.azimuth, cam.elevation = c.distance, c.azimuth, c.elevation
        data = scene.model.data if scene.model is not None else self._data
        mujoco.mjv_updateScene(
            self._model, data, self._option, self._perturb, cam, int(mujoco.mjtCatBit.mjCAT_ALL), self._scene
        )
        if scene.model is None:
            self._scene.ngeom = 0
        self._add_sun()
        if scene.ghost_model is not None:
            first = self._scene.ngeom
            mujoco.mjv_addGeoms(
                self._model,
                scene.ghost_model.data,
                self._option,
                self._perturb,
                int(mujoco.mjtCatBit.mjCAT_DYNAMIC),
                self._scene,
            )
            for i in range(first, self._scene.ngeom):
                geom = self._scene.geoms[i]
                rgba = scene.ghost_model.rgba[int(geom.objid)].astype(np.float32)
                rgba[3] = 1.0 - (1.0 - rgba[3]) ** (
                    1.0 / 3.0
                )  # OpenGL blends every layer: back faces, overlaps
                geom.rgba[:] = rgba
                geom.matid = -1
                geom.transparent = 1
        self._add(scene.solid)
        self._add(scene.ghost)
        mujoco.mjr_render(self._viewport, self._scene, self._mjr)
        mujoco.mjr_readPixels(self._pixels, self._depth, self._viewport, self._mjr)
        image = np.where((self._depth >= 1.0)[..., None], self._sky, self._pixels)  # nothing drawn: sky
        return np.flipud(image).copy()

    @cold_path
    def close(self) -> None:
        """Free the MuJoCo render context and the GL context."""
        if self._context is not None:
            self._mjr.free()
            self._context.free()
            self._context = None


def _auto_order() -> tuple[str, ...]:
    """Back ends ``auto`` tries: EGL then OSMesa with a CUDA GPU, else the software renderer alone.

    Without a GPU, EGL and OSMesa are Mesa's llvmpipe, whose LLVM clashes with the one Triton loads for
    torch (a crash at Triton's import once a Mesa context exists); the NumPy renderer is as fast there.
    """
    import torch

    return ("egl", "osmesa", "software") if torch.cuda.is_available() else ("software",)


@cold_path
def make_renderer(
    poser: ScenePoser,
    width: int,
    height: int,
    camera: FollowCamera | None = None,
    choice: str = "auto",
) -> FrameRenderer:
    """The renderer ``choice`` (one of ``RENDERER_CHOICES``) for ``poser``'s model at ``width`` x ``height``.

    ``auto`` takes the first of egl, osmesa, software that starts where a CUDA GPU is present, the software
    renderer elsewhere (see ``_auto_order``). Raises ``ValueError`` for an unknown
    choice or size, ``RendererUnavailableError`` (saying what to install) when the named one cannot start.
    """
    if choice not in RENDERER_CHOICES:
        raise ValueError(f"renderer must be one of {list(RENDERER_CHOICES)}, got {choice!r}")
    if width < 8 or height < 8 or width % 2 or height % 2:
        raise ValueError(
            f"frame size must be even and at least 8x8 pixels (video encoding), got {width}x{height}"
        )
    camera = camera or FollowCamera()
    for backend in _auto_order() if choice == "auto" else (choice,):
        if backend == "software":
            break
        try:
            return MujocoGlRenderer(poser, width, height, camera, backend)
        except Exception as err:  # a missing library shows up as ImportError, OSError or a GL error
            reason = f"{backend}: {type(err).__name__}: {err}".strip()
            if choice != "auto":
                raise RendererUnavailableError(
                    f"renderer {backend!r} cannot start here ({reason}). {_INSTALL_HINTS[backend]}; "
                    "or pass --renderer software (NumPy, no system libraries)"
                ) from err
    return SoftwareRenderer(width, height, camera)


def _caption_font(height: int, width: int) -> Any:
    """Pillow's built-in font at a size that suits a ``height`` x ``width`` frame (its bitmap font if the
    scalable one is not available)."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=max(11, min(20, height // 22, width // 36)))
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


@cold_path
def draw_caption(image: np.ndarray, lines: list[str]) -> np.ndarray:
    """``image`` (H, W, 3) with ``lines`` of text on a dark translucent band in its top-left corner (left
    as is below 120 rows)."""
    if not lines or image.shape[0] < _CAPTION_MIN_HEIGHT:
        return image
    from PIL import Image, ImageDraw

    font = _caption_font(image.shape[0], image.shape[1])
    picture = Image.fromarray(image).convert("RGBA")
    band = Image.new("RGBA", picture.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(band)
    boxes = [draw.textbbox((0, 0), line, font=font) for line in lines]
    step = max(b[3] for b in boxes) + 3
    width = max(b[2] for b in boxes)
    draw.rectangle((0, 0, width + 10, 6 + step * len(lines)), fill=(0, 0, 0, 140))
    for row, line in enumerate(lines):
        draw.text((5, 4 + step * row), line, fill=(255, 255, 255, 255), font=font)
    return np.asarray(Image.alpha_composite(picture, band).convert("RGB"))


@cold_path
def tile_frames(images: list[np.ndarray]) -> np.ndarray:
    """Images of one size (H, W, 3) tiled row-major into a near-square grid, black where the grid is empty."""
    if not images:
        raise ValueError("tile_frames needs at least one image")
    count = len(images)
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    h, w, c = images[0].shape
    grid = np.zeros((rows * h, cols * w, c), dtype=images[0].dtype)
    for i, image in enumerate(images):
        r, k = divmod(i, cols)
        grid[r * h : (r + 1) * h, k * w : (k + 1) * w] = image
    return grid
