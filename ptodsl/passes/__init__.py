"""Passes over the IR. Each module states what it requires and what it produces, and exposes
``run``."""
