"""Prints one of the README's two opening commands, `main` (install and run the demo) or `tests` (install and run
the tests), joined into one line: the command under the comment line that starts "# Install" or "# Run the tests"
in the README's first fenced block, with its `\\` continuations."""

import os
import sys

HEADINGS = {"main": "# Install", "tests": "# Run the tests"}


def readme_command(readme_text, which):
    block = readme_text.split("```")[1]
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADINGS[which]))
    while lines[start].startswith("#"):
        start += 1
    command = []
    for line in lines[start:]:
        command.append(line.rstrip().removesuffix("\\").strip())
        if not line.rstrip().endswith("\\"):
            break
    return " ".join(command)


if __name__ == "__main__":
    with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as f:
        print(readme_command(f.read(), sys.argv[1]))
