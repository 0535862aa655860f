"""`python -m distill_sweep [overrides] [-m]`."""

import sys

from distill_sweep.train import check_group_choices, main

if __name__ == "__main__":
    problem = check_group_choices(sys.argv[1:])
    if problem:
        print(f"distill_sweep: error: {problem}", file=sys.stderr)
        sys.exit(2)
    main()
