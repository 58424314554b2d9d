"""The exported ONNX policy as the actor of ``trainrt eval --onnx``: onnxruntime on the CPU.

``OnnxPolicy`` is the one place trainrt runs an exported ``policy.onnx`` (``runner/export.py`` writes it: input
``obs`` (batch, obs_dim) float32, output ``actions`` (batch, num_actions), the deterministic tanh(mean)). NumPy
appears here only at onnxruntime's boundary: each step copies the policy observation to the host and the
actions back, a synchronization the evaluation accepts (its ONNX rollout runs eagerly, never as a CUDA graph;
nothing of training calls it).

Before a rollout, ``check_matches`` compares the file with the env the run's config builds: the input and output
widths, and what the metadata records (task, observation group and term names, the action mapping).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.checkpoint import check_action_mapping

ONNXRUNTIME_FIX = "pip install onnxruntime"


class OnnxPolicy:
    """An onnxruntime session of an exported policy, acting like an agent's ``act(obs, deterministic=True)``.

    Attributes:
        path: the ONNX file.
        obs_dim, num_actions: the graph's input and output widths (None where the graph leaves them symbolic).
        metadata: the model's ``metadata_props``, JSON values decoded.
        obs_group: the observation group it reads (the metadata's ``obs_group``, else ``"policy"``, until
            ``check_matches`` sets the run's).
        iteration: the training iteration it was exported at (metadata), or None.
    """

    @cold_path
    def __init__(self, path: str | os.PathLike, *, export_fix: str) -> None:
        """Load ``path``; ``ValueError``/``FileNotFoundError`` with the fix (``export_fix``: how to write it)."""
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no ONNX policy at {self.path}: write it with `{export_fix}`")
        try:
            import onnxruntime
        except ImportError:
            raise ValueError(
                f"evaluating {self.path} needs onnxruntime, which is not installed: {ONNXRUNTIME_FIX}"
            ) from None
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()  # torch's share of the cores (the CLI's: one)
        options.log_severity_level = 4  # fatal only: its errors come back as the one line below names them
        try:
            self.session = onnxruntime.InferenceSession(
                str(self.path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as err:  # onnxruntime raises its own types for unreadable or invalid models
            raise ValueError(
                f"{self.path} is not a model onnxruntime can run ({type(err).__name__}: {_one_line(err)}); "
                f"write it again with `{export_fix}`"
            ) from None
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1 or len(outputs) < 1:
            raise ValueError(
                f"{self.path} has {len(inputs)} inputs and {len(outputs)} outputs, a policy has one input "
                f"(obs) and one output (actions); write it with `{export_fix}`"
            )
        self.input_name, self.output_name = inputs[0].name, outputs[0].name
        self.obs_dim, self.num_actions = _width(inputs[0].shape), _width(outputs[0].shape)
        self.metadata = {
            key: _decode(value) for key, value in self.session.get_modelmeta().custom_metadata_map.items()
        }
        self.obs_group = str(self.metadata.get("obs_group", "policy"))  # check_matches sets the run's
        iteration = self.metadata.get("iteration")
        self.iteration = iteration if isinstance(iteration, int) else None
        self.device = torch.device("cpu")

    @cold_path
    def check_matches(self, env: Any, *, task: str, obs_group: str, fix: str) -> None:
        """``ValueError`` naming both sides and ``fix`` unless the policy fits ``env``, the run's env of ``task``
        whose actor reads ``obs_group``: the same group, input and output widths and, where the metadata
        records them, the task, observation term names and action mapping."""
        self.device = torch.device(env.device)
        where = f"ONNX policy {self.path} does not fit this run"
        obs_dim = env.obs_dims.get(obs_group)
        compared = [  # (what, the file's, the run's); a side the file does not record is taken as the run's
            ("task", self.metadata.get("task", task), task),
            ("observation group", self.metadata.get("obs_group", obs_group), obs_group),
            ("input width (policy observation)", self.obs_dim or obs_dim, obs_dim),
            ("output width (actions)", self.num_actions or env.num_actions, env.num_actions),
        ]
        names = self.metadata.get("observation_names")
        if names and obs_group in env.cfg.observations:  # an export without term names records []
            compared.append(
                ("observation term list", list(names), list(env.cfg.observations[obs_group].terms))
            )
        for what, theirs, ours in compared:
            if theirs != ours:
                raise ValueError(f"{where}: its {what} is {theirs}, the run's is {ours}; {fix}")
        action_meta = {k: self.metadata[k] for k in ("joint_names", "action_scale") if k in self.metadata}
        check_action_mapping(
            {"path": str(self.path), "env_meta": {"action_meta": action_meta}}, env, "ONNX policy"
        )
        try:  # a graph that leaves its widths symbolic must still take the run's
            probe = self._run(torch.zeros(1, obs_dim))
        except Exception as err:  # onnxruntime's own error types
            raise ValueError(f"{where}: {_one_line(err)}; {fix}") from None
        if tuple(probe.shape) != (1, env.num_actions):
            raise ValueError(
                f"{where}: it maps an observation of width {obs_dim} to actions of shape "
                f"{tuple(probe.shape)}, the run has {env.num_actions} actions; {fix}"
            )
        self.obs_group = obs_group

    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = True) -> torch.Tensor:
        """The deterministic actions (N, A) for observation groups {name: (N, D)}, on the env's device."""
        if not deterministic:
            raise ValueError("an exported ONNX policy acts deterministically only")
        return self._run(obs[self.obs_group])

    def _run(self, obs: torch.Tensor) -> torch.Tensor:
        """onnxruntime's output for ``obs`` (N, D) as float32 on ``self.device``: the NumPy boundary."""
        host = obs.detach().to("cpu", torch.float32).contiguous().numpy()
        actions = self.session.run([self.output_name], {self.input_name: host})[0]
        return torch.from_numpy(actions).to(self.device, torch.float32)


def _width(shape: list[Any]) -> int | None:
    """The last dimension of an onnxruntime shape when it is a number, else None (symbolic)."""
    return shape[-1] if len(shape) == 2 and isinstance(shape[-1], int) else None


def _one_line(err: Exception) -> str:
    """An error's text on one line (onnxruntime's messages can span several)."""
    return " ".join(str(err).split())


def _decode(value: str) -> Any:
    """A metadata value: JSON where it parses (lists, numbers), else the string (``runner/export.py``)."""
    try:
        return json.loads(value)
    except ValueError:
        return value
