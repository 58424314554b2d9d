"""The parallel-variance merge equals the moments of the concatenated data (float64 reference)."""

import torch

from trainrt.algos.normalizer import RunningObsNormalizer


def test_normalizer_moments_equal_those_of_all_data_seen():
    g = torch.Generator().manual_seed(0)
    chunks = [torch.randn(n, 5, generator=g, dtype=torch.float64) * 3 + 1 for n in (7, 1, 64, 13)]
    normalizer = RunningObsNormalizer(5)
    for chunk in chunks:
        normalizer.update(chunk)
    var, mean = torch.var_mean(torch.cat(chunks), dim=0, correction=0)
    torch.testing.assert_close(normalizer.mean.double(), mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(normalizer.var.double(), var, rtol=1e-5, atol=1e-5)
