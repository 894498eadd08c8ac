r"""datasets."""
__all__ = []
