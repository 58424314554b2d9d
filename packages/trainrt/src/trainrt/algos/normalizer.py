"""Observation normalization with running statistics kept on the device."""

import torch
from torch import nn

from trainrt.running_stats import merge_moments_


class RunningObsNormalizer(nn.Module):
    """Running mean/variance of an observation vector; `forward` maps (N, D) -> (N, D) standardized.

    `update` merges a batch into the statistics (Chan et al. parallel variance) with tensor ops only,
    so it runs inside a CUDA graph. `forward` never updates, which keeps it pure for acting and for
    ONNX export. A disabled normalizer is the identity and `update` does nothing.

    Attributes:
        mean: running mean (D,).
        var: running population variance (D,).
        count: number of rows merged so far, float64 scalar.
    """

    def __init__(self, dim: int, *, enabled: bool = True, eps: float = 1e-2):
        super().__init__()
        self.dim = dim
        self.enabled = enabled
        # Added to the std (not the variance): a dimension that never varied maps to ~0 instead of
        # exploding when it first moves.
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge a batch (B, D) into the running statistics; sync-free."""
        if not self.enabled:
            return
        x = x.float()
        batch_count = x.shape[0]
        batch_var, batch_mean = torch.var_mean(x, dim=0, correction=0)
        total = self.count + batch_count
        ratio = (batch_count / total).float()
        merge_moments_(self.mean, self.var, batch_mean, batch_var, ratio)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Standardize observations (N, D) with the current statistics (identity when disabled)."""
        if not self.enabled:
            return x
        return (x - self.mean) / (self.var.sqrt() + self.eps)

    def extra_repr(self) -> str:
        """Summary line for `print(module)`."""
        return f"dim={self.dim}, enabled={self.enabled}, eps={self.eps}"
