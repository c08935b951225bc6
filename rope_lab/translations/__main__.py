"""``python -m rope_lab.translations update|build|init|status``: see
:mod:`rope_lab.translations.catalogs`."""

import sys

from rope_lab.translations.catalogs import main

sys.exit(main())
