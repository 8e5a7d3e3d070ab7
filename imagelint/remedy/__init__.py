"""Remediation (``imagelint fix``): from failing findings to the typed fix actions their rules declare,
as a POSIX shell script or applied to a root directory, with the same effect either way."""
