"""sr-dist: distributed, GPU-accelerated symbolic regression with LLM agents."""

__version__ = "0.1.0"
