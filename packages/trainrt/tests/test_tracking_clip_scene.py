"""A clip names the scene it needs (``trainrt.motion.scenes``): the G1 crawl clip's slope mesh is where the clip
stands, in every world of the tracking env, and the robot resets onto it (CPU MuJoCo, G1 assets)."""

from __future__ import annotations

import dataclasses
import shutil
from typing import ClassVar

import mujoco
import numpy as np
import pytest
import torch

import simcore
from simcore._src.capability import Capability, declared_capabilities
from simcore._src.config import default_nconmax
from simcore._src.mujoco_backend import MujocoBackend
from trainrt.config.schema import TaskSection
from trainrt.envs import ManagerBasedRlEnv
from trainrt.motion.loader import load_motion
from trainrt.motion.scenes import CLIP_SCENES, clip_scene, needs_scene
from trainrt.robots import G1
from trainrt.tasks import make_task_cfg
from trainrt.terrain import TerrainMeshCfg
from trainrt.terrain.scene import load_terrain_meshes

CRAWL = "motion_crawl_slope.npz"
SLOPE_GEOMS = ("crawl_slope_0", "crawl_slope_1", "crawl_slope_2")  # plank, platform, ground slab
HAND_CAPSULE_RADIUS_M = 0.05


@pytest.fixture(scope="module")
def crawl_path():
    path = G1.motions_dir() / CRAWL
    if not path.is_file() or not (path.parent / "terrain_slope.obj").is_file():
        pytest.skip(f"G1 assets missing: {path} (run `make setup`)")
    return path


def _names(model: mujoco.MjModel, ids) -> list[str]:
    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, int(i)) or "" for i in ids]


