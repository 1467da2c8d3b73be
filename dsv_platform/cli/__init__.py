"""The ``dsv`` command line."""
