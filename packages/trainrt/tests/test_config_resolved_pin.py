"""The resolved configs that runs use, pinned: every ``(algo, task)`` preset as ``trainrt train`` resolves it with
and without CUDA (the canonical preset, the CPU demo on each backend), compared with
``resolved_preset_configs.json``.

Where a setting is written (a learner config class's default, a task preset, the CPU demo) may move; what a run
resolves to may not, unless on purpose: then regenerate the pin with
``TRAINRT_UPDATE_RESOLVED_PIN=1 pytest packages/trainrt/tests/test_config_resolved_pin.py`` and review the diff.
"""

import json
import os
from pathlib import Path

from trainrt.config import PRESETS, cpu_demo_preset, preset
from trainrt.config.resolve import resolve_train_config

PIN = Path(__file__).with_name("resolved_preset_configs.json")


def resolved_configs() -> dict[str, object]:
    """``"<kind>:<algo>/<task>"`` -> the config as JSON data, for every preset pair."""
    configs: dict[str, object] = {}
    for algo, task in sorted(PRESETS):
        pair = f"{algo}/{task}"
        configs[f"preset:{pair}"] = preset(algo, task).model_dump(mode="json")
        for sim in ("mujoco", "mjwarp"):
            configs[f"cpu_demo_preset[{sim}]:{pair}"] = cpu_demo_preset(algo, task, sim).model_dump(
                mode="json"
            )
        for cuda in (True, False):
            cfg, how = resolve_train_config(algo, task, None, [], "auto", cuda_available=cuda)
            configs[f"train[cuda={cuda}]:{pair}"] = {"config": cfg.model_dump(mode="json"), "resolution": how}
    return configs


def test_resolved_preset_configs_match_the_pin():
    configs = json.loads(json.dumps(resolved_configs()))
    if os.environ.get("TRAINRT_UPDATE_RESOLVED_PIN"):
        PIN.write_text(json.dumps(configs, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(PIN.read_text())
    assert sorted(configs) == sorted(pinned)
    for key in pinned:
        assert configs[key] == pinned[key], key
