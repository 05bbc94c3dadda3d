"""`python -m forensics` runs the command line."""

from forensics.cli import main

if __name__ == "__main__":
    main()
