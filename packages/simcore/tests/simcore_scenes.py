"""Scenes and configs shared by the simcore tests (imported by name; pytest puts this folder on sys.path)."""

from __future__ import annotations

import copy

import mujoco

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
