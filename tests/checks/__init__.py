"""Tests of check kinds on real image trees."""
