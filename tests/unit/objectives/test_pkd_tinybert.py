"""PKD (Sun et al. 2019) and TinyBERT's task-specific distillation (Jiao et al. 2020): the PKD term worked by hand,
its layer pairs, bad inputs refused before any work, a few steps of each system on the toy task, the presets."""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import FAST, compose_cfg, plain
from helpers import PKD_SHORT as SHORT

from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.models.capture import Features
from distill_sweep.models.inits import resolve_init
from distill_sweep.models.layer_map import resolve_map
from distill_sweep.models.model_info import ModelInfo
from distill_sweep.objectives import check_compatible, parse_objective
from distill_sweep.objectives.core import Objective, build_objective
from distill_sweep.objectives.pkd import patience_pairs
from distill_sweep.objectives.prediction import prediction_loss


def softmax(xs: list[float]) -> list[float]:
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [v / sum(e) for v in e]


def unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def mse(a: list[list[float]], b: list[list[float]]) -> float:
    """Mean over examples and dimensions."""
    return sum((x - y) ** 2 for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)) / (
        len(a) * len(a[0]))


# ------------------------------------------------------------------------------------------ the PKD term by hand
# B = 2 examples, width 2, one position ([CLS]); student 3 layers, teacher 4, map [(1,2), (2,4), (3,4)].
S_CLS = {1: [[3.0, 4.0], [0.0, 2.0]], 2: [[1.0, 1.0], [5.0, 0.0]], 3: [[7.0, -1.0], [2.0, 8.0]]}
T_CLS = {2: [[1.0, 0.0], [0.0, -5.0]], 4: [[2.0, 2.0], [0.0, 3.0]], 3: [[9.0, 9.0], [1.0, 1.0]]}
LAYER_MAP = [(1, 2), (2, 4), (3, 4)]


def cls_features(cls: dict[int, list[list[float]]], layers: int, logits: list[list[float]]) -> Features:
    hidden = [torch.tensor(cls[i]).view(2, 1, 2) if i in cls else torch.full((2, 1, 2), 11.0)
              for i in range(layers + 1)]
    return Features(logits=torch.tensor(logits), hidden_states=tuple(hidden))


def pkd_objective(normalize: bool = True, weight: float = 500.0, **over: object):
    cfg = {"name": "pkd", "stages": ["combined"], "terms": {"pkd_cls": {"weight": weight, "normalize": normalize}},
           "alpha": 0.7, "temperature": 10.0, **over}
    arch = lambda layers: SimpleNamespace(hidden_size=2, num_attention_heads=1, num_hidden_layers=layers)  # noqa: E731
    settings = parse_objective(cfg)
    terms = build_objective(settings, student_config=arch(3), teacher_config=arch(4), layer_map=LAYER_MAP,
                            train_labels=None, num_labels=3)
    return settings, terms


def test_pkd_term_by_hand_normalised_and_raw() -> None:
    batch = {"attention_mask": torch.ones(2, 1, dtype=torch.long), "input_ids": torch.zeros(2, 1, dtype=torch.long)}
    s, t = cls_features(S_CLS, 3, [[0.0] * 3] * 2), cls_features(T_CLS, 4, [[0.0] * 3] * 2)
    # Pairs (1,2) and (2,4) only: student layer 3 is the KD term's.
    #   (1,2): n([3,4]) = [.6,.8] vs [1,0]; n([0,2]) = [0,1] vs [0,-1] -> (.16 + .64 + 0 + 4) / 4 = 1.2
    #   (2,4): n([1,1]) = n([2,2]); n([5,0]) = [1,0] vs [0,1] -> (0 + 0 + 1 + 1) / 4 = 0.5
    #   L_PT = (1.2 + 0.5) / 2 = 0.85 (mean over the pairs, as PKD's mse_loss over [B, k-1, D])
    expect = (mse([unit(v) for v in S_CLS[1]], [unit(v) for v in T_CLS[2]])
              + mse([unit(v) for v in S_CLS[2]], [unit(v) for v in T_CLS[4]])) / 2
    assert expect == pytest.approx(0.85)
    _, terms = pkd_objective()
    total, values = terms(s, t, batch)
    assert values["pkd_cls"] == pytest.approx(expect)
    assert total.item() == pytest.approx(500.0 * expect)  # beta = the term's weight
    # normalize: false -> the raw [CLS] states: (69 / 4 + 36 / 4) / 2 = 13.125
    raw = (mse(S_CLS[1], T_CLS[2]) + mse(S_CLS[2], T_CLS[4])) / 2
    assert raw == pytest.approx(13.125)
    _, terms_raw = pkd_objective(normalize=False, weight=1.0)
    assert terms_raw(s, t, batch)[0].item() == pytest.approx(raw)


