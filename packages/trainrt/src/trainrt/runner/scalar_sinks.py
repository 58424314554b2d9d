"""Where a run's scalars go: TensorBoard (``training.tensorboard``) and, optionally, Weights & Biases
(``training.wandb.enabled``; ``pip install 'trainrt[wandb]'``).

Every sink receives the same scalars at the same steps (the iteration), from ``RunLog``. Rank 0 alone opens
them. ``check_scalar_sinks`` runs before the run writes anything, so a missing ``wandb`` package is a usage
error at start-up rather than a failure after warm-up.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path

TENSORBOARD_DIR_NAME = "tensorboard"
WANDB_INSTALL_HINT = (
    "pip install 'trainrt[wandb]' (in this repository: uv sync --extra wandb), "
    "or set training.wandb.enabled=false"
)


class TensorBoardSink:
    """Scalars as TensorBoard events under ``<run_dir>/tensorboard`` (``writer`` is the ``SummaryWriter``)."""

    def __init__(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / TENSORBOARD_DIR_NAME))

    def add_scalars(self, scalars: Mapping[str, float], step: int) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)

    def close(self, failed: bool = False) -> None:
        self.writer.close()


class WandbSink:
    """Scalars as one Weights & Biases run: ``wandb.init`` with the run's config, then ``log(scalars, step)``.

    The W&B run id is the run's own id, so a resumed run continues its W&B run (``resume="allow"``). W&B
    keeps its files where it does by default (``WANDB_DIR``, else ``./wandb``): a folder of its own in the
    run directory would be one that ``training.overwrite`` must refuse to delete (trainrt did not write it).
    """

    def __init__(self, cfg: TrainConfig, run_dir: Path, run_id: str) -> None:
        wandb = import_wandb()
        section = cfg.training.wandb
        self.run = wandb.init(
            project=section.project,
            entity=section.entity,
            name=section.run_name or run_dir.name,
            group=section.group,
            tags=list(section.tags),
            mode=section.mode,
            id=run_id,
            resume="allow",
            config=cfg.model_dump(mode="json"),
        )

    def add_scalars(self, scalars: Mapping[str, float], step: int) -> None:
        self.run.log(dict(scalars), step=step)

    def close(self, failed: bool = False) -> None:
        """End the W&B run; one that failed or was stopped ends with exit code 1, so W&B does not show it as
        finished."""
        self.run.finish(exit_code=1 if failed else 0)


@cold_path
def import_wandb() -> Any:
    """The ``wandb`` module, or a ``ValueError`` that says how to install it."""
    try:
        return importlib.import_module("wandb")
    except ImportError as err:
        raise ValueError(
            f"training.wandb.enabled=true needs the wandb package ({err}): {WANDB_INSTALL_HINT}"
        ) from None


@cold_path
def check_scalar_sinks(cfg: TrainConfig) -> None:
    """Fail now, before anything is written, when an enabled sink's package is missing."""
    if cfg.training.wandb.enabled:
        import_wandb()


@cold_path
def open_scalar_sinks(cfg: TrainConfig, run_dir: Path, run_id: str) -> list[Any]:
    """The enabled sinks of a run (rank 0 calls this; the others log nothing)."""
    sinks: list[Any] = []
    if cfg.training.tensorboard:
        sinks.append(TensorBoardSink(run_dir))
    if cfg.training.wandb.enabled:
        sinks.append(WandbSink(cfg, run_dir, run_id))
    return sinks
