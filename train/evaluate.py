"""``python -m jaxenvs.train.evaluate RUN_DIR ...``: the former name of ``jaxenvs evaluate RUN_DIR ...``
(`jaxenvs.cli.evaluate`), kept so that older hints and scripts still run."""

if __name__ == "__main__":
    import sys

    from jaxenvs.cli import main  # the command line, an application above the trainer

    sys.exit(main(["evaluate", *sys.argv[1:]]))
