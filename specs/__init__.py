"""Spec language, loading and validation, and the data contracts (snapshot, actions)."""
