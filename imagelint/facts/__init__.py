"""Facts: parsers and collectors that turn a target into data. Pure functions of the target; no rule logic."""
