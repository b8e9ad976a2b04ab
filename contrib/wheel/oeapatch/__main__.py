"""`python -m oeapatch`: the same as the console entry."""
import sys

from oeapatch import main

sys.exit(main())
