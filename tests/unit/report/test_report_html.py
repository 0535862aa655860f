"""The HTML report: one self-contained page (tables with their CIs, heatmaps, test matrices, curves, jobs),
checked in its text and in a real headless Chromium; format=; the wandb summary run."""

from __future__ import annotations

import re
import shutil
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import require, require_module, write_record
from helpers import write_demo_like as _demo_like
from scipy import stats as sps

from distill_sweep.report import html_page
from distill_sweep.report.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _page(tmp_path: Path, *args: str) -> tuple[str, Path]:
    _demo_like(tmp_path)
    assert main([str(tmp_path), "paper=false", *args]) == 0
    page = tmp_path / "tables" / "report.html"
    return page.read_text(encoding="utf-8"), page


def _table_means(csv: Path) -> list[str]:
    frame = pd.read_csv(csv)
    return [f"{m:.1f}" for m in frame.loc[frame["task"] != "avg", "mean"].dropna()]


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_html_written_by_default_and_self_contained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html, page = _page(tmp_path)
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"HTML report: {page}")  # make demo's last line is the page's path
    assert (tmp_path / "tables" / "report.md").is_file()  # beside the Markdown
    # nothing fetched: no script, stylesheet or image from anywhere (the only URL is SVG's namespace)
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert set(re.findall(r"https?://[^\s\"']+", html)) == {"http://www.w3.org/2000/svg"}
    # every Markdown section is there
    md_heads = re.findall(r"^## (.+)$", (tmp_path / "tables" / "report.md").read_text(encoding="utf-8"), re.M)
    for head in md_heads[1:]:
        assert f"<h2>{head}</h2>" in unescape(html).replace("&#x27;", "'"), head
    for figure in ("heatmap", "heatmap delta", "matrix", "curve"):
        assert f'class="{figure}"' in html, figure
    assert "ValueError: boom" in html and 'href="../rte/hid_seq/init-1/seed-1/' in html  # the failed job's link


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_html_cells_hold_the_csv_numbers_and_their_ci(tmp_path: Path) -> None:
    html, _ = _page(tmp_path)
    text = unescape(html)
    for mean in _table_means(tmp_path / "tables" / "table3.csv"):
        assert f">{mean}±" in text or f"<b>{mean}±" in text, mean
    # att_kl at init 3 on toy: seeds 1, 2 -> the Student t-interval (1 degree of freedom) of the score in percent
    values = [100 * (0.60 + 0.09 + 0.02 + 0.011 * s ** 2 * 1.9) for s in (1, 2)]
    lo, hi = sps.t.interval(0.95, df=1, loc=np.mean(values), scale=sps.sem(values))
    assert hi > 100.0  # past what accuracy can be: cut there, and said
    assert (f"95% CI [{lo:.2f}, 100.00] (Student t-interval of the mean (n - 1 degrees of freedom), cut at what the "
            "metric can be)") in text
    # the header names the method and the sources of variability
    assert "their 95% CI is the Student t-interval of the mean (n - 1 degrees of freedom) (ci=t)" in text
    assert "<b>variability:</b> Sources of variability: a seed changes the student&#x27;s newly" in html
    assert "fixed across seeds: the teacher of each task" in text


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_ci_choice_is_named_in_footnotes_and_header(tmp_path: Path) -> None:
    html, _ = _page(tmp_path, "ci=bootstrap", "table=1")
    text = unescape(html)
    assert "(ci=bootstrap)" in text and "percentile bootstrap of the mean (10,000 resamples, seeded)" in text
    md = (tmp_path / "tables" / "table1.md").read_text(encoding="utf-8")
    assert "each cell's 95% CI (percentile bootstrap of the mean" in md
    assert "caution: ci=bootstrap chosen, but cells have n = 2 < 20" in md  # the demo's 2 seeds
    assert set(pd.read_csv(tmp_path / "tables" / "table1.csv")["ci_method"].dropna()) == {"bootstrap"}


def test_header_keeps_dirty_and_prints_no_nan() -> None:
    assert html_page.short_commit("0123456789abcdef0123-dirty") == "0123456789ab-dirty"
    assert html_page.short_commit("0123456789abcdef0123") == "0123456789ab"


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_format_html_and_text(tmp_path: Path) -> None:
    _demo_like(tmp_path)
    assert main([str(tmp_path), "format=html", "out=" + str(tmp_path / "h")]) == 0
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == ["report.html"]
    assert main([str(tmp_path), "format=text", "out=" + str(tmp_path / "t")]) == 0
    names = {p.name for p in (tmp_path / "t").iterdir()}
    assert "report.md" in names and "report.html" not in names


