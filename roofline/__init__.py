"""roofline: headroom analysis of the Top-N kernels of an LLM-serving run.

Public API (imports are lazy so that `import roofline` stays cheap):

    roofline.analyze(topn, env=None, config=None, ...) -> dict   # the artifact
    roofline.hook.run(round_dir, ...)                             # the pipeline entry point
"""
from __future__ import annotations

__version__ = "0.1.0"


def analyze(*args, **kwargs):
    """See :func:`roofline.api.analyze`."""
    from roofline.api import analyze as _analyze

    return _analyze(*args, **kwargs)


def __getattr__(name):
    if name == "hook":
        import importlib

        return importlib.import_module("roofline.hook")
    raise AttributeError(name)
