"""Scenes and configs shared by the simcore tests (imported by name; pytest puts this folder on sys.path)."""

from __future__ import annotations

import copy

import mujoco
import torch

import simcore

SMALL_XML = """
<mujoco model="small">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.3">
      <freejoint name="box_root"/>
      <geom name="box_geom" type="box" size="0.1 0.1 0.1" mass="2"/>
      <site name="box_site" pos="0.05 0.02 0"/>
    </body>
    <body name="arm" pos="1 0 0.5">
      <joint name="hinge1" type="hinge" axis="0 1 0" range="-2 2" limited="true" damping="0.05"/>
      <geom name="upper" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5" contype="0" conaffinity="0"/>
      <body name="forearm" pos="0.3 0 0">
        <joint name="hinge2" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom name="lower" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.3" contype="0"
              conaffinity="0"/>
        <site name="tip" pos="0.3 0 0"/>
      </body>
    </body>
    <body name="target" mocap="true" pos="0 1 1"/>
  </worldbody>
  <actuator>
    <position name="servo1" joint="hinge1" kp="20" kv="1"/>
    <general name="servo2" joint="hinge2" dyntype="filter" dynprm="0.05" gainprm="5" biastype="affine"
             biasprm="0 -5 -0.5"/>
  </actuator>
  <sensor>
    <framepos name="tip_pos" objtype="site" objname="tip"/>
    <gyro name="box_gyro" site="box_site"/>
    <accelerometer name="box_acc" site="box_site"/>
    <jointpos name="hinge1_pos" joint="hinge1"/>
  </sensor>
</mujoco>
"""
"""A free box resting near a floor, a two-link arm with a position servo and a filtered (stateful) servo,
a mocap body, and position / velocity / acceleration sensors: every carrier has a non-zero width."""


def ball_and_cube_xml(ball_pos: str, cube_pos: str) -> str:
    """A free ball (radius 5 cm) at ``ball_pos`` and a free cube (side 10 cm) at ``cube_pos`` ("x y z"), 1 kg
    each, over no ground: a scene to put terrain under."""
    return f"""
<mujoco model="ball_and_cube">
  <option timestep="0.005"/>
  <worldbody>
    <body name="ball" pos="{ball_pos}">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.05" mass="1"/>
    </body>
    <body name="cube" pos="{cube_pos}">
      <freejoint/>
      <geom name="cube" type="box" size="0.05 0.05 0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


BACKENDS = ("mujoco", "mjwarp")


def cpu_config(num_envs: int = 3, **kwargs) -> simcore.SimConfig:
    """A SimConfig pinned to the CPU (mjwarp then runs on Warp's CPU device)."""
    return simcore.SimConfig(num_envs=num_envs, device="cpu", **kwargs)


def reference_data(backend: simcore.SimBackend, world: int) -> mujoco.MjData:
    """CPU MuJoCo data holding ``world``'s state and per-world model fields, after a full forward pass."""
    model = copy.deepcopy(backend.mj_model)
    for name, field in backend.model_fields.items():
        getattr(model, name)[...] = field[world].double().cpu().numpy()
    data = mujoco.MjData(model)
    mujoco.mj_setConst(model, data)
    data.qpos[:] = backend.qpos[world].double().cpu().numpy()
    data.qvel[:] = backend.qvel[world].double().cpu().numpy()
    data.act[:] = backend.act[world].double().cpu().numpy()
    data.mocap_pos[:] = backend.mocap_pos[world].double().cpu().numpy()
    data.mocap_quat[:] = backend.mocap_quat[world].double().cpu().numpy()
    mujoco.mj_forward(model, data)
    return data


def load_xml(tmp_path, xml: str, **kwargs) -> mujoco.MjModel:
    """``simcore.load_model(path, **kwargs)`` of ``xml`` written to ``tmp_path / "scene.xml"``."""
    path = tmp_path / "scene.xml"
    path.write_text(xml)
    return simcore.load_model(path, **kwargs)


def rest(name: str, model: mujoco.MjModel, steps: int) -> tuple[torch.Tensor, int]:
    """Two worlds of backend ``name`` (on the CPU) after ``steps`` steps from the model's pose: their qpos
    (float64) and the contact count."""
    backend = simcore.make_backend(name, model, cpu_config(2))
    for _ in range(steps):
        backend.step()
    return backend.qpos.double().clone(), backend.diagnostics().contacts
