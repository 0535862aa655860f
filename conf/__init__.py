# Makes conf/ importable so Hydra can also find it as a package (`python -m distill_sweep`).