def test_pkd_combined_loss_by_hand() -> None:
    """(1 - a) CE + a T^2 KL(p_t^T || p_s^T) (KL summed over classes, averaged over the batch) + beta L_PT."""
    z_s, z_t, labels = [[1.0, 2.0, 0.0], [0.0, 0.0, 1.0]], [[3.0, -1.0, 0.5], [0.0, 2.0, 1.0]], [1, 2]
    settings, terms = pkd_objective()
    s, t = cls_features(S_CLS, 3, z_s), cls_features(T_CLS, 4, z_t)
    terms.features = lambda model, batch, side: s  # the captured features (the student's side)
    terms.teacher_features = lambda teacher, batch, logits: t  # and the teacher's, logits included
    loss_fn = Objective(settings, terms, regression=False).loss_fn("combined", student=None, teacher=None)
    batch = {"attention_mask": torch.ones(2, 1, dtype=torch.long), "input_ids": torch.zeros(2, 1, dtype=torch.long),
             "labels": torch.tensor(labels)}
    loss, parts = loss_fn(batch)
    a, temp = 0.7, 10.0
    ce = sum(-math.log(softmax(z)[y]) for z, y in zip(z_s, labels, strict=True)) / 2
    kl = 0.0
    for zs, zt in zip(z_s, z_t, strict=True):
        p_t, p_s = softmax([x / temp for x in zt]), softmax([x / temp for x in zs])
        kl += sum(p * math.log(p / q) for p, q in zip(p_t, p_s, strict=True)) / 2
    kd = (1 - a) * ce + a * temp**2 * kl
    assert parts["kd"] == pytest.approx(kd, rel=1e-5) and parts["pkd_cls"] == pytest.approx(0.85)
    assert loss.item() == pytest.approx(kd + 500.0 * 0.85, rel=1e-6)


# ------------------------------------------------------------------------------------------ the layer pairs
@pytest.mark.parametrize(("rule", "teacher", "student", "pairs"), [
    ("skip", 6, 3, [(1, 2), (2, 4)]),
    ("last", 6, 3, [(1, 4), (2, 5)]),
    ("skip", 12, 6, [(1, 2), (2, 4), (3, 6), (4, 8), (5, 10)]),  # PKD-Skip, --fc_layer_idx 1,3,5,7,9
    ("last", 12, 6, [(1, 7), (2, 8), (3, 9), (4, 10), (5, 11)]),  # PKD-Last: the k-1 below the top
    ("last", 12, 3, [(1, 10), (2, 11)]),  # PKD's 3-layer script: --fc_layer_idx 9,10
])
def test_pkd_pairs_are_the_map_less_the_last_student_layer(rule: str, teacher: int, student: int,
                                                           pairs: list[tuple[int, int]]) -> None:
    layer_map = resolve_map(rule, resolve_init("bottom", teacher, student), teacher, student)
    assert patience_pairs(layer_map, student) == tuple(pairs)


