r"""models."""
__all__ = []
