"""The report: tables, paired t-tests, the paper comparison and dev curves from a result store.

`python -m distill_sweep.report [results_dir] [key=value ...]` (see `cli`). Modules: `options` (the
options), `cli` (command line, main, files written), `build` (the report's sections), `tables` (the
table model), `render` (terminal, Markdown, LaTeX, CSV), `plots` (dev curves). Records are read by
`distill_sweep.analysis.frames`, statistics are in `distill_sweep.analysis.stats`, the paper's numbers in `distill_sweep.analysis.paper`.
"""
