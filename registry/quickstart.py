"""`python -m registry.quickstart`: the public name of registry/notebook/quickstart.py."""


def _main() -> None:
    from registry.notebook.quickstart import main

    main()


if __name__ == "__main__":
    _main()
