"""A plain-data description of an ``EnvCfg`` that two versions of a task factory can be compared by.

Term functions and classes become ``module:qualname``; term params become their effective values (the
config's params over the term's declared defaults, so spelling a default out changes nothing); the scene's
model factory becomes a summary of the model it builds (sizes, collision masks, servo gains, options).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import mujoco

from trainrt.managers import term_param_defaults

_LEADING_ARGS = {"events": 2, "curriculum": 2}  # (env, env_mask); every other kind takes (env)


def _callable_name(value: Any) -> str:
    return f"{value.__module__}:{value.__qualname__}"


def model_summary(model: mujoco.MjModel) -> dict[str, Any]:
    """The facts of a compiled model a task's behaviour depends on, as plain lists."""
    return {
        "sizes": [model.nq, model.nv, model.nu, model.nbody, model.ngeom, model.nsensor],
        "geom_contype": model.geom_contype.tolist(),
        "geom_conaffinity": model.geom_conaffinity.tolist(),
        "geom_friction": model.geom_friction.tolist(),
        "actuator_gainprm0": model.actuator_gainprm[:, 0].tolist(),
        "actuator_biasprm": model.actuator_biasprm[:, :3].tolist(),
        "actuator_forcerange": model.actuator_forcerange.tolist(),
        "dof_armature": model.dof_armature.tolist(),
        "body_mass": model.body_mass.tolist(),
        "opt": [model.opt.timestep, model.opt.iterations, model.opt.ls_iterations, int(model.opt.integrator)],
    }


def _effective(term: Any, kind: str) -> dict[str, Any]:
    if hasattr(term, "func"):
        declared = term_param_defaults(term.func, _LEADING_ARGS.get(kind, 1))
    else:
        declared = dict(getattr(term.cls, "PARAMS", {}))
    return {**declared, **term.params}


def describe(value: Any, kind: str = "") -> Any:
    """``value`` (an ``EnvCfg`` or any part of it) as JSON-ready data; ``kind`` is the manager section."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"__type__": type(value).__qualname__}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "model_factory":
                out[f.name] = model_summary(item())
            elif f.name == "params" and (hasattr(value, "func") or hasattr(value, "cls")):
                out[f.name] = describe(_effective(value, kind), kind)
            else:
                out[f.name] = describe(item, kind or f.name)
        return out
    if isinstance(value, dict):
        return {"__order__": [str(k) for k in value]} | {str(k): describe(v, kind) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe(v, kind) for v in value]
    if isinstance(value, enum.Enum):
        return str(value)
    if callable(value):
        return _callable_name(value)
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    return repr(value)
