"""docs/tasks.md matches the task configs, links between the docs resolve, performance.md shows the newest page."""

from __future__ import annotations

import re

import pytest

from trainrt import mdp
from trainrt.managers import REQUIRED
from trainrt.tasks.docs import (
    DOCS_FILE,
    REGENERATE_COMMAND,
    effective_params,
    format_value,
    main,
    render_tasks_doc,
)


@pytest.fixture(scope="module")
def rendered() -> str:
    return render_tasks_doc()


def test_the_committed_task_reference_is_current(rendered):
    assert DOCS_FILE.is_file(), f"{DOCS_FILE} is missing; run `{REGENERATE_COMMAND}`"
    assert DOCS_FILE.read_text() == rendered, f"docs/tasks.md is stale; run `{REGENERATE_COMMAND}`"


def test_the_reference_lists_every_term_of_every_task(rendered):
    from trainrt.tasks import TASKS, make_task_cfg

    for name in TASKS:
        cfg = make_task_cfg(name)
        section = rendered.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        terms = [*cfg.actions, *cfg.commands, *cfg.rewards, *cfg.terminations, *cfg.events, *cfg.metrics]
        terms += [t for group in cfg.observations.values() for t in group.terms]
        missing = [t for t in terms if f"| `{t}` |" not in section]
        assert missing == [], f"{name}: terms missing from the reference: {missing}"
        for group in cfg.observations:
            assert f"Group `{group}`:" in section


def test_effective_params_fill_declared_defaults_in_order():
    params = effective_params(mdp.FeetSlipL2, {"body_names": ("a",), "contact_body_names": ("b",)})
    assert list(params) == ["contact_body_names", "force_threshold", "body_names"]
    assert params["force_threshold"] == 1.0
    assert effective_params(mdp.track_lin_vel_xy_exp, {"std": 0.5}) == {"command_name": REQUIRED, "std": 0.5}


def test_values_render_compactly_and_stably():
    assert format_value(0.7590215776517654) == "0.759022"
    assert format_value(("x",)) == "('x',)"
    assert format_value({"x": (-0.5, 0.5)}) == "{'x': (-0.5, 0.5)}"
    assert format_value(mdp.alive) == "mdp.rewards.alive"
    assert format_value(REQUIRED) == "REQUIRED"


def test_check_mode_reports_a_stale_file(tmp_path, capsys, rendered):
    stale = tmp_path / "tasks.md"
    stale.write_text("# old\n")
    assert main(["--check", "--out", str(stale)]) == 1
    assert REGENERATE_COMMAND in capsys.readouterr().err
    stale.write_text(rendered)
    assert main(["--check", "--out", str(stale)]) == 0


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading (lower case, punctuation dropped, spaces to dashes)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_docs_resolve():
    docs = DOCS_FILE.parent
    pages = [*docs.glob("*.md"), docs.parent / "README.md"]
    anchors = {p.resolve(): {_slug(h) for h in re.findall(r"^#+ (.*)$", p.read_text(), re.M)} for p in pages}
    broken = []
    for page in pages:
        for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if link.startswith(("http://", "https://")):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page.resolve()
            if not target.exists():
                broken.append(f"{page.name}: {link} (no such file)")
            elif anchor and target in anchors and anchor not in anchors[target]:
                broken.append(f"{page.name}: {link} (no such heading)")
    assert broken == []


def test_the_performance_page_cites_the_newest_measurement():
    perf = DOCS_FILE.parent / "perf"
    pages = sorted(p.name for p in perf.glob("[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]-*.md"))
    assert pages, "docs/perf/ holds no dated measurement page"
    text = (DOCS_FILE.parent / "performance.md").read_text()
    assert f"perf/{pages[-1]}" in text, (
        f"docs/performance.md must show the latest results, from docs/perf/{pages[-1]}"
    )
