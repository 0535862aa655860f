"""`make bench` on a tiny configuration: one row per objective, consistent columns, bad names refused early."""

from __future__ import annotations

import pytest
from helpers import TINY, TINY_AGNOSTIC

from distill_sweep.bench import step
from distill_sweep.models.inits import skip_layers


def table_rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("objective", "---"):
            rows[cells[0]] = cells
    return rows


def test_bench_prints_one_consistent_row_per_objective(capsys: pytest.CaptureFixture[str]) -> None:
    assert step.main(["--objectives", "vanilla_kd,att_kl_hid_seq,val_kl", *TINY]) == 0
    out = capsys.readouterr().out
    assert "layer map [(1, 2)]" in out
    rows = table_rows(out)
    assert list(rows) == ["vanilla_kd", "att_kl_hid_seq", "val_kl"]
    assert rows["att_kl_hid_seq"][1] == "att_kl+hid_seq" and rows["vanilla_kd"][1] == "prediction"
    for name, (_, _, ms, per_s, ratio, span, _, alone_ratio) in rows.items():
        lo, hi = (float(x) for x in span.split("-"))
        assert lo <= float(ratio) <= hi, name  # the median lies inside the range of the pairs
        # batch 2 / step time, both printed rounded: ms within what per_s's last printed digit allows
        half = 0.5 * 10.0 ** -(len(per_s.split(".")[1]) if "." in per_s else 0)
        assert 2e3 / (float(per_s) + half) - 0.51 <= float(ms) <= 2e3 / (float(per_s) - half) + 0.51, name
        # vanilla_kd has no intermediate loss; the others add a strictly positive cost
        assert (float(alone_ratio) == 1.0) == (name == "vanilla_kd"), name


def test_bench_refuses_an_unknown_objective_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(step, "make_models", lambda args: pytest.fail("models built before the names were checked"))
    with pytest.raises(SystemExit, match="unknown objective 'att_nope'"):
        step.main(["--objectives", "att_kl,att_nope", *TINY])


def test_bench_layer_map_is_the_training_skip_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # 6 teacher / 4 student layers: skip_layers rounds 1.5, 3, 4.5, 6 half up -> 2, 3, 5, 6, where a floored
    # integer ratio would give 1, 2, 3, 4.
    assert skip_layers(6, 4) == [2, 3, 5, 6]
    seen: list[list[tuple[int, int]]] = []

    class Stop(Exception):
        pass

    def record(cfg, **kw):
        seen.append(list(kw["layer_map"]))
        raise Stop

    monkeypatch.setattr(step, "build_objective", record)
    args = list(TINY)
    args[args.index("--teacher-layers") + 1], args[args.index("--student-layers") + 1] = "6", "4"
    with pytest.raises(Stop):
        step.main(["--objectives", "att_kl", *args])
    assert seen == [[(1, 2), (2, 3), (3, 5), (4, 6)]]


def test_bench_agnostic_prints_a_row_per_objective_and_the_dense_heads(capsys: pytest.CaptureFixture[str]) -> None:
    from distill_sweep.bench import agnostic

    assert agnostic.main(["--objectives", "vanilla_kd,att_mse", *TINY_AGNOSTIC]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert list(rows) == ["vanilla_kd", "att_mse", agnostic.DENSE_ROW]
    assert rows["vanilla_kd"][1] == "KD+MLM" and rows["att_mse"][1] == "att_mse"  # the procedure's loss parts
    for name, (_, _, ms, per_s, ratio, span, saved) in rows.items():
        lo, hi = (float(x) for x in span.split("-"))
        assert lo <= float(ratio) <= hi, name
        assert abs(2 * 16e3 / float(per_s) - float(ms)) <= 0.6, name  # 2 x 16 tokens / step time (ms rounded)
        assert float(saved) >= 0, name
