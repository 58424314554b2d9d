"""ONNX export of the trained actor with its observation normalizer inside the graph.

The exported model maps raw policy observations ``obs`` (batch, obs_dim) float32 to deterministic actions
``actions`` (batch, num_actions) in [-1, 1]. Its ``metadata_props`` carry what a deployment needs to turn
actions into joint targets and to build the observation: joint names (the action's column order), the
per-joint mapping ``target = clamp(action_offset + action_scale * action, target_lower, target_upper)``
(``action_mode`` names how each action term chose its scale), default joint positions, PD gains, control step
and the policy observation's term names (JSON-encoded lists and numbers; an unbounded side is "inf").
When onnxruntime is installed, the exported model is checked against the torch module on random inputs.
"""

from __future__ import annotations

import copy
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainrt.config.run_config import load_resolved_config
from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_write
from trainrt.runner.build import build_agent
from trainrt.runner.checkpoint import POLICY_CHECKPOINT_KEYS, load_run_checkpoint, load_run_weights

ONNX_FILE_NAME = "policy.onnx"
ONNX_INPUT_NAME = "obs"
ONNX_OUTPUT_NAME = "actions"
ONNX_OPSET = 17
_CHECK_BATCH = 8
_CHECK_TOLERANCE = 1e-4


@cold_path
def export_metadata(
    env_meta: dict[str, Any], *, obs_group: str, algo: str, task: str, iteration: int
) -> dict[str, Any]:
    """The metadata props of the exported policy, from a checkpoint's ``env_meta``."""
    action = env_meta.get("action_meta", {})
    metadata = {
        "algo": algo,
        "task": task,
        "iteration": iteration,
        "obs_group": obs_group,
        "obs_dim": env_meta["obs_dims"][obs_group],
        "num_actions": env_meta["num_actions"],
        "observation_names": env_meta.get("observation_terms", {}).get(obs_group, []),
        "step_dt": env_meta.get("step_dt"),
    }
    for key in ("joint_names", "default_joint_pos", "kp", "kd", "effort_limit", "action_scale"):
        if key in action:
            metadata[key] = action[key]
    # The action -> joint target mapping, concatenated over the action terms in action-column order:
    # target = clamp(action_offset + action_scale * action, target_lower, target_upper).
    terms = action.get("terms", {})
    for key in ("action_offset", "target_lower", "target_upper"):
        if terms and all(key in term for term in terms.values()):
            metadata[key] = [v for term in terms.values() for v in term[key]]
    if terms and all("action_mode" in term for term in terms.values()):
        metadata["action_mode"] = {name: term["action_mode"] for name, term in terms.items()}
    return metadata


