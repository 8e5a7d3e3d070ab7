"""Output formats under hostile input: the lossless representation, channel escaping, fuzzing."""
