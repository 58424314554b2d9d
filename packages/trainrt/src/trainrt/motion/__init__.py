"""Reference motions for tracking tasks: loading holosoma and BeyondMimic clips onto the training model."""

from trainrt.motion.checks import GroundWarning, IgnoredJointsWarning, JointLimitWarning, ShortClipWarning
from trainrt.motion.files import read_motion_arrays
from trainrt.motion.loader import (
    BEYONDMIMIC_FIELDS,
    HOLOSOMA_FIELDS,
    MOTION_FORMATS,
    MotionClip,
    detect_motion_format,
    holosoma_to_beyondmimic,
    load_motion,
)

__all__ = [
    "BEYONDMIMIC_FIELDS",
    "HOLOSOMA_FIELDS",
    "MOTION_FORMATS",
    "GroundWarning",
    "IgnoredJointsWarning",
    "JointLimitWarning",
    "MotionClip",
    "ShortClipWarning",
    "detect_motion_format",
    "holosoma_to_beyondmimic",
    "load_motion",
    "read_motion_arrays",
]
