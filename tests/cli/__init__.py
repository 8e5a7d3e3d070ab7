"""Tests of the command line: help, exit codes, listings."""
