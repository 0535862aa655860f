"""Benchmarks (entry): `make bench` runs each module here; each prints its tables and writes them as JSON."""
