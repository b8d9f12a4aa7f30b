"""`python -m kernelzero` runs the command line."""

import sys

from kernelzero.cli import main

sys.exit(main())
