r"""testing."""
__all__ = []
