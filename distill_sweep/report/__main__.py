import sys

from distill_sweep.report.cli import main

sys.exit(main())
