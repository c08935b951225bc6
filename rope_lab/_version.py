"""The package's version, on the bottom floor: the provenance records of every layer read it
(timing, experiments, graders), and none of them may import the package's ``__init__``, which
sits above them all."""

__version__ = "0.1.0"
