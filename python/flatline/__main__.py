"""`python -m flatline …`: runs the `flatline` program this package
installed, with the same arguments (it replaces this process)."""

import os
import sys

from flatline import executable


def main() -> None:
    exe = executable()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
