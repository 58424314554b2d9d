"""Renderers: ray-cast hits against a brute-force reference, back-end selection and its errors, ghosts."""

import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from trainrt.viz import render as render_module
from trainrt.viz.render import RendererUnavailableError, make_renderer, tile_frames
from trainrt.viz.scene import (
    GEOM_BOX,
    GEOM_CAPSULE,
    GEOM_CYLINDER,
    GEOM_SPHERE,
    FollowCamera,
    FrameScene,
    GeomBatch,
    ScenePoser,
)
from trainrt.viz.software import SoftwareRenderer, _local_hit

SCENE_XML = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.1" rgba="0.5 0.5 0.5 1"/>
    <body name="torso" pos="0 0 0.8">
      <freejoint/>
      <geom name="trunk" type="capsule" size="0.1 0.25"/>
      <geom name="head" type="sphere" size="0.1" pos="0 0 0.45"/>
      <geom name="hip" type="box" size="0.1 0.15 0.05" pos="0 0 -0.3"/>
      <geom name="leg" type="cylinder" size="0.05 0.2" pos="0 0.1 -0.55"/>
    </body>
  </worldbody>
</mujoco>
"""


def _sdf(kind: int, size: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Signed distance (N,) of local points (N, 3) to a geom centred at the origin."""
    if kind == GEOM_SPHERE:
        return np.linalg.norm(p, axis=1) - size[0]
    if kind == GEOM_CAPSULE:
        q = np.zeros_like(p)
        q[:, 2] = np.clip(p[:, 2], -size[1], size[1])
        return np.linalg.norm(p - q, axis=1) - size[0]
    if kind == GEOM_CYLINDER:
        d = np.stack([np.hypot(p[:, 0], p[:, 1]) - size[0], np.abs(p[:, 2]) - size[1]], axis=1)
        return np.minimum(d.max(axis=1), 0.0) + np.linalg.norm(np.maximum(d, 0.0), axis=1)
    q = np.abs(p) - size[:3]
    return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)


@pytest.mark.parametrize("kind", [GEOM_SPHERE, GEOM_CAPSULE, GEOM_CYLINDER, GEOM_BOX])
def test_ray_hits_match_a_dense_march_along_each_ray(kind):
    rng = np.random.default_rng(0)  # test data only
    size = np.array([0.3, 0.5, 0.4])
    origin = np.array([2.0, -1.5, 1.2])
    targets = rng.uniform(-0.7, 0.7, size=(300, 3))
    d = targets - origin
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    t, _ = _local_hit(kind, size, origin, d)
    ts = np.linspace(0.0, 6.0, 60001)  # 0.1 mm steps
    for i in range(len(d)):
        inside = _sdf(kind, size, origin + ts[:, None] * d[i]) <= 0.0
        reference = ts[np.argmax(inside)] if inside.any() else np.inf
        if np.isinf(reference):
            assert np.isinf(t[i]), f"ray {i}: hit at {t[i]} but the march finds none"
        else:
            assert t[i] == pytest.approx(reference, abs=2e-4), f"ray {i}"


def test_software_frame_shows_the_robot_the_floor_and_the_sky():
    poser = ScenePoser(mujoco.MjModel.from_xml_string(SCENE_XML))
    qpos = poser.model.qpos0.copy()
    renderer = make_renderer(poser, 64, 48, FollowCamera(distance=3.0, elevation=-10.0), "software")
    image = renderer.render(poser.scene(qpos, camera=FollowCamera(distance=3.0, elevation=-10.0)))
    assert image.shape == (48, 64, 3) and image.dtype == np.uint8
    sky, floor, middle = image[0, 0].astype(int), image[-1, 0].astype(int), image[24, 32].astype(int)
    assert sky[2] > sky[0]  # blue-ish sky at the top
    assert abs(floor[0] - floor[2]) < 30  # grey floor at the bottom
    assert np.abs(middle - sky).sum() > 60  # the robot in the middle


def test_ghost_is_blended_over_the_scene_where_it_stands():
    poser = ScenePoser(mujoco.MjModel.from_xml_string(SCENE_XML))
    camera = FollowCamera(distance=3.0, azimuth=90.0, elevation=-5.0)
    renderer = SoftwareRenderer(64, 48, camera)
    qpos = poser.model.qpos0.copy()
    ghost = qpos.copy()
    ghost[0] += 0.8  # the ghost stands to the side, seen from the camera's right
    plain = renderer.render(poser.scene(qpos, camera=camera)).astype(int)
    with_ghost = renderer.render(poser.scene(qpos, camera=camera, ghost_qpos=ghost)).astype(int)
    changed = np.abs(with_ghost - plain).sum(axis=2) > 20
    assert changed.any()
    orange = with_ghost[changed]
    assert (orange[:, 0] > orange[:, 2]).mean() > 0.9  # the ghost tints red-orange
    assert not changed[:, :20].any()  # nothing on the left, where the ghost does not stand


