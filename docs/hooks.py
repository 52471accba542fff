"""MkDocs hook: generate the site's pictures and tables (docs/gen_assets.py) before each build."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("jaxenvs_docs_gen_assets", Path(__file__).with_name("gen_assets.py"))
gen_assets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_assets)


def on_pre_build(config, **kwargs):
    gen_assets.generate()
