"""`python -m registry.lab`: the public name of registry/notebook/lab.py."""


def _main() -> int:
    import sys

    from registry.notebook.lab import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(_main())
