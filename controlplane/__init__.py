"""Reconcile, plans, the store, apply, and the ``cp`` command line."""

__version__ = "0.1.0"
