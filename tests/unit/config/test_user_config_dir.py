"""config/space.py: a config file of the user's (--config-dir) that Hydra would never read is one line. conf/ comes
first on the search path, so `<dir>/objective/vanilla_kd.yaml` with `alpha: 0.123` ran at the tool's alpha 0.5 and
`<dir>/config.yaml` with `seed: 77` at seed 1, silently."""

from __future__ import annotations

import shutil
from pathlib import Path

from distill_sweep.config.space import CONF_DIR, check_group_choices


def _check(own: Path) -> str | None:
    return check_group_choices(["--config-dir", str(own), "task=toy"])


def test_a_file_shadowed_by_the_tools_own_is_refused_a_copy_or_a_new_name_passes(tmp_path: Path) -> None:
    own = tmp_path / "conf"
    (own / "objective").mkdir(parents=True)
    ours = Path(CONF_DIR) / "objective" / "vanilla_kd.yaml"
    shutil.copy(ours, own / "objective" / "vanilla_kd.yaml")
    assert _check(own) is None  # the same content: nothing is lost
    (own / "objective" / "vanilla_kd.yaml").write_text(ours.read_text() + "alpha: 0.123\n")
    line = _check(own)
    assert line is not None and "\n" not in line
    assert line.startswith(f"config file {own / 'objective' / 'vanilla_kd.yaml'}: conf/objective/vanilla_kd.yaml")
    assert "(objective=vanilla_kd picks the tool's), so yours would be ignored; give yours a name of its own" in line
    (own / "objective" / "vanilla_kd.yaml").rename(own / "objective" / "my_kd.yaml")
    assert _check(own) is None


def test_a_primary_config_of_the_users_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("seed: 77\n")
    line = _check(tmp_path)
    assert line is not None and line.startswith(f"config file {tmp_path / 'config.yaml'}: the tool's primary config")
    assert f"{tmp_path}/experiment/<name>.yaml with `# @package _global_`" in line
