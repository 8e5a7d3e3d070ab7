"""Allow ``python -m imagelint``."""

from imagelint.cli import main

if __name__ == "__main__":
    main()
