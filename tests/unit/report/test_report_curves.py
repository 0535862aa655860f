"""The dev curves of the report (report.figures, report.svg): whole-epoch ticks, the scored stage only unless
curves=all, no line across the stages' boundary, a band that is the t-interval over seeds, small multiples
when a task has many rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import write_record
from scipy import stats as sps

from distill_sweep.analysis import curves as dev_curves
from distill_sweep.analysis import frames
from distill_sweep.report import figures, svg
from distill_sweep.report.cli import main

# dev accuracy per seed: the intermediate epoch (the untrained head) then two prediction epochs
SCORES = {1: (0.31, 0.70, 0.74), 2: (0.45, 0.72, 0.77), 3: (0.20, 0.69, 0.78)}


def _store(root: Path, objectives: tuple[str, ...] = ("hid_seq",)) -> None:
    for o, objective in enumerate(objectives):
        for seed, (inter, *pred) in SCORES.items():
            epochs = [{"stage": "intermediate", "epoch": 1, "step": 10, "train_loss": 1.0, "dev": {"accuracy": inter}}]
            epochs += [{"stage": "prediction", "epoch": e + 1, "step": 20 + 10 * e, "train_loss": 0.5,
                        "dev": {"accuracy": v + 0.01 * o}} for e, v in enumerate(pred)]
            write_record(root, task="rte", objective=objective, seed=seed, score=pred[0] + 0.01 * o, epochs=epochs)


def _panels(root: Path, stages: str = "scored") -> list[list[figures.CurvePanel]]:
    st = frames.load_store(root)
    panels, _ = figures.curve_panels(dev_curves.curve_stages(st.curves, stages), frames.system_order(st.records), None)
    return panels


def test_scored_stage_only_by_default_with_the_t_interval_band(tmp_path: Path) -> None:
    _store(tmp_path)
    ((panel,),) = _panels(tmp_path)
    (series,) = panel.series
    assert series.xs == [1.0, 2.0] and panel.boundary is None  # the intermediate epoch is not drawn
    assert panel.x_label == "epoch of the scored stage"
    for k in range(2):
        values = [100 * SCORES[s][k + 1] for s in SCORES]
        lo, hi = sps.t.interval(0.95, df=2, loc=np.mean(values), scale=sps.sem(values))
        assert series.mean[k] == pytest.approx(np.mean(values))
        assert (series.low[k], series.high[k]) == (pytest.approx(lo), pytest.approx(hi))


def test_every_stage_on_request_without_a_line_across_the_boundary(tmp_path: Path) -> None:
    _store(tmp_path)
    ((panel,),) = _panels(tmp_path, "all")
    (series,) = panel.series
    assert series.xs == [1.0, 2.0, 3.0] and panel.boundary == 1.5
    assert series.runs() == [[0], [1, 2]]  # the untrained head's point stands alone
    chart = svg.line_chart(panel.title, panel.series, x_label=panel.x_label, y_label=panel.y_label,
                           boundary=panel.boundary, y_limits=panel.y_limits)
    (polyline,) = re.findall(r'<polyline points="([^"]+)"', chart)  # one line: the two prediction epochs
    assert len(polyline.split()) == 2
    assert len(re.findall(r"<circle ", chart)) == 3  # every epoch's mean is marked
    assert 'class="boundary"' in chart


def test_ticks_are_whole_epochs(tmp_path: Path) -> None:
    _store(tmp_path)
    ((panel,),) = _panels(tmp_path)
    chart = svg.line_chart(panel.title, panel.series, x_label=panel.x_label, y_label=panel.y_label,
                           y_limits=panel.y_limits)
    assert re.findall(r'class="xtick"[^>]*>([^<]+)<', chart) == ["1", "2"]  # not 1, 1.2, ..., 2
    assert svg.epoch_ticks(0.75, 1.25) == [1]
    assert svg.epoch_ticks(0.75, 40.25) == list(range(1, 41, 5))  # more than 8 epochs: every 5th, whole


def test_band_cut_at_the_plot_not_the_axis_stretched() -> None:
    # 2 seeds: t(1) = 12.7, a band of +-40 points around means 70 and 72 would flatten the lines
    wide = svg.Series("a", [1.0, 2.0], [70.0, 72.0], [30.0, 32.0], [110.0, 112.0], "#000")
    y0, y1 = svg.y_range([wide])
    assert 70.0 - 2.0 - 0.05 * 6.0 == pytest.approx(y0) and 72.0 + 2.0 + 0.05 * 6.0 == pytest.approx(y1)
    # a narrow band is shown whole; no score past 100
    assert svg.y_range([svg.Series("b", [1.0], [99.0], [98.0], [101.0], "#000")])[1] == pytest.approx(100.1)


def test_many_rows_get_small_multiples(tmp_path: Path) -> None:
    objectives = ("vanilla_kd", "hid_seq", "att_mse", "att_kl", "val_kl")
    _store(tmp_path, objectives)
    (task,) = _panels(tmp_path)
    assert len(task) == len(objectives)  # one chart per row
    for panel in task:
        shown = [s for s in panel.series if not s.context]
        assert len(shown) == 1 and panel.title == f"RTE: {shown[0].label}"
        assert len(panel.series) == len(objectives)  # the other rows, faint behind it
    assert len({p.y_limits for p in task}) == 1  # one y axis for the task's charts
    _store(tmp_path / "four", objectives[:4])
    assert [len(t) for t in _panels(tmp_path / "four")] == [1]  # four rows share one chart


def test_report_option_curves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path, ("vanilla_kd", "hid_seq"))
    assert main([str(tmp_path), "table=1", "paper=false", "format=html"]) == 0
    html = (tmp_path / "tables" / "report.html").read_text(encoding="utf-8")
    assert "95% Student t-interval of that mean over the seeds" in html and 'class="boundary"' not in html
    assert main([str(tmp_path), "table=1", "paper=false", "format=html", "curves=all"]) == 0
    assert 'class="boundary"' in (tmp_path / "tables" / "report.html").read_text(encoding="utf-8")
    assert main([str(tmp_path), "curves=intermediate"]) == 2
    assert "curves must be one of scored|all, got 'intermediate'" in capsys.readouterr().err


def test_a_cut_band_is_drawn_as_cut() -> None:
    """The 2-seed band that reaches 110% is cut at the plot's top and an open arrowhead marks the cut; a band
    inside the plot has none."""
    wide = svg.Series("a", [1.0, 2.0], [70.0, 72.0], [30.0, 32.0], [110.0, 112.0], "#123456")
    chart = svg.line_chart("t", [wide], x_label="epoch", y_label="acc")
    assert len(re.findall(r'<path class="cut"[^>]*stroke="#123456"', chart)) == 4  # top and bottom, 2 epochs
    narrow = svg.Series("b", [1.0, 2.0], [70.0, 72.0], [69.0, 71.0], [71.0, 73.0], "#000")
    assert 'class="cut"' not in svg.line_chart("t", [narrow], x_label="epoch", y_label="acc")


def test_curves_png_bands_within_the_metric_and_whole_epochs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """curves.png at 2 seeds and one epoch: the t-interval (t = 12.7) reached 120% accuracy and the epoch axis
    read 0.945 ... 1.050. Now the band stays within 0-100 (and the HTML charts' reach) and the ticks are whole."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from distill_sweep.report import plots

    for seed, acc in ((1, 0.80), (2, 0.95)):
        epochs = [{"stage": "prediction", "epoch": 1, "step": 10, "train_loss": 0.5, "dev": {"accuracy": acc}}]
        write_record(tmp_path, task="rte", objective="vanilla_kd", seed=seed, score=acc, epochs=epochs)
    st = frames.load_store(tmp_path)
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    assert plots.plot_curves(dev_curves.curve_stages(st.curves), tmp_path / "c.png", "t", ["vanilla_kd"])
    (ax,) = [a for a in kept[0].axes if a.get_visible()]
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks == [1.0]
    tops = [float(np.max(c.get_paths()[0].vertices[:, 1])) for c in ax.collections if c.get_paths()]
    assert tops and max(tops) <= 100.0  # the band's top, cut at what accuracy can be
    assert ax.get_ylim()[1] <= 100.0 + 0.05 * 100.0
