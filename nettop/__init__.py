"""nettop: live view and tuning of a Linux host's network stack."""

__version__ = "0.1.0"
