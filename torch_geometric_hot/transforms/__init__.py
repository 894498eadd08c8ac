r"""transforms."""
__all__ = []
