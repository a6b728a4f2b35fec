"""``python -m dashboard``: write the generated dashboard files."""

import sys

from dashboard.generate import main

sys.exit(main())
