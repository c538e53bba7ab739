"""`python -m autograder` is `lmgrade`."""
import sys

from autograder.cli import main

sys.exit(main())