@cold_path
def export_policy_onnx(
    policy: nn.Module, obs_dim: int, path: str | os.PathLike, *, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Export ``policy`` (obs (B, obs_dim) -> actions (B, A)) to ONNX at ``path``; check it with onnxruntime.

    Returns:
        ``{"path", "onnxruntime_checked", "max_abs_diff"}``; the check is skipped (``False``, ``None``) when
        onnxruntime is not installed. A mismatch above 1e-4 raises ``RuntimeError``.
    """
    import onnx

    policy = copy.deepcopy(policy).to("cpu").float().eval()
    example = torch.zeros(1, obs_dim)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript-based exporter is deprecated in favour of the dynamo one, which needs onnxscript.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            policy,
            (example,),
            buffer,
            dynamo=False,
            input_names=[ONNX_INPUT_NAME],
            output_names=[ONNX_OUTPUT_NAME],
            dynamic_axes={ONNX_INPUT_NAME: {0: "batch"}, ONNX_OUTPUT_NAME: {0: "batch"}},
            opset_version=ONNX_OPSET,
        )
    model = onnx.load_from_string(buffer.getvalue())
    with torch.no_grad():
        num_actions = int(policy(example).shape[-1])
    # The exporter names the action width symbolically (from the graph's last op); deploy tools want (batch, A).
    for value_info, width in ((model.graph.input[0], obs_dim), (model.graph.output[0], num_actions)):
        dims = value_info.type.tensor_type.shape.dim
        dims[0].dim_param = "batch"
        dims[1].Clear()
        dims[1].dim_value = width
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = value if isinstance(value, str) else json.dumps(value)
    onnx.checker.check_model(model)
    target = Path(path)
    data = model.SerializeToString()
    # Checked before it is written: a policy that fails the check (or a check a signal stops) leaves no file.
    checked, max_diff = _check_with_onnxruntime(policy, data, obs_dim, target)
    atomic_write(target, lambda handle: handle.write(data))
    return {"path": str(target), "onnxruntime_checked": checked, "max_abs_diff": max_diff}


@cold_path
def _check_with_onnxruntime(
    policy: nn.Module, data: bytes, obs_dim: int, path: Path
) -> tuple[bool, float | None]:
    """Compare onnxruntime's output for the serialized model ``data`` (to be written at ``path``) with torch's on
    random observations (skipped without onnxruntime)."""
    try:
        import onnxruntime
    except ImportError:
        return False, None
    generator = torch.Generator().manual_seed(0)
    obs = torch.randn(_CHECK_BATCH, obs_dim, generator=generator) * 2.0
    with torch.no_grad():
        expected = policy(obs).numpy()
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    actual = session.run([ONNX_OUTPUT_NAME], {ONNX_INPUT_NAME: obs.numpy()})[0]
    max_diff = float(abs(actual - expected).max())
    if not max_diff <= _CHECK_TOLERANCE:
        raise RuntimeError(
            f"ONNX export for {path} differs from torch by {max_diff:.3g} (> {_CHECK_TOLERANCE}); not written"
        )
    return True, max_diff


@cold_path
def policy_obs_group(agent: Any) -> str:
    """The observation group the agent's actor reads (``cfg.actor_obs_group``, else ``"policy"``)."""
    return getattr(getattr(agent, "cfg", None), "actor_obs_group", "policy")


@cold_path
def export_run(
    run_dir: str | os.PathLike,
    *,
    output: str | os.PathLike | None = None,
    checkpoint: str | os.PathLike | None = None,
    motion_file: str | None = None,
) -> dict[str, Any]:
    """Export the actor of a run's last checkpoint to ``<run_dir>/policy.onnx``, or of the given ``checkpoint`` to
    ``<run_dir>/policy_<iteration>.onnx`` (or to ``output``); ``motion_file``: the run's clip at another place."""
    cfg = load_resolved_config(run_dir, motion_file=motion_file)
    state = load_run_checkpoint(run_dir, checkpoint, map_location="cpu", require=POLICY_CHECKPOINT_KEYS)
    env_meta = state["env_meta"]
    agent = build_agent(cfg, env_meta["obs_dims"], env_meta["num_actions"], "cpu", learns=False)
    load_run_weights(state, agent, cfg, action="cannot export")
    group = policy_obs_group(agent)
    metadata = export_metadata(
        env_meta, obs_group=group, algo=cfg.algo.name, task=cfg.task.name, iteration=state["iteration"]
    )
    # An older checkpoint's policy goes beside the run's policy.onnx, which stays the last checkpoint's (the
    # one run_summary.json names).
    default_name = ONNX_FILE_NAME if checkpoint is None else f"policy_{state['iteration']}.onnx"
    target = Path(output) if output is not None else Path(run_dir) / default_name
    result = export_policy_onnx(
        agent.actor_for_export(), env_meta["obs_dims"][group], target, metadata=metadata
    )
    return {"checkpoint": state["path"], "iteration": state["iteration"], **result}


@cold_path
def export_trained_policy(
    agent: Any, env_meta: dict[str, Any], run_dir: Path, *, algo: str, task: str, iteration: int
) -> dict[str, Any]:
    """Export a training run's actor to ``<run_dir>/policy.onnx`` at the end of the run (``export_policy_onnx``)."""
    group = policy_obs_group(agent)
    metadata = export_metadata(env_meta, obs_group=group, algo=algo, task=task, iteration=iteration)
    return export_policy_onnx(
        agent.actor_for_export(), env_meta["obs_dims"][group], run_dir / ONNX_FILE_NAME, metadata=metadata
    )