# ------------------------------------------------------------------------------------------ bad input
def one_line(err: pytest.ExceptionInfo[ConfigError]) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(("overrides", "message"), [
    # PKD's own convention (k-1 teacher layers for a 6-layer student) handed to a 3-layer student
    (["map=[2,4,6,8,10]"], "names 5 teacher layers but the student has 3"),
    (["map=[[1,2],[2,4],[3,6],[4,8]]"], "student layer 4 is out of range 1..3"),
    (["student.num_layers=1"], "the student has 1 layer"),
    (["student=fresh", "student.hidden_size=32", "student.num_attention_heads=4"], "32 wide and the teacher 64"),
    (["+objective.schedules.intermediate=constant"], "schedules.intermediate: not a stage of this objective"),
])
def test_pkd_bad_input_refused_before_any_work(tmp_path: Path, overrides: list[str], message: str) -> None:
    cfg = compose_cfg([*SHORT, "objective=pkd", "map=skip", *overrides, f"results_dir={tmp_path / 'r'}",
                       f"cache_dir={tmp_path / 'c'}"])
    with pytest.raises(ConfigError) as err:
        prepare(cfg)
    assert message in one_line(err)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_pkd_map_without_a_layer_below_the_top_is_refused() -> None:
    settings = parse_objective({"name": "pkd", "stages": ["combined"], "terms": {"pkd_cls": 1.0}})
    info = ModelInfo(num_layers=3, hidden_size=8, num_heads=2)
    with pytest.raises(ConfigError) as err:
        check_compatible(settings, info, info, [(3, 6)])  # map=top
    assert "pairs no student layer below the last (3)" in one_line(err)
    with pytest.raises(ConfigError, match="expected one of"):
        parse_objective({"name": "x", "stages": ["intermediate"], "terms": {"att_mse": 1.0},
                         "schedules": {"intermediate": "cosine"}})


def test_schedules_left_out_of_the_hash_when_unset() -> None:
    """Objectives without the setting keep the config hash they had before it existed."""
    settings = parse_objective(plain(compose_cfg(["objective=att_mse_hid_seq"]).objective))
    assert "schedules" not in settings.to_dict()
    assert parse_objective(plain(compose_cfg(["objective=tinybert"]).objective)).to_dict()["schedules"] == {
        "intermediate": "constant"}


def _projection(overrides: list[str], d_s: int, d_t: int) -> torch.Tensor:
    settings = parse_objective(plain(compose_cfg(["objective=tinybert", *overrides]).objective))
    arch = {"num_attention_heads": 4, "num_hidden_layers": 1, "initializer_range": 0.02}
    torch.manual_seed(0)
    objective = build_objective(settings, student_config=SimpleNamespace(hidden_size=d_s, **arch),
                                teacher_config=SimpleNamespace(hidden_size=d_t, **arch), layer_map=[(1, 1)],
                                train_labels=None, num_labels=2)
    return objective.terms["hid_seq"].proj.maps[0].weight.detach()


def test_tinybert_projection_starts_at_the_identity_or_random_as_its_code() -> None:
    w = _projection([], 64, 64)  # the default: the identity at equal widths
    assert torch.equal(w, torch.eye(64))
    random = _projection(["objective.terms.hid_seq.projection_init=random"], 64, 64)
    # TinyBERT's init_bert_weights: normal(0, initializer_range = 0.02); 4096 draws put the std within 5%
    assert abs(float(random.std()) - 0.02) < 0.001 and abs(float(random.mean())) < 0.001
    wider = _projection(["objective.terms.hid_seq.projection_init=random"], 32, 64)
    assert wider.shape == (64, 32) and abs(float(wider.std()) - 0.02) < 0.0015
    # identity at unequal widths keeps nn.Linear's default: uniform(+-1/sqrt(32)), std 1/sqrt(96) = 0.102
    assert abs(float(_projection([], 32, 64).std()) - 1 / math.sqrt(96)) < 0.01


