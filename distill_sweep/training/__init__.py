"""Training (foundations): the run context, stages and their driver, the loop, checkpoints, processes, tracking,
metrics."""
