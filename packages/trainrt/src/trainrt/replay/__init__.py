"""Device-resident replay storage for off-policy learners."""

from trainrt.replay.buffer import Batch, DeviceReplayBuffer

__all__ = ["Batch", "DeviceReplayBuffer"]
