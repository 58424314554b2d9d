"""The render model: the G1's visual meshes posed like the simulated model, the terrain in the frame, the
ghost at the reference pose, the fallback to primitives when mesh files are missing."""

import shutil

import mujoco
import numpy as np
import pytest
import torch

import simcore
from trainrt.robots import G1
from trainrt.viz.render import make_renderer
from trainrt.viz.scene import GEOM_HFIELD, GEOM_MESH, FollowCamera
from trainrt.viz.visual import (
    HFIELD_GROUP,
    RAY_TERRAIN_GROUP,
    ROBOT_GROUP,
    build_render_model,
    poser_for,
)


def _g1_or_skip():
    try:
        G1.mjcf_path()
    except FileNotFoundError:
        pytest.skip("G1 assets are not fetched (python -m trainrt.robots fetch)")


def _g1_clip_or_skip():
    """The G1 model and its last motion clip without an object (float64); skips when either is not fetched."""
    _g1_or_skip()
    from trainrt.motion import load_motion

    clips = [p for p in G1.motion_files() if "w_obj" not in p.name]
    if not clips:
        pytest.skip("G1 motion clips are not fetched")
    sim = G1.model()
    return sim, load_motion(clips[-1], sim, dtype=torch.float64)


def _random_qpos(model: mujoco.MjModel, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)  # test data only
    qpos = model.qpos0.copy()
    qpos[:3] = rng.uniform(-1.0, 1.0, 3) + np.array([0.0, 0.0, 0.8])
    quat = rng.normal(size=4)
    qpos[3:7] = quat / np.linalg.norm(quat)
    for j in range(1, model.njnt):
        low, high = model.jnt_range[j] if model.jnt_limited[j] else (-1.0, 1.0)
        qpos[model.jnt_qposadr[j]] = rng.uniform(low, high)
    return qpos


def test_visual_model_poses_every_body_where_the_simulated_model_does():
    _g1_or_skip()
    sim = G1.model()
    poser = poser_for(sim)
    m = poser.model
    drawn_meshes = [g for g in poser.robot_geoms if m.geom_type[g] == GEOM_MESH]
    assert len(drawn_meshes) > 20 and all(m.geom_group[g] == ROBOT_GROUP for g in poser.robot_geoms)
    data = mujoco.MjData(sim)
    for seed in range(3):
        data.qpos[:] = _random_qpos(sim, seed)
        mujoco.mj_kinematics(sim, data)
        for body in range(1, sim.nbody):
            name = mujoco.mj_id2name(sim, mujoco.mjtObj.mjOBJ_BODY, body)
            np.testing.assert_allclose(poser.body_position(data.qpos, name), data.xpos[body], atol=1e-9)


def test_terrain_heightfield_is_in_the_render_scene_at_the_simulated_heights():
    _g1_or_skip()
    x = np.linspace(0.0, 1.0, 21)
    heights = 0.4 * np.outer(np.ones(11), x)  # a ramp rising along x to 0.4 m
    field = simcore.Heightfield(heights=heights, half_extent=(2.0, 1.0), pos=(1.0, 0.0, 0.0))
    sim = G1.model(heightfields=(field,))
    poser = poser_for(sim)
    m = poser.model
    fields = [g for g in poser.world_geoms if m.geom_type[g] == GEOM_HFIELD]
    assert len(fields) == 1 and m.geom_group[fields[0]] == HFIELD_GROUP  # what OpenGL and the viewer draw
    twins = [g for g in poser.world_geoms if m.geom_type[g] == GEOM_MESH]
    assert len(twins) == 1 and m.geom_group[twins[0]] == RAY_TERRAIN_GROUP  # what the software renderer hits
    sim_data = mujoco.MjData(sim)
    mujoco.mj_kinematics(sim, sim_data)
    poser.scene(sim.qpos0, camera=FollowCamera())
    groups = np.array([0, 0, 0, 0, 0, 1], dtype=np.uint8)
    geomid = np.zeros(1, dtype=np.int32)
    for px in (-0.5, 0.2, 1.0, 2.5):
        start, down = np.array([px, 0.3, 3.0]), np.array([0.0, 0.0, -1.0])
        sim_hit = mujoco.mj_ray(sim, sim_data, start, down, groups, 1, -1, geomid)
        assert poser.ground_height(np.array([px, 0.3, 1.0])) == pytest.approx(3.0 - sim_hit, abs=1e-4)
    assert poser.ground_height(np.array([2.5, 0.3, 1.0])) == pytest.approx(0.35, abs=0.01)  # 7/8 up the ramp


