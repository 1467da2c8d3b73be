"""`make ui` serves the home `dsv` used: `dsv demo` prints the variables it needs, and the Makefile passes them on.

Before, `make ui` always served ./.dsv, so the readings demo (DSV_HOME=.dsv/readings) or any other home opened an
instance without its runs, and the demo's hint named no home.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from dsv_platform.cli.runs import ui_command
from dsv_platform.settings import load_settings

REPO = Path(__file__).resolve().parents[2]


def test_the_command_names_only_what_differs_from_the_checkouts_default(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert ui_command(load_settings({})) == "make ui"
    readings = load_settings({"DSV_HOME": ".dsv/readings", "DSV_CONFIG_DIR": "config"})
    assert ui_command(readings) == f"DSV_HOME={tmp_path}/.dsv/readings DSV_CONFIG_DIR={tmp_path}/config make ui"
    assert ui_command(load_settings({"DSV_HOME": "/srv/h", "DAGSTER_HOME": "/srv/d"})) == "DSV_HOME=/srv/h DAGSTER_HOME=/srv/d make ui"


def test_make_ui_serves_the_home_and_dagster_home_it_is_given(tmp_path: Path) -> None:
    def dry_run(*variables: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "DAGSTER_", "MAKE"))}  # only what the test gives
        done = subprocess.run(["make", "-n", "-C", str(REPO), "ui", "STAMP=", *variables], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        [line] = [x for x in done.stdout.splitlines() if "dagster-webserver" in x]
        return line

    assert dry_run().startswith(f"DSV_HOME={REPO}/.dsv DAGSTER_HOME={REPO}/.dsv/dagster sh -c ")
    assert dry_run(f"DSV_HOME={tmp_path}/h").startswith(f"DSV_HOME={tmp_path}/h DAGSTER_HOME={tmp_path}/h/dagster sh -c ")
    assert dry_run(f"DSV_HOME={tmp_path}/h", f"DAGSTER_HOME={tmp_path}/d").startswith(f"DSV_HOME={tmp_path}/h DAGSTER_HOME={tmp_path}/d sh -c ")
