"""Running statistics merged on the device: one owner for the parallel-variance update."""

import torch


def merge_moments_(
    mean: torch.Tensor,
    var: torch.Tensor,
    batch_mean: torch.Tensor,
    batch_var: torch.Tensor,
    ratio: torch.Tensor,
) -> None:
    """Merge a batch's mean/variance into running ``mean``/``var`` in place (parallel-variance formula).

    ``ratio`` is the batch's share of the merged count, ``batch_count / (count + batch_count)``; sync-free.
    """
    delta = batch_mean - mean
    mean.add_(delta * ratio)
    var.copy_((1.0 - ratio) * var + ratio * batch_var + delta.square() * ratio * (1.0 - ratio))
