"""`python -m kernelzero.verify.worker OUT_FD`: the candidate's process (started by the judge only)."""

import os
import sys

from kernelzero.verify.worker.worker import main

if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
