"""`python -m distill_sweep [overrides] [-m]`."""

from distill_sweep.train import main

if __name__ == "__main__":
    main()
