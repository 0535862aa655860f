import sys

from distill_sweep.export.cli import main

sys.exit(main())