def test_format_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _demo_like(tmp_path)
    assert main([str(tmp_path), "format=pdf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "format must be one of all|html|text" in err[0]
    assert not (tmp_path / "tables").exists()


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_html_report_in_headless_chromium(tmp_path: Path) -> None:
    require(None if CHROMIUM is not None else "no chromium installed (.ci/run installs Debian's)")
    sync_api = require_module("playwright.sync_api", "the HTML report's browser test drives chromium with it")
    _, page_path = _page(tmp_path)
    t1 = pd.read_csv(tmp_path / "tables" / "table1.csv")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=20_000)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.set_default_timeout(5_000)  # a missing element fails in seconds, not Playwright's 30 s
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: errors.append(f"fetched {r.url}") if not r.url.startswith("file:") else None)
            page.goto(page_path.as_uri(), timeout=15_000)
            table = page.locator("table.report").first
            shown = table.inner_text()
            for row in t1[t1["task"] == "toy"].itertuples():
                assert f"{row.mean:.1f}±{row.std:.2f} ({int(row.n)})" in shown, row.row
            tip = table.locator("td[title*='95% CI']").first.get_attribute("title")  # the CI on hover
            assert tip and re.search(r"95% CI \[[\d.]+, [\d.]+\] \(Student t-interval.*\), std [\d.]+, n = 2", tip), tip
            assert page.locator("figure.heatmap svg rect").count() >= 2 * len(t1)
            assert page.locator("figure.matrix").count() >= 1
            curve = page.locator("svg.curve").first
            assert curve.is_visible() and curve.locator("polyline").count() >= 1
            box = curve.bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 100  # drawn, not collapsed
            assert page.locator("table.jobs tr.failed").count() == 1
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert (tmp_path / "report.png").stat().st_size > 10_000  # the screenshot, kept in the test's tmp_path


