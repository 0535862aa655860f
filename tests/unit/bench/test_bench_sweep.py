"""bench_sweep's layer-pass count and its floor, worked by hand on three records."""

from __future__ import annotations

from typing import Any

from distill_sweep.bench.sweep import layer_passes


def _record(digest: str, seed: int, depth: int | None, stages: list[str]) -> dict[str, Any]:
    return {"config_hash": digest, "seed": seed, "data": {"train_size": 100}, "epochs": [{"stage": s} for s in stages],
            "teacher_outputs": {"mode": "store", "key": "k", "cls_layers": [], "depth": depth}}


RECORDS = [
    _record("a", 1, 3, ["intermediate"] * 2 + ["prediction"] * 2),  # hid_seq at init 3: 3 teacher layers
    _record("b", 1, None, ["prediction"] * 2),  # vanilla_kd: the store only
    _record("c", 2, None, ["intermediate"] * 2 + ["prediction"] * 2),  # all 12 layers
]


def test_layer_passes_count_students_store_and_stage_one_forwards_against_one_pass_per_epoch() -> None:
    students = 3 * 3 * 100 * (4 + 2 + 4)  # a step = 3 passes of each of the 3 student layers, per example-epoch
    store = 12 * 100  # one store (key k), built once with the whole teacher
    alone = 3 * 100 * 2 + 12 * 100 * 2  # a's 3 layers and c's 12 in their 2 intermediate epochs; b none
    floor = students + 3 * 100 * 2 + 12 * 100 * 2  # seed 1's deepest stage-1 read (a: 3), seed 2's (c: 12)
    assert layer_passes(RECORDS) == (students + store + alone, floor)
    # a and b in a pack whose shared forwards the process counted; c alone
    assert layer_passes(RECORDS, {"a", "b"}, 777) == (students + store + 777 + 12 * 100 * 2, floor)
