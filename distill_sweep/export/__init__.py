"""The export: a results directory's records as two tidy tables (Parquet or CSV) for pandas, polars and the like.

`python -m distill_sweep.export RESULTS_DIR [--out DIR_OR_FILE] [--format parquet|csv]` (see `cli`); `tables`
builds the tables.
"""