def test_ghost_layer_stands_at_the_reference_pose_of_the_clip():
    sim, clip = _g1_clip_or_skip()
    poser = poser_for(sim)
    for frame in (0, clip.num_frames // 2, clip.num_frames - 1):
        ghost = poser.qpos_from_pose(
            clip.root_pos_w[frame].numpy(),
            clip.root_quat_w[frame].numpy(),
            clip.joint_names,
            clip.joint_pos[frame].numpy(),
        )
        scene = poser.scene(sim.qpos0, camera=FollowCamera(), ghost_qpos=ghost)
        layer = scene.ghost_model
        assert layer is not None and not layer.static and np.all(layer.rgba[:, 3] < 0.5)
        for b, name in enumerate(clip.body_names):
            np.testing.assert_allclose(
                layer.data.xpos[poser.model.body(name).id], clip.body_pos_w[frame, b].numpy(), atol=1e-6
            )


def test_ghost_tints_the_frame_where_it_stands():
    _g1_or_skip()
    sim = G1.model()
    poser = poser_for(sim)
    camera = FollowCamera(distance=3.0, azimuth=90.0, elevation=-5.0)
    renderer = make_renderer(poser, 64, 48, camera, "software")
    qpos = G1.default_qpos(sim)
    ghost = poser.render_qpos(qpos)
    ghost[0] += 0.9  # to the camera's right
    plain = renderer.render(poser.scene(qpos, camera=camera)).astype(int)
    with_ghost = renderer.render(poser.scene(qpos, camera=camera, ghost_qpos=ghost)).astype(int)
    changed = np.abs(with_ghost - plain).sum(axis=2) > 20
    assert changed[:, 40:].sum() > 20 and not changed[:, :28].any()
    tint = with_ghost[changed] - plain[changed]
    assert (tint[:, 0] > tint[:, 2]).mean() > 0.9  # the orange ghost


def test_missing_mesh_files_fall_back_to_primitives_and_say_so_once(tmp_path, capsys):
    _g1_or_skip()
    source = G1.mjcf_path()
    shutil.copy(source, tmp_path / source.name)  # the MJCF without its meshes folder
    sim = G1.model()
    model, visual = build_render_model(sim, tmp_path / source.name)
    first = capsys.readouterr().err
    assert (
        not visual and "mesh file(s)" in first and "make setup" in first and "collision primitives" in first
    )
    robot = [g for g in range(model.ngeom) if model.geom_bodyid[g] != 0]
    assert robot and all(model.geom_type[g] != GEOM_MESH for g in robot)
    assert all(model.geom_group[g] == ROBOT_GROUP for g in robot)
    build_render_model(sim, tmp_path / source.name)
    assert capsys.readouterr().err == ""  # said once


def floor_pattern_agreement() -> float | None:
    """Share of floor pixels that EGL and the software renderer put on the same side of the checker (None
    without EGL), looking down on the G1's floor. Run in its own process, as the silhouette check."""
    from trainrt.viz.render import RendererUnavailableError

    poser = poser_for(G1.model())
    camera = FollowCamera(distance=4.0, azimuth=90.0, elevation=-60.0, height=0.0)
    qpos = G1.default_qpos(G1.model())
    qpos[0] = 50.0  # the robot out of view
    try:
        gl = make_renderer(poser, 96, 72, camera, "egl")
    except RendererUnavailableError:
        return None
    software = make_renderer(poser, 96, 72, camera, "software")
    scene = poser.scene(qpos, camera=camera, render_space=False)
    scene.lookat[:2] = 0.13, 0.29  # squares' edges off the image centre
    sides = []
    for renderer in (gl, software):
        grey = renderer.render(scene).astype(float).mean(axis=2)[24:, :]  # the floor, below the horizon
        low, high = grey.min(axis=1, keepdims=True), grey.max(axis=1, keepdims=True)
        sides.append(grey > (low + high) / 2.0)  # light or dark square (the lighting differs a little)
    gl.close()
    return float((sides[0] == sides[1]).mean())


def test_opengl_and_software_renderers_draw_the_same_checkered_floor():
    _g1_or_skip()
    import subprocess
    import sys
    from pathlib import Path

    code = "import test_viz_visual as t; print('agreement', t.floor_pattern_agreement())"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    agreement = out.stdout.strip().rsplit(" ", 1)[-1]
    if agreement == "None":
        pytest.skip("EGL does not start here")
    assert float(agreement) > 0.97  # the same squares in the same places


def test_rough_walk_frames_draw_the_simulated_terrain(one_thread):
    _g1_or_skip()
    from trainrt.config import apply_overrides, cpu_demo_preset, parse_override
    from trainrt.runner.build import build_env
    from trainrt.viz.record import EnvFrames, VideoOptions

    cfg = cpu_demo_preset("sac", "g1_walk_rough", "mujoco")
    env = build_env(apply_overrides(cfg, [parse_override("algo.num_envs=1")]))
    sim = env.backend.mj_model
    frames = EnvFrames(env, VideoOptions(width=32, height=24, renderer="software"))
    m = frames.poser.model
    sim_fields = [g for g in range(sim.ngeom) if sim.geom_type[g] == GEOM_HFIELD]
    fields = [g for g in frames.poser.world_geoms if m.geom_type[g] == GEOM_HFIELD]
    assert len(fields) == len(sim_fields) > 1  # simcore's blocks, each drawn
    best = (-1.0, None)
    for field, sim_field in zip(fields, sim_fields, strict=True):
        h, sim_h = int(m.geom_dataid[field]), int(sim.geom_dataid[sim_field])
        nrow, ncol = int(sim.hfield_nrow[sim_h]), int(sim.hfield_ncol[sim_h])
        heights = sim.hfield_data[sim.hfield_adr[sim_h] :][: nrow * ncol].reshape(nrow, ncol)
        drawn = m.hfield_data[m.hfield_adr[h] :][: nrow * ncol].reshape(nrow, ncol)
        np.testing.assert_allclose(drawn, heights)
        np.testing.assert_allclose(m.hfield_size[h], sim.hfield_size[sim_h])
        np.testing.assert_allclose(m.geom_pos[field], sim.geom_pos[sim_field])
        if nrow < 5 or ncol < 5:
            continue
        windows = np.lib.stride_tricks.sliding_window_view(heights, (5, 5))
        plateau = np.zeros_like(heights)
        plateau[2:-2, 2:-2] = np.where(np.ptp(windows, axis=(2, 3)) == 0, heights[2:-2, 2:-2], 0.0)
        z = float(plateau.max()) * float(sim.hfield_size[sim_h, 2]) + float(sim.geom_pos[sim_field, 2])
        if z > best[0]:
            r, c = divmod(int(np.argmax(plateau)), ncol)  # its highest point with flat ground around it
            sx, sy = sim.hfield_size[sim_h, :2]
            best = (
                z,
                sim.geom_pos[sim_field, :2]
                + np.array([sx * (2 * c / (ncol - 1) - 1), sy * (2 * r / (nrow - 1) - 1)]),
            )
    top = best[1]
    data = mujoco.MjData(sim)
    mujoco.mj_kinematics(sim, data)
    geomid = np.zeros(1, dtype=np.int32)
    start = np.array([top[0] + 0.003, top[1] + 0.002, 20.0])
    terrain = np.array([0, 0, 0, 0, 0, 1], dtype=np.uint8)
    ground = 20.0 - mujoco.mj_ray(sim, data, start, np.array([0.0, 0.0, -1.0]), terrain, 1, -1, geomid)
    assert ground > 0.1
    frames.poser.scene(env.backend.qpos[0].double().cpu().numpy(), camera=FollowCamera())
    assert frames.poser.ground_height(start - np.array([0.0, 0.0, 19.0])) == pytest.approx(ground, abs=1e-3)
    frames.close()


def test_viewer_ghost_stands_at_the_reference_pose():
    from types import SimpleNamespace

    from trainrt.viz.viewer import _draw_ghost

    sim, clip = _g1_clip_or_skip()
    poser = poser_for(sim)
    option = mujoco.MjvOption()
    option.geomgroup[:] = poser.geomgroup
    view = SimpleNamespace(user_scn=mujoco.MjvScene(poser.model, maxgeom=500), opt=option)
    frame = clip.num_frames // 3
    _draw_ghost(view, poser, SimpleNamespace(frame=torch.tensor([frame]), clip=clip))
    scene = view.user_scn
    assert scene.ngeom == len(poser.robot_geoms)
    pelvis = clip.body_pos_w[frame, clip.body_index("pelvis")].numpy()
    pelvis_geoms = [
        i
        for i in range(scene.ngeom)
        if poser.model.geom_bodyid[scene.geoms[i].objid] == poser.model.body("pelvis").id
    ]
    assert pelvis_geoms and all(
        scene.geoms[i].transparent and scene.geoms[i].rgba[3] < 0.5 for i in range(scene.ngeom)
    )
    body = poser.ghost_data.xpos[poser.model.body("pelvis").id]
    np.testing.assert_allclose(body, pelvis, atol=1e-6)