def _contacts(model: mujoco.MjModel, qpos: np.ndarray) -> list[tuple[str, str, float]]:
    """(robot geom, other geom, distance) of every contact at ``qpos`` (a fresh MjData, forward kinematics)."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    return [(*_names(model, (c.geom1, c.geom2)), float(c.dist)) for c in data.contact[: data.ncon]]


def test_the_crawl_clip_names_its_slope_and_other_clips_name_none(crawl_path):
    assert tuple(CLIP_SCENES) == (CRAWL,)
    (slope,) = clip_scene(crawl_path)
    assert slope == TerrainMeshCfg(str(crawl_path.parent / "terrain_slope.obj"), name="crawl_slope")
    assert needs_scene(CRAWL) and needs_scene(crawl_path) and not needs_scene(None)
    assert clip_scene(crawl_path.parent / G1.default_motion) == ()
    # the default task and the other asset clips keep the flat floor
    assert make_task_cfg("g1_motion_tracking").scene.terrain_meshes == ()
    other = make_task_cfg(
        TaskSection(name="g1_motion_tracking", motion_file="sub3_largebox_003_mj_w_obj.npz")
    )
    assert other.scene.terrain_meshes == ()
    crawl = make_task_cfg(TaskSection(name="g1_motion_tracking", motion_file=CRAWL))
    assert crawl.scene.terrain_meshes == (slope,)
    assert crawl.commands["motion"].params["motion_file"] == CRAWL


def test_the_slope_lies_where_the_clip_stands(crawl_path):
    """The clip's root heights include the terrain: with the mesh at the origin, unrotated, the feet rest on the
    ground slab at the first frame (root 0.785 m up) and on the 0.41 m platform at the last (root 1.157 m), each
    within a centimetre; no other placement does (a 3 cm shift leaves them 3 cm off)."""
    meshes = load_terrain_meshes(clip_scene(crawl_path))
    model = G1.scene_model(terrain_meshes=meshes)
    clip = load_motion(crawl_path, model, strict_names=True)
    columns = [int(model.joint(name).qposadr[0]) for name in clip.joint_names]

    def qpos(frame: int) -> np.ndarray:
        q = np.zeros(model.nq)
        q[:3], q[3:7] = clip.root_pos_w[frame].numpy(), clip.root_quat_w[frame].numpy()
        q[columns] = clip.joint_pos[frame].numpy()
        return q

    def on_slope(frame: int) -> list[tuple[str, str, float]]:
        return [c for c in _contacts(model, qpos(frame)) if c[1] in SLOPE_GEOMS]

    first, last = on_slope(0), on_slope(clip.num_frames - 1)
    assert clip.root_pos_w[0, 2].item() == pytest.approx(0.785, abs=1e-3)
    assert clip.root_pos_w[-1, 2].item() == pytest.approx(1.157, abs=1e-3)
    assert {c[1] for c in first} == {"crawl_slope_2"} and {c[1] for c in last} >= {"crawl_slope_1"}
    feet = [c for c in first + last if "foot" in c[0]]
    assert len(feet) >= 20 and min(c[2] for c in feet) > -0.01  # soles on the surface, none a centimetre in
    # the same check fails for a mesh 3 cm higher: the start frame's soles would be 3 cm inside the slab
    raised = G1.scene_model(terrain_meshes=(dataclasses.replace(meshes[0], pos=(0.0, 0.0, 0.03)),))
    assert min(c[2] for c in _contacts(raised, qpos(0)) if c[1] in SLOPE_GEOMS) < -0.025
    # while it crawls the clip puts its hands' frames on the surface; only the hand capsules reach in
    deep = {
        c[0]
        for frame in range(0, clip.num_frames, 10)
        for c in on_slope(frame)
        if c[2] < -0.01
        and (c[0].endswith("hand_collision") or pytest.fail(f"frame {frame}: {c} is inside the slope"))
        and (c[2] > -(HAND_CAPSULE_RADIUS_M + 0.01) or pytest.fail(f"frame {frame}: {c} is too deep"))
    }
    assert deep == {"left_hand_collision", "right_hand_collision"}
    # the contact buffer a world gets by default holds every contact the clip makes on the slope
    most = max(len(_contacts(model, qpos(frame))) for frame in range(0, clip.num_frames, 10))
    assert 20 <= most <= default_nconmax(model)


def _crawl_env(start_frame: int, num_envs: int = 2) -> ManagerBasedRlEnv:
    cfg = make_task_cfg(TaskSection(name="g1_motion_tracking", motion_file=CRAWL))
    motion = cfg.commands["motion"]
    exact = {
        "pose_range": {},
        "velocity_range": {},
        "joint_position_range": (0.0, 0.0),
        "start_frame": start_frame,
    }
    cfg.commands["motion"] = dataclasses.replace(motion, params={**motion.params, **exact})
    return ManagerBasedRlEnv(cfg, sim="mujoco", num_envs=num_envs, device="cpu", seed=0)


def test_the_env_has_the_slope_in_every_world_and_resets_onto_it(crawl_path):
    env = _crawl_env(start_frame=0)
    model = env.backend.mj_model
    flat = G1.scene_model()
    slope_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name) for name in SLOPE_GEOMS]
    assert model.ngeom == flat.ngeom + 3 and min(slope_ids) >= 0
    assert {int(model.geom_type[i]) for i in slope_ids} == {int(mujoco.mjtGeom.mjGEOM_MESH)}
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert model.geom_pos[floor, 2] == pytest.approx(
        -0.351 - 1.0, abs=1e-3
    )  # under the plank's lowest corner
    env.reset()
    motion = env.command_manager.get_term("motion")
    assert motion.frame.tolist() == [0, 0]
    qpos = env.backend.qpos.double().numpy()
    torch.testing.assert_close(
        env.backend.qpos[:, :3], motion.clip.root_pos_w[[0, 0]].to(env.backend.qpos.dtype), atol=1e-6, rtol=0
    )
    for world in range(env.num_envs):  # every world stands on the slab, not in it
        ground = [c for c in _contacts(model, qpos[world]) if c[1] in SLOPE_GEOMS]
        assert len(ground) >= 10 and min(c[2] for c in ground) > -0.01
    for _ in range(5):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    for world in range(env.num_envs):
        touching = [c for c in _contacts(model, env.backend.qpos.double().numpy()[world]) if "foot" in c[0]]
        assert touching and {c[1] for c in touching} <= set(SLOPE_GEOMS)  # the mesh, never the floor below
        assert min(c[2] for c in touching) > -0.01


def test_a_reset_on_the_plank_puts_the_robot_at_the_clips_height_on_it(crawl_path):
    env = _crawl_env(start_frame=450, num_envs=1)  # crawling up the plank, 0.4 m above the slab's level
    env.reset()
    motion = env.command_manager.get_term("motion")
    root = env.backend.qpos[0, :3].double()
    torch.testing.assert_close(root, motion.clip.root_pos_w[450].double(), atol=1e-6, rtol=0)
    contacts = _contacts(env.backend.mj_model, env.backend.qpos.double().numpy()[0])
    assert {c[1] for c in contacts if c[1] in SLOPE_GEOMS} == {"crawl_slope_0"}  # the plank
    assert min(c[2] for c in contacts) > -(HAND_CAPSULE_RADIUS_M + 0.01)


def test_a_missing_slope_names_the_file_and_the_fix(crawl_path, tmp_path):
    copy = tmp_path / CRAWL
    shutil.copyfile(crawl_path, copy)
    expected = rf"needs its scene's mesh {tmp_path / 'terrain_slope.obj'}.*make setup.*put terrain_slope.obj beside it"
    with pytest.raises(ValueError, match=expected):
        make_task_cfg(TaskSection(name="g1_motion_tracking", motion_file=str(copy)))
    with pytest.raises(ValueError, match=expected):  # the config refuses it before a run writes anything
        TaskSection(name="g1_motion_tracking", motion_file=str(copy))
    shutil.copyfile(crawl_path.parent / "terrain_slope.obj", tmp_path / "terrain_slope.obj")
    meshes = make_task_cfg(TaskSection(name="g1_motion_tracking", motion_file=str(copy))).scene.terrain_meshes
    assert meshes[0].file == str(tmp_path / "terrain_slope.obj")
    with pytest.raises(
        FileNotFoundError, match=r"terrain mesh file not found: .*gone\.obj; fetch the assets"
    ):
        load_terrain_meshes((TerrainMeshCfg(str(tmp_path / "gone.obj")),))


class _NoMeshes(MujocoBackend):
    capabilities: ClassVar[frozenset[Capability]] = declared_capabilities(MujocoBackend) - {
        Capability.COLLISION_MESH
    }


def test_a_backend_without_collision_meshes_fails_closed(crawl_path, monkeypatch):
    monkeypatch.setattr(
        simcore,
        "make_backend",
        lambda name, model, config, require=(): _NoMeshes(model, config, require=require),
    )
    with pytest.raises(
        NotImplementedError,
        match=r"scene\.terrain_meshes needs a backend that declares Capability\.COLLISION_MESH",
    ):
        _crawl_env(start_frame=0, num_envs=1)


def test_one_step_on_the_slope_agrees_across_backends(crawl_path):
    """CPU MuJoCo and MuJoCo Warp (Warp's CPU device) from the clip's poses on the slab and on the plank."""
    model = G1.scene_model(terrain_meshes=load_terrain_meshes(clip_scene(crawl_path)))
    clip = load_motion(crawl_path, model, strict_names=True)
    columns = [int(model.joint(name).qposadr[0]) for name in clip.joint_names]
    frames = [0, 450]  # standing on the ground slab; crawling on the plank
    results = {}
    for name in ("mujoco", "mjwarp"):
        backend = simcore.make_backend(name, model, simcore.SimConfig(num_envs=2, decimation=1, device="cpu"))
        spec = backend.reset_spec(("qpos",))
        payload = spec.new_payload()
        qpos = payload["qpos"]
        qpos.copy_(backend.qpos)
        qpos[:, :3] = clip.root_pos_w[frames].to(qpos.dtype)
        qpos[:, 3:7] = clip.root_quat_w[frames].to(qpos.dtype)
        qpos[:, columns] = clip.joint_pos[frames].to(qpos.dtype)
        backend.reset(torch.ones(2, dtype=torch.bool), payload, spec)
        backend.ctrl.copy_(clip.joint_pos[frames].to(backend.ctrl.dtype))
        backend.step()
        results[name] = (backend.qpos.double().clone(), backend.diagnostics().contacts)
    (cpu_qpos, cpu_contacts), (warp_qpos, warp_contacts) = results["mujoco"], results["mjwarp"]
    assert warp_contacts == cpu_contacts >= 20
    torch.testing.assert_close(warp_qpos, cpu_qpos, atol=1e-4, rtol=0)
