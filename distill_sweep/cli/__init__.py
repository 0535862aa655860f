"""The command line's Hydra entry (entry): one job, from its composed config to its record."""
