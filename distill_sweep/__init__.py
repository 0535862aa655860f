"""distill_sweep: Hydra-configured sweeps reproducing "How to Distill your BERT" (Wang et al., ACL 2023)."""

__version__ = "0.1.0"
