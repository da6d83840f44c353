"""Reusable test helpers: real local servers the suites talk to."""
