"""Verification at scale: the verdict store (`store.py`) and the local pool (`pool.py`)."""
