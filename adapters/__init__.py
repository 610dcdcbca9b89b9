"""Cluster adapters behind one protocol (see :mod:`adapters.base`)."""
