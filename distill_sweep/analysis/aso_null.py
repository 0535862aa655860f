"""The calibrated thresholds of ASO's verdict (computed by analysis/aso_calibration.py, which says how).

THRESHOLDS[n][level]: the largest t with P(eps_min < t) <= level for two identical normal systems of n seeds
each (REPS pairs, both directions). A pair is called almost stochastically better when eps_min < min(t,
aso.ASO_THRESHOLD), t at the largest tabulated level <= the verdict's level (alpha over the family's pairs:
Bonferroni) and at the largest tabulated n <= the pair's n (t grows with n, so a smaller n's t is stricter;
up to Monte Carlo noise, which makes a few neighbours differ by about 0.005 the other way, e.g. n = 5 and 6
at 0.05).
t = 0: no verdict is possible at that n and level (eps_min = 0 is itself too likely under the null).
"""

from __future__ import annotations

import math

ASO_ALPHA = 0.05  # eps_min's own confidence (deepsig's default confidence_level 0.95), without Bonferroni
NS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20)
LEVELS = (0.05, 0.025, 0.01, 0.005, 0.0025, 0.001)
REPS = 20_000
SEED = 0

THRESHOLDS: dict[int, dict[float, float]] = {
    2: {0.05: 0.0000, 0.025: 0.0000, 0.01: 0.0000, 0.005: 0.0000, 0.0025: 0.0000, 0.001: 0.0000},
    3: {0.05: 0.0517, 0.025: 0.0000, 0.01: 0.0000, 0.005: 0.0000, 0.0025: 0.0000, 0.001: 0.0000},
    4: {0.05: 0.1247, 0.025: 0.0278, 0.01: 0.0000, 0.005: 0.0000, 0.0025: 0.0000, 0.001: 0.0000},
    5: {0.05: 0.1987, 0.025: 0.1009, 0.01: 0.0210, 0.005: 0.0003, 0.0025: 0.0000, 0.001: 0.0000},
    6: {0.05: 0.1943, 0.025: 0.1081, 0.01: 0.0393, 0.005: 0.0086, 0.0025: 0.0007, 0.001: 0.0000},
    7: {0.05: 0.2009, 0.025: 0.1117, 0.01: 0.0439, 0.005: 0.0148, 0.0025: 0.0034, 0.001: 0.0002},
    8: {0.05: 0.2161, 0.025: 0.1260, 0.01: 0.0557, 0.005: 0.0282, 0.0025: 0.0101, 0.001: 0.0019},
    10: {0.05: 0.2562, 0.025: 0.1714, 0.01: 0.0906, 0.005: 0.0510, 0.0025: 0.0252, 0.001: 0.0075},
    12: {0.05: 0.2512, 0.025: 0.1641, 0.01: 0.0895, 0.005: 0.0558, 0.0025: 0.0309, 0.001: 0.0132},
    15: {0.05: 0.2626, 0.025: 0.1902, 0.01: 0.1180, 0.005: 0.0835, 0.0025: 0.0632, 0.001: 0.0367},
    20: {0.05: 0.2615, 0.025: 0.1876, 0.01: 0.1181, 0.005: 0.0817, 0.0025: 0.0563, 0.001: 0.0309},
}


def threshold(n: int, level: float) -> float:
    """THRESHOLDS at the largest tabulated n <= `n` and the largest tabulated level <= `level` (both
    conservative); 0 (no verdict) below the smallest n or level."""
    ns = [k for k in THRESHOLDS if k <= n]
    levels = [lv for lv in LEVELS if lv <= level * (1.0 + 1e-9)]
    if not ns or not levels:
        return 0.0
    return THRESHOLDS[max(ns)][max(levels)]


def min_n(level: float) -> int | None:
    """The fewest seeds at which a verdict is possible at `level` (threshold > 0); None: none tabulated."""
    return next((n for n in sorted(THRESHOLDS) if threshold(n, level) > 0.0), None)


def covers(level: float) -> bool:
    """Whether `level` is at or above the smallest tabulated level (below it no verdict is given)."""
    return level >= min(LEVELS) * (1.0 - 1e-9) and not math.isnan(level)
