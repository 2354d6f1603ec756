"""The project's tests (a package, so that ``tests`` names this folder even where an
installed distribution ships a top-level ``tests`` package, as ppi-python does)."""