def test_html_lists_the_preset_jobs_not_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    write_record(tmp_path, task="toy", seed=0)
    write_record(tmp_path, task="toy", seed=2, status="running")
    fake = types.ModuleType("distill_sweep.sweep.compose")
    fake.expected_jobs = lambda name: [  # type: ignore[attr-defined]
        {"task": "toy", "objective": "vanilla_kd", "init_spec": "1", "seed": s} for s in range(4)]
    monkeypatch.setitem(sys.modules, "distill_sweep.sweep.compose", fake)
    assert main([str(tmp_path), "preset=demo", "table=1", "format=html"]) == 0
    html = (tmp_path / "tables" / "report.html").read_text(encoding="utf-8")
    missing = re.findall(r'<tr class="missing">(.*?)</tr>', html)
    seeds = sorted(re.findall(r"<td>(\d+)</td>$", row)[0] for row in missing)
    assert seeds == ["1", "3"]  # seed 2 is running (in the jobs table), seed 0 completed
    assert "2 job(s) of preset demo not started" in html
    assert len(re.findall(r'<tr class="running">', html)) == 1


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_a_baseline_that_is_no_row_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _demo_like(tmp_path)
    assert main([str(tmp_path), "baseline=vanila_kd"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("distill_sweep.report: error: baseline='vanila_kd' is not a row")
    assert "vanilla_kd" in err[0] and not (tmp_path / "tables").exists()  # the rows it could be, nothing written
    assert main([str(tmp_path), "baseline=vanilla_kd", "format=html"]) == 0  # a row that exists


def test_matrix_is_coloured_by_the_mean_difference_with_d_as_text() -> None:
    """Fixed units: +-5 points is full colour, whatever the data's range. A significant 10-point gap is the
    strongest blue; a 0.13-point gap at p = 0.89 (which the data's min-max once made the darkest) is washed out
    to near white and its text grey; an untestable pair prints no d of +inf; a 2-pair d says n=2."""
    from distill_sweep.report import figures, svg

    base = {"n": 3, "tasks": 1, "mean_a": 0.0, "mean_b": 0.0, "ci_low": -1.0, "ci_high": 1.0, "t": 1.0, "p": 0.5,
            "p_holm": 0.5, "significant": False, "significant_holm": False, "testable": True, "few_pairs": False,
            "aso_ab": 0.5, "aso_ba": 0.5, "aso_better": "", "aso_limit": 0.05, "seeds": 3.0, "seeds_low": 3.0,
            "seeds_high": float("inf"), "note": ""}
    tests = pd.DataFrame([{**base, "a": "x", "b": "y", "mean_diff": 0.13, "d": 0.1, "p": 0.89, "p_holm": 0.89},
                          {**base, "a": "x", "b": "z", "mean_diff": 10.0, "d": 3.0, "p": 0.001, "p_holm": 0.003,
                           "significant": True, "significant_holm": True},
                          {**base, "a": "y", "b": "z", "mean_diff": 0.2, "d": float("nan"), "p": float("nan"),
                           "p_holm": float("nan"), "testable": False, "note": "differences have zero variance"},
                          {**base, "a": "x", "b": "w", "n": 2, "mean_diff": 1.0, "d": 24.7}])
    html = figures.tests_matrix(tests, ["x", "y", "z", "w"], "T", 0.05)
    cells: dict[str, str] = {}
    for col, fill in re.findall(r'<title>x vs (\w): [^<]*</title><rect [^>]*fill="([^"]+)"', html):
        cells.setdefault(col, fill)  # row x comes first (rows in order); the column's cells repeat the tip
    assert cells["z"] == svg.colour(10.0, -5.0, 5.0, diverging=True) == "rgb(33,102,172)"  # the strongest blue
    rgb = [int(v) for v in cells["y"][4:-1].split(",")]
    assert min(rgb) >= 235  # not significant: no saturated colour, whatever the scale
    assert ">d +3.0*<" in html and ">d +0.1<" in html  # the mark visible without hovering
    assert ">untested<" in html and "d +∞" not in html and "d −∞" not in html  # untestable: no d of +inf
    assert ">d +24.7 n=2<" in html  # a d from 2 pairs carries its caution
    assert '<g class="colourbar">' in html and ">mean(row - column), points<" in html
    assert ">≤-5.0<" in html and ">≥+5.0<" in html  # the fixed bar's ends stand for everything beyond


def test_difference_map_mutes_what_is_not_significant(tmp_path: Path) -> None:
    """The difference-to-baseline map: a steady 10-point gain over 3 seeds is full colour with *, a 0.1-point
    one over noisy seeds is washed out; both on the fixed +-5-point scale."""
    from distill_sweep.report import svg

    for seed, noise in enumerate([0.0, 0.03, -0.02]):
        write_record(tmp_path, task="rte", objective="none", procedure="finetune", seed=seed, score=0.60 + noise)
        write_record(tmp_path, task="rte", objective="att_kl", seed=seed, score=0.70 + noise + 0.001 * seed)
        write_record(tmp_path, task="rte", objective="vanilla_kd", seed=seed,
                     score=0.60 + [0.03, -0.02, 0.0][seed] + 0.001)
    assert main([str(tmp_path), "paper=false", "table=1", "format=html"]) == 0
    page = (tmp_path / "tables" / "report.html").read_text(encoding="utf-8")
    delta = page[page.index('class="heatmap delta"'):]
    delta = delta[:delta.index("</figure>")]
    fills = dict(re.findall(r'<title>([\w_]+) · RTE: [^<]*</title><rect [^>]*fill="([^"]+)"', delta))
    assert fills["att_kl"] == svg.colour(10.0, -5.0, 5.0, diverging=True)
    assert min(int(v) for v in fills["vanilla_kd"][4:-1].split(",")) >= 235
    assert re.search(r">\+10\.\d\*<", delta)


@pytest.mark.slow  # starts a browser (chromium), seconds
def test_a_tiny_non_significant_difference_is_no_saturated_cell_in_chromium(tmp_path: Path) -> None:
    """The picture a reader sees, not only the SVG source: two rows 0.13 points apart at p ~ 0.9 over 3 seeds once
    filled the difference map and the test matrix with their darkest and lightest colours. In the browser's
    rendering of those figures (colour bars hidden: they show the scale, not a result), no pixel is saturated."""
    require(None if CHROMIUM is not None else "no chromium installed (.ci/run installs Debian's)")
    sync_api = require_module("playwright.sync_api", "the HTML report's browser test drives chromium with it")
    from PIL import Image

    for seed, (a, b) in enumerate([(0.700, 0.690), (0.690, 0.705), (0.712, 0.703)], start=1):  # +0.13 points
        for objective, score in (("vanilla_kd", a), ("att_mse", b)):
            write_record(tmp_path, objective=objective, seed=seed, score=score, teacher="tiny", teacher_layers=6)
    assert main([str(tmp_path), "paper=false", "baseline=vanilla_kd"]) == 0
    page_path = tmp_path / "tables" / "report.html"
    shots = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=20_000)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.goto(page_path.as_uri(), timeout=15_000)
            page.add_style_tag(content=".colourbar { display: none; }")
            figures = page.locator("figure.matrix svg, figure.delta svg")
            assert figures.count() >= 2  # the test matrix and the difference map
            for k in range(figures.count()):
                shots.append(tmp_path / f"figure-{k}.png")
                figures.nth(k).screenshot(path=str(shots[-1]))
        finally:
            browser.close()
    for shot in shots:
        hsv = np.asarray(Image.open(shot).convert("RGB").convert("HSV"), dtype=float)
        saturated = (hsv[..., 1] > 0.35 * 255) & (hsv[..., 2] > 0.2 * 255)
        assert saturated.mean() < 0.001, f"{shot.name}: {saturated.mean():.1%} of the pixels saturated"
