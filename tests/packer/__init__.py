"""Packer integration: real `packer build` runs (Debian's packer 1.6.6) and the shipped templates."""
