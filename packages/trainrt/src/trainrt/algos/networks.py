"""Policy math shared by `sac` and `flashsac`: the bounded log-std and the tanh-squashed Gaussian."""

import math

import torch
import torch.nn.functional as F

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_LOG_TWO = math.log(2.0)


def bounded_log_std(raw: torch.Tensor, log_std_min: float, log_std_max: float) -> torch.Tensor:
    """Map an unbounded head output smoothly into [log_std_min, log_std_max] (same shape)."""
    return log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(raw) + 1.0)


def tanh_gaussian_sample(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-density.

    Args:
        mean: pre-squash mean (B, A).
        log_std: pre-squash log standard deviation (B, A).
        noise: standard normal draw (B, A).

    Returns:
        action in (-1, 1) (B, A) and log pi(action) (B,), including the tanh change of variables.
    """
    pre_tanh = mean + log_std.exp() * noise
    gaussian_log_prob = -0.5 * noise.square() - log_std - _HALF_LOG_TWO_PI
    # log(1 - tanh(u)^2) written without tanh so it stays finite for large |u|.
    log_det_jacobian = 2.0 * (_LOG_TWO - pre_tanh - F.softplus(-2.0 * pre_tanh))
    log_prob = (gaussian_log_prob - log_det_jacobian).sum(-1)
    return torch.tanh(pre_tanh), log_prob
