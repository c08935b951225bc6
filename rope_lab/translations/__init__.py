"""The translation build tools: catalogs from the English notebooks, the Chinese edition from
the catalogs (``python -m rope_lab.translations update|build|init|status``, ``make
translations``).

Tools, not run time: they read the course map (:mod:`rope_lab.course`) and the package's
marked messages, so they sit on the top floor with the book, above everything they read. The
run time of the language layer, ``_`` and the language switch, is :mod:`rope_lab.i18n` at the
bottom, which every module may call and which imports nothing of rope_lab.

- :mod:`~rope_lab.translations.catalogs`: extract, merge, compile, build (the command).
- :mod:`~rope_lab.translations.notebooks`: what counts as a message in a notebook, and how a
  translated notebook is put together.
- :mod:`~rope_lab.translations.documents`: the same for a markdown document (TEACHING.md).
- :mod:`~rope_lab.translations.lint`: checks on translated messages (placeholders, markup).
"""