def test_projection_init_at_its_default_leaves_the_config_hash_alone(tmp_path: Path) -> None:
    from distill_sweep.job.identity import identify

    def digest(*overrides: str) -> str:
        return identify(compose_cfg([*FAST, "objective=tinybert", *overrides, f"results_dir={tmp_path}"])).digest

    # at its default the key is not hashed (tests/unit/records/test_earlier_records.py: a hid_seq job keeps its old hash)
    settings = parse_objective(plain(compose_cfg(["objective=tinybert"]).objective))
    assert settings.terms["hid_seq"].projection_init == "identity"
    assert settings.to_dict()["terms"]["hid_seq"] == {"weight": 1.0, "projection": "linear", "shared_projection": True}
    unset = digest("~objective.terms.hid_seq.projection_init")  # as configs were before the key existed
    assert digest() == unset != digest("objective.terms.hid_seq.projection_init=random")
    with pytest.raises(ConfigError, match="projection_init=random starts a W_h that .*projection=none does not"):
        prepare(compose_cfg([*FAST, "objective=tinybert", "objective.terms.hid_seq.projection=none",
                             "objective.terms.hid_seq.projection_init=random"]))


def test_tinybert_prediction_stage_is_soft_ce_less_the_teacher_entropy() -> None:
    """alpha 1, T 1: KL(p_t || p_s) = soft CE - H(p_t); the entropy is constant in the student, so the
    gradients are TinyBERT's soft cross-entropy's (its code also divides by the classes: a constant factor)."""
    z_s = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, 0.0]], requires_grad=True)
    z_t = [[2.0, 0.0, 0.0], [0.5, 0.5, 1.0]]
    got = prediction_loss(z_s, torch.tensor(z_t), torch.tensor([0, 1]), alpha=1.0, temperature=1.0,
                          regression=False)
    soft_ce = sum(-sum(p * math.log(q) for p, q in zip(softmax(zt), softmax(zs), strict=True))
                  for zs, zt in zip(z_s.tolist(), z_t, strict=True)) / 2
    entropy = sum(-sum(p * math.log(p) for p in softmax(zt)) for zt in z_t) / 2
    assert got.item() == pytest.approx(soft_ce - entropy, rel=1e-6)
    got.backward()
    # d soft_ce / d z_s = (p_s - p_t) / B
    expect = [[(q - p) / 2 for p, q in zip(softmax(zt), softmax(zs), strict=True)]
              for zs, zt in zip(z_s.tolist(), z_t, strict=True)]
    assert z_s.grad.tolist() == [pytest.approx(row, abs=1e-7) for row in expect]


# ------------------------------------------------------------------------------------------ presets
def preset_jobs(preset: str, tmp_path: Path) -> tuple[int, dict[str, list[str]]]:
    """(combinations in the preset's grid, {config hash: overrides} of its distinct jobs), each job validated
    as the sweeper validates it."""
    from hydra import compose, initialize_config_dir

    from distill_sweep.config.space import CONF_DIR, VERSION_BASE
    from distill_sweep.sweep.compose import expand

    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        params = compose("config", overrides=[f"experiment={preset}"], return_hydra_config=True).hydra.sweeper.params
    combos = expand([f"{k}={v}" for k, v in params.items()])
    jobs = {}
    for overrides in combos:
        job = prepare(compose_cfg([f"experiment={preset}", *overrides, f"results_dir={tmp_path}"]))
        jobs.setdefault(job.digest, overrides)
    return len(combos), jobs


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
@pytest.mark.parametrize(("preset", "grid", "jobs"), [
    # procedure x objective x map x seed = 16; finetune ignores the objective (4 left out); vanilla_kd and
    # finetune still run once per map: map is part of every job's identity today
    ("pkd", 16, 8),
    ("tinybert", 8, 6),  # procedure x objective x seed; finetune ignores the objective
])
def test_presets_expand(tmp_path: Path, preset: str, grid: int, jobs: int) -> None:
    combos, distinct = preset_jobs(preset, tmp_path)
    assert (combos, len(distinct)) == (grid, jobs)
    runs = [" ".join(o) for o in distinct.values()]
    if preset == "pkd":
        pkd = sorted(re.search(r"map=(\w+)", r).group(1) for r in runs
                     if "objective=pkd" in r and "procedure=task_specific" in r)
        assert pkd == ["last", "last", "skip", "skip"]
    else:
        assert sum("objective=tinybert" in r and "procedure=task_specific" in r for r in runs) == 2
