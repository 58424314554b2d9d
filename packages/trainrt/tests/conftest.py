"""Shared fixtures of the trainrt tests."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Tiny networks run fastest single-threaded; oversubscribed cores make them crawl."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
