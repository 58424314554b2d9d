"""``trainrt checkpoint convert``: rewrite a checkpoint that holds numpy values as tensors and Python values.

trainrt loads checkpoints with torch's weights-only unpickler (``trainrt.runner.checkpoint``), which refuses
any Python object beyond tensors and plain containers, because unpickling one could run code. A checkpoint
an earlier version wrote may hold numpy arrays and scalars; the converter reads those with the same
unpickler, allowing on top of it only numpy's reconstruction of arrays, scalars and dtypes
(``numpy_reconstruction_globals``), so it cannot run code either: a file that names anything else (a
``__reduce__`` calling ``os.system``, a class of some other package) is refused unread. Numeric arrays
become tensors, numpy scalars Python numbers, string arrays lists of strings; object and structured arrays
are refused. The original file is kept.
"""

from __future__ import annotations

import os
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_torch_save
from trainrt.runner.checkpoint import (
    CheckpointError,
    check_checkpoint_format,
    checkpoint_entry_problem,
    read_checkpoint_file,
    unsafe_globals,
)

ORIGINAL_SUFFIX = ".unsafe"
"""The converted file keeps the original beside it as ``<name>.unsafe`` (trainrt refuses to load it)."""

_PLAIN_TYPES = (
    torch.Tensor,
    torch.Size,
    torch.device,
    torch.dtype,
    str,
    bytes,
    bytearray,
    int,
    float,
    complex,
)
_NUMERIC_KINDS = "biufc"  # bool, signed and unsigned integers, floats, complex: what a tensor holds
_TEXT_KINDS = "US"  # str_ and bytes_ arrays: lists of str and bytes


@cold_path
def numpy_reconstruction_globals() -> list[Any]:
    """What a numpy array, scalar or dtype unpickles through, under the names numpy 1 and numpy 2 pickle them
    (``torch.serialization.safe_globals`` entries): numpy's ``_reconstruct`` and ``scalar`` functions,
    ``ndarray``, ``dtype`` and the dtype classes (a dtype's state is set on its class)."""
    multiarray = (np._core if hasattr(np, "_core") else np.core).multiarray  # numpy 2, numpy 1
    named = [
        (function, f"{module}.multiarray.{function.__name__}")
        for function in (multiarray._reconstruct, multiarray.scalar)
        for module in ("numpy.core", "numpy._core")
    ]
    dtype_classes = {type(np.dtype(kind)) for kind in set(np.sctypeDict.values())}
    return [*named, (np.ndarray, "numpy.ndarray"), (np.dtype, "numpy.dtype"), *dtype_classes]


@cold_path
def load_with_numpy_values(path: Path) -> Any:
    """The payload of checkpoint ``path``, unpickled weights-only with numpy's reconstruction also allowed;
    ``CheckpointError`` naming the file and the other Python objects it holds, which it never builds."""
    allowed = numpy_reconstruction_globals()
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a refused object (UnpicklingError), or a damaged archive
        with torch.serialization.safe_globals(allowed):
            others = unsafe_globals(path)
        if others:
            raise CheckpointError(
                f"checkpoint {path} holds Python objects beyond numpy values ({', '.join(others[:3])}), "
                "which could run code when loaded: trainrt neither loads nor converts it; save the "
                "checkpoint again with the code that wrote it, as tensors and plain Python values"
            ) from None
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {first}); it is damaged or was not "
            "written by trainrt"
        ) from None


@cold_path
def plain_values(value: Any, where: str = "") -> tuple[Any, int]:
    """``value`` with every numpy array as a tensor (string arrays as lists) and every numpy scalar as a
    Python value, and how many it replaced; ``CheckpointError`` naming the key (``where``) of anything else
    that is not a tensor, a plain value or a container of them."""
    if isinstance(value, np.ndarray | np.generic):  # first: np.float64 and np.str_ are also float and str
        return _numpy_as_plain(value, where), 1
    if value is None or isinstance(value, _PLAIN_TYPES):
        return value, 0
    if isinstance(value, dict):
        keys = [plain_values(key, f"{where}[key {key!r}]") for key in value]
        items = [plain_values(item, f"{where}.{key}" if where else str(key)) for key, item in value.items()]
        kind = OrderedDict if isinstance(value, OrderedDict) else dict
        converted = kind((key, item) for (key, _), (item, _) in zip(keys, items))
        return converted, sum(n for _, n in keys) + sum(n for _, n in items)
    if isinstance(value, list | tuple | set | frozenset):
        items = [plain_values(item, f"{where}[{i}]") for i, item in enumerate(value)]
        return type(value)(item for item, _ in items), sum(n for _, n in items)
    raise CheckpointError(
        f"{where or 'the payload'} holds a {type(value).__module__}.{type(value).__name__}, not data"
    )


@cold_path
def _numpy_as_plain(value: np.ndarray | np.generic, where: str) -> Any:
    """A numeric numpy array as a tensor, a string array as a list, a numpy scalar as a Python value."""
    kind = value.dtype.kind
    if kind in _TEXT_KINDS or (kind in _NUMERIC_KINDS and isinstance(value, np.generic)):
        return value.tolist() if isinstance(value, np.ndarray) else value.item()
    if kind in _NUMERIC_KINDS:
        # torch takes native byte order only; a copy also owns its memory
        return torch.from_numpy(np.array(value, dtype=value.dtype.newbyteorder("="), order="C"))
    raise CheckpointError(
        f"{where} holds a numpy value of dtype {value.dtype} (object, structured or date), which has no "
        "tensor or plain Python form"
    )


@cold_path
def convert_checkpoint_file(
    path: str | os.PathLike, output: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Rewrite checkpoint ``path``'s numpy values as tensors and Python values, without running code.

    Writes to ``output`` when given (which must not exist), else over ``path`` after keeping the original as
    ``<path>.unsafe`` (which must not exist). A checkpoint that already loads is left alone.

    Returns:
        ``checkpoint`` (the converted file), ``original`` (the file as it was; ``None`` when nothing was
        converted) and ``converted`` (how many numpy values were replaced).
    """
    path = Path(path)
    problem = checkpoint_entry_problem(path)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} {problem}")
    if not unsafe_globals(path):
        read_checkpoint_file(path)  # names a damaged or foreign file
        return {"checkpoint": str(path), "original": None, "converted": 0}
    payload = load_with_numpy_values(path)
    check_checkpoint_format(path, payload)
    try:
        converted, count = plain_values(payload)
    except CheckpointError as err:
        raise CheckpointError(f"checkpoint {path} cannot be converted: {err}") from None
    target, original = _targets(path, output)
    if original != path:
        _keep_original(path, original)
    atomic_torch_save(converted, target)
    read_checkpoint_file(target)  # what trainrt will do with it: load it weights-only
    return {"checkpoint": str(target), "original": str(original), "converted": count}


@cold_path
def _targets(path: Path, output: str | os.PathLike | None) -> tuple[Path, Path]:
    """Where the converted checkpoint goes and where the original stays; ``CheckpointError`` rather than
    replace a file that exists."""
    target = Path(output) if output is not None else path
    original = path if output is not None else path.with_name(path.name + ORIGINAL_SUFFIX)
    taken = target if output is not None else original
    if taken.exists() or taken.is_symlink():
        raise CheckpointError(
            f"{taken} exists; converting {path} will not replace it: move it away or give --output NEW_PATH"
        )
    return target, original


@cold_path
def _keep_original(path: Path, original: Path) -> None:
    """Keep ``path`` also as ``original`` (a hard link, or a copy where the filesystem has none)."""
    try:
        os.link(path, original)
    except OSError:
        shutil.copy2(path, original)
