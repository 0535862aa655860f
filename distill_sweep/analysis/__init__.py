"""Analysis (foundations): result frames read from a results directory, statistics, the paper's numbers, seed plans."""