def test_named_renderer_that_cannot_start_says_what_to_install(monkeypatch):
    def no_gl(backend, width, height):
        raise OSError(f"lib{backend} not found")

    monkeypatch.setattr(render_module, "_gl_context", no_gl)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # auto tries GL first with a GPU
    poser = ScenePoser(mujoco.MjModel.from_xml_string(SCENE_XML))
    for backend, package in (("egl", "libegl1"), ("osmesa", "libosmesa6")):
        with pytest.raises(RendererUnavailableError) as err:
            make_renderer(poser, 64, 48, choice=backend)
        message = str(err.value)
        assert (
            package in message and "--renderer software" in message and f"lib{backend} not found" in message
        )
    assert make_renderer(poser, 64, 48, choice="auto").name == "software"  # auto falls back


def test_bad_renderer_arguments_name_the_valid_values():
    poser = ScenePoser(mujoco.MjModel.from_xml_string(SCENE_XML))
    with pytest.raises(ValueError, match="auto"):
        make_renderer(poser, 64, 48, choice="vulkan")
    with pytest.raises(ValueError, match="even"):
        make_renderer(poser, 63, 48, choice="software")


def test_mesh_geoms_are_drawn_by_the_software_renderer():
    xml = """<mujoco><asset><mesh name="tetra" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset>
    <worldbody><body pos="0 0 0.4"><freejoint/><geom name="blob" type="mesh" mesh="tetra"/></body></worldbody>
    </mujoco>"""
    poser = ScenePoser(mujoco.MjModel.from_xml_string(xml))
    camera = FollowCamera(distance=3.0, elevation=-10.0, height=0.6)
    renderer = make_renderer(poser, 64, 48, camera, "software")
    image = renderer.render(poser.scene(poser.model.qpos0.copy(), camera=camera)).astype(int)
    empty = renderer.render(FrameScene(GeomBatch.empty(), GeomBatch.empty(), np.array([0.0, 0.0, 0.6])))
    assert (np.abs(image - empty.astype(int)).sum(axis=2) > 30).sum() > 30


def test_tiles_fill_a_near_square_grid():
    images = [np.full((4, 6, 3), i, dtype=np.uint8) for i in range(1, 4)]
    grid = tile_frames(images)
    assert grid.shape == (8, 12, 3)
    assert grid[0, 0, 0] == 1 and grid[0, 6, 0] == 2 and grid[4, 0, 0] == 3 and grid[4, 6, 0] == 0


def test_empty_batch_concatenates():
    assert len(GeomBatch.empty().concat(GeomBatch.empty())) == 0


def silhouette_overlap() -> float | None:
    """Intersection over union of the robot's pixels drawn by EGL and by the software renderer (None
    without EGL). Run in its own process: a Mesa EGL context and Triton's LLVM must not share one."""
    xml = SCENE_XML.replace('<geom name="floor" type="plane" size="0 0 0.1" rgba="0.5 0.5 0.5 1"/>', "")
    poser = ScenePoser(mujoco.MjModel.from_xml_string(xml))
    camera = FollowCamera(distance=2.5, azimuth=120.0, elevation=-20.0, height=0.6)
    try:
        gl = make_renderer(poser, 192, 144, camera, "egl")
    except RendererUnavailableError:
        return None
    software = make_renderer(poser, 192, 144, camera, "software")
    scene = poser.scene(poser.model.qpos0.copy(), camera=camera)
    nothing = FrameScene(GeomBatch.empty(), GeomBatch.empty(), scene.lookat)
    masks = []
    for renderer in (gl, software):
        background = renderer.render(nothing).astype(int)
        masks.append(np.abs(renderer.render(scene).astype(int) - background).sum(axis=2) > 30)
    gl.close()
    assert masks[1].sum() > 200
    return float((masks[0] & masks[1]).sum() / (masks[0] | masks[1]).sum())


@pytest.mark.slow
def test_software_silhouette_matches_mujocos_opengl_renderer():
    code = "import test_viz_render as t; print('overlap', t.silhouette_overlap())"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    overlap = out.stdout.strip().rsplit(" ", 1)[-1]
    if overlap == "None":
        pytest.skip("EGL does not start here")
    assert float(overlap) > 0.93  # edge pixels differ (GL tessellates capsules; no anti-aliasing here)


def test_auto_takes_the_software_renderer_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    poser = ScenePoser(mujoco.MjModel.from_xml_string(SCENE_XML))
    assert make_renderer(poser, 64, 48, choice="auto").name == "software"
