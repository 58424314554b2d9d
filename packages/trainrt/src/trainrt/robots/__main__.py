"""Command line: ``python -m trainrt.robots fetch [ROBOT...]`` or ``python -m trainrt.robots path ROBOT``."""

from __future__ import annotations

import sys

from trainrt.robots import ROBOTS, fetch_assets, get_robot


def main(argv: list[str] | None = None) -> int:
    """Fetch robots' assets (default: every robot) or print one robot's MJCF path."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command, names = (argv[0], argv[1:]) if argv else ("fetch", [])
    try:
        if command == "fetch":
            robots = [get_robot(n) for n in names] or list(ROBOTS.values())
            roots = fetch_assets(robots)
            for robot in dict.fromkeys(robots):
                clips = len(robot.motion_files()) if robot.motions else 0
                print(f"{robot.name} assets ready in {roots[robot.name]} ({clips} motion clips)")
            return 0
        if command == "path" and len(names) == 1:
            print(get_robot(names[0]).mjcf_path())
            return 0
    except (ValueError, FileNotFoundError) as err:
        print(err, file=sys.stderr)
        return 2
    print(f"usage: fetch [ROBOT...] | path ROBOT (robots: {', '.join(ROBOTS)}); got {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
