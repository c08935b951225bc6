"""``python -m rope_lab.exercises grade NOTEBOOK... --csv grades.csv``: see
:mod:`rope_lab.exercises.submissions`."""

import sys

from rope_lab.exercises.submissions import main

sys.exit(main())
