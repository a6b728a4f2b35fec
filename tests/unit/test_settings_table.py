"""The settings table of docs/configuration.md is generated from the settings' models
(``hack/settings_table.py``) and kept current: the committed table must be the
generator's output."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, Field

import settings_table
from settings_table import BEGIN, END, SettingsTableError, rows, splice, table


def test_the_pages_table_is_the_generated_one() -> None:
    page = settings_table.PAGE.read_text()
    assert splice(page, table()) == page, "docs/configuration.md's table is stale: run `make generate`"


def _row(setting: str) -> tuple[str, str, str, str]:
    from scheduler.k8s.process.settings import Settings  # noqa: PLC0415

    return next(row for row in rows(Settings) if row[0] == f"`{setting}`")


# (setting, type with bounds, default, the start of its description): one row per shape
# of field (number bounds, a range, an optional path, a nested model's leaf, a pattern).
ROWS = [
    ("scheduler_name", "string, not empty", "`rl-scheduler`", "pods opt in with this schedulerName"),
    ("profile", "string", "`fgd-reserve`", "score profile"),
    ("client.qps", "number, > 0", "`50`", "API requests per second"),
    ("client.workers", "integer, 1-256", "`16`", "threads for listings"),
    ("client.kubeconfig", "path or null", "`null`", "kubeconfig file"),
    ("serving.always_allow_paths", "list of string", "`[/healthz, /readyz, /livez]`", "paths served"),
    ("weights", "map of string to integer", "`{}`", "weights of the profile's score plugins"),
    ("profiles", "list of profile", "`[]`", "more profiles in this process"),
    ("leader_election.enabled", "boolean", "`true`", ""),
    ("leader_election.name", "string", '`""`', "Lease name"),
    ("log_level", "string, one of DEBUG, INFO, WARNING, ERROR", "`INFO`", ""),
]


@pytest.mark.parametrize(("setting", "kind", "default", "description"), ROWS, ids=[r[0] for r in ROWS])
def test_a_row_says_the_type_bounds_default_and_description(
    setting: str, kind: str, default: str, description: str
) -> None:
    _, got_kind, got_default, got_description = _row(setting)
    assert (got_kind, got_default) == (kind, default)
    assert got_description.startswith(description)


def test_every_setting_has_a_row_and_nested_models_are_flattened() -> None:
    from scheduler.k8s.process.settings import Settings  # noqa: PLC0415

    names = [row[0].strip("`") for row in rows(Settings)]
    assert len(names) == len(set(names))
    assert "client.qps" in names
    assert "client" not in names
    assert {name.split(".")[0] for name in names} == set(Settings.model_fields)


class _Cells(BaseModel):
    pipe: str = Field("a|b", description="left | right")
    angle: str = Field("", description="<hostname>_<random> when empty")


def test_cells_that_markdown_would_misread_are_escaped() -> None:
    rendered = [settings_table.cell(text) for row in rows(_Cells) for text in row]
    assert "`a\\|b`" in rendered
    assert "left \\| right" in rendered
    assert "&lt;hostname>_&lt;random> when empty" in rendered


# (README text, what splice must do): the table replaces what is between the markers.
SPLICES = [
    (f"intro\n{BEGIN}\nold\n{END}\noutro\n", f"intro\n{BEGIN}\nNEW\n{END}\noutro\n"),
    (f"{BEGIN}\n{END}\n", f"{BEGIN}\nNEW\n{END}\n"),
    ("no markers\n", SettingsTableError),
    (f"{END}\n{BEGIN}\n", SettingsTableError),
    (f"{BEGIN}\nno end\n", SettingsTableError),
]


@pytest.mark.parametrize(
    ("readme", "expected"), SPLICES, ids=["between", "empty", "none", "reversed", "no-end"]
)
def test_splice_replaces_only_the_text_between_the_markers(
    readme: str, expected: str | type[Exception]
) -> None:
    if isinstance(expected, str):
        assert splice(readme, "NEW\n") == expected
    else:
        with pytest.raises(expected):
            splice(readme, "NEW\n")


def test_main_rewrites_a_stale_table_and_leaves_a_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{BEGIN}\nstale\n{END}\n")
    monkeypatch.setattr(settings_table, "PAGE", readme)
    monkeypatch.setattr(settings_table, "REPO", tmp_path)
    settings_table.main()
    assert readme.read_text() == f"# x\n{BEGIN}\n{table()}{END}\n"
    before = readme.stat().st_mtime_ns
    settings_table.main()
    assert readme.stat().st_mtime_ns == before
