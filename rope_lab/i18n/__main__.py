"""``python -m rope_lab.i18n update|build|init|status``: see :mod:`rope_lab.i18n.catalogs`."""

import sys

from rope_lab.i18n.catalogs import main

sys.exit(main())
