"""``python -m astjax``: the command line."""
import sys

from astjax.cli import main

sys.exit(main())
