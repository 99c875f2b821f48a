import sys

from .grading.cli import main

sys.exit(main())
