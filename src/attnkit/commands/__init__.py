"""Subcommands of the ``attnkit`` CLI, one module each."""
