"""Seeing the robot: renderers, videos of policies and clips, the interactive viewer, and run reports.

Nothing in training imports this package; its heavy dependencies (the OpenGL context, the video encoder,
matplotlib) load only inside the functions that need them.
"""
