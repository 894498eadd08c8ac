r"""data."""
__all__ = []
