"""``jaxenvs list``: the registered environments with their traits."""

from __future__ import annotations

from jaxenvs.registration import pprint_registry
from .args import Command


def run(args) -> None:
    pprint_registry()


COMMAND = Command("list", run=run, help="list the registered environments with their traits")
